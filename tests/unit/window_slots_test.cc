// A window's shared slots (impl/windows/slots.h) between real processes: an origin
// finds its own slot in the owner's segment, its puts (other buffer, then the flip under
// the lock) reach the owner exactly, the shared lock excludes across processes, a
// holder that dies leaves waiters a way out (their checks), and a corrupted segment
// is an error, never a wild access.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "impl/common/error.h"
#include "impl/transport/shm/lock.h"
#include "impl/transport/shm/segment.h"
#include "impl/runtime/context.h"
#include "impl/windows/registry.h"
#include "impl/windows/slots.h"
#include "tests/unit/child_process.h"

namespace starling::windows {
namespace {

using starling::testing::CodeOf;
using starling::testing::Reap;
using starling::testing::Spawn;
using transport::shm::NewNonce;
using transport::shm::SegmentName;
using transport::shm::SharedLock;
using transport::shm::WaitPolicy;

std::string FreshName() { return SegmentName((static_cast<uint64_t>(getpid()) << 32) ^ NewNonce(), "wtest", 0, NewNonce()); }

TEST(WindowSlots, EachOriginFindsItsSlotAndItsPutsReachTheOwner) {
  const std::vector<double> initial = {1, 2, 3, 4, 5};
  const size_t bytes = initial.size() * sizeof(double);
  const std::string name = FreshName();
  SlotArea owner = SlotArea::Share(name, 7, /*owner=*/0, {2, 5, 9}, {}, bytes, initial.data(), 0);
  ASSERT_EQ(owner.slots(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(std::memcmp(owner.slot(i).value(), initial.data(), bytes), 0);
  // Origin 5, in another process: maps the segment (the last of three expected
  // mappers has not come, so the name is still there), writes two puts.
  EXPECT_EQ(Reap(Spawn([&] {
              size_t index = 99;
              SlotArea mine = SlotArea::Attach(name, 7, 0, 5, bytes, &index);
              if (index != 1) return false;
              const Slot slot = mine.slot(index);
              for (double round : {10.0, 20.0}) {
                std::vector<double> data(initial.size());
                for (size_t k = 0; k < data.size(); ++k) data[k] = round + k;
                std::memcpy(slot.other(), data.data(), bytes);
                slot.state->lock.Lock(WaitPolicy{}, nullptr, "the test");
                slot.state->current.store(slot.state->current.load() ^ 1u, std::memory_order_release);
                ++slot.state->version;
                slot.state->p = round / 10;
                slot.state->lock.Unlock();
              }
              return true;
            })),
            0);
  const Slot seen = owner.slot(1);
  EXPECT_EQ(seen.state->version, 2);
  EXPECT_EQ(seen.state->p, 2.0);
  const double* value = reinterpret_cast<const double*>(seen.value());
  for (size_t k = 0; k < initial.size(); ++k) EXPECT_EQ(value[k], 20.0 + k);
  // The other origins' slots are untouched.
  EXPECT_EQ(std::memcmp(owner.slot(0).value(), initial.data(), bytes), 0);
  EXPECT_EQ(owner.slot(2).state->version, 0);
}

TEST(WindowSlots, TheLockExcludesAcrossProcesses) {
  auto* shared = static_cast<char*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  auto* lock = new (shared) SharedLock();
  auto* counter = reinterpret_cast<volatile uint64_t*>(shared + 128);  // plain: only the lock orders it
  constexpr int kRounds = 200000;
  auto work = [&] {
    for (int i = 0; i < kRounds; ++i) {
      lock->Lock(WaitPolicy{}, nullptr, "the test");
      *counter = *counter + 1;
      lock->Unlock();
    }
    return true;
  };
  const pid_t child = Spawn(work);
  work();
  EXPECT_EQ(Reap(child), 0);
  EXPECT_EQ(*counter, 2u * kRounds);
  EXPECT_EQ(lock->state.load(), 0u);
  munmap(shared, 4096);
}

TEST(WindowSlots, AHolderThatDiesLeavesWaitersAWayOut) {
  auto* shared = static_cast<char*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  auto* lock = new (shared) SharedLock();
  EXPECT_EQ(Reap(Spawn([lock] {
              lock->Lock(WaitPolicy{}, nullptr, "the test");
              return true;  // and dies holding it
            })),
            0);
  // The check stands in for the failure probes: it finds the holder gone.
  int checks = 0;
  auto check = [&] {
    if (++checks == 3) throw Error(Code::kPeerFailed, "the holder is gone");
  };
  WaitPolicy policy;
  policy.slice_seconds = 0.001;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(CodeOf([&] { lock->Lock(policy, check, "the test"); }), Code::kPeerFailed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Without a check, the policy's timeout ends the wait.
  policy.timeout_seconds = 0.05;
  EXPECT_EQ(CodeOf([&] { lock->Lock(policy, nullptr, "the test"); }), Code::kTimeout);
  munmap(shared, 4096);
}

TEST(WindowSlots, ACorruptedSegmentIsAnError) {
  const size_t bytes = 40;
  const std::string name = FreshName();
  SlotArea owner = SlotArea::Share(name, 3, 0, {1}, {4}, bytes, nullptr, 0x1000);
  std::vector<char> copy(owner.region(), owner.region() + owner.region_bytes());
  size_t index = 0;
  auto view = [&](std::vector<char> region, uint32_t id, int origin, size_t tensor_bytes) {
    return CodeOf([&] { SlotArea::View(region.data(), region.size(), id, 0, origin, tensor_bytes, &index); });
  };
  EXPECT_EQ(view(copy, 3, 1, bytes), Code::kOk);
  EXPECT_EQ(index, 0u);
  EXPECT_EQ(view(copy, 3, 4, bytes), Code::kOk) << "a reader";
  EXPECT_EQ(index, SlotArea::kNone);
  EXPECT_EQ(view(copy, 4, 1, bytes), Code::kTransport) << "another window";
  EXPECT_EQ(view(copy, 3, 2, bytes), Code::kTransport) << "neither a slot nor a read counter for this peer";
  EXPECT_EQ(view(copy, 3, 1, 48), Code::kTransport) << "another size";
  EXPECT_EQ(view(std::vector<char>(copy.begin(), copy.end() - 1), 3, 1, bytes), Code::kTransport) << "truncated";
  std::vector<char> bad = copy;
  bad[0] ^= 1;
  EXPECT_EQ(view(bad, 3, 1, bytes), Code::kTransport) << "magic";
  bad = copy;
  reinterpret_cast<uint32_t*>(bad.data() + 16)[1] = 1u << 20;  // slots
  EXPECT_EQ(view(bad, 3, 1, bytes), Code::kTransport) << "slot count";
  bad = copy;
  reinterpret_cast<uint32_t*>(bad.data() + 32)[0] = 100;  // readers: the slots move past the region
  EXPECT_EQ(view(bad, 3, 1, bytes), Code::kTransport) << "reader count";
  // A segment for readers only (no same-host in-neighbor puts here) holds no tensor
  // data: a tensor larger than the whole segment is fine.
  const size_t big = 1 << 20;
  SlotArea readers_only = SlotArea::Share(FreshName(), 3, 0, {}, {1, 4}, big, nullptr, 0x2000);
  ASSERT_LT(readers_only.region_bytes(), big);
  std::vector<char> reader_copy(readers_only.region(), readers_only.region() + readers_only.region_bytes());
  EXPECT_EQ(view(reader_copy, 3, 4, big), Code::kOk);
  EXPECT_EQ(index, SlotArea::kNone);
  EXPECT_EQ(view(reader_copy, 3, 2, big), Code::kTransport) << "not a reader";
  // A corrupted buffer index: the origin's put refuses instead of writing anywhere.
  owner.slot(0).state->current.store(7);
  EXPECT_EQ(CodeOf([&] { owner.slot(0).other(); }), Code::kTransport);
  EXPECT_EQ(CodeOf([&] { owner.slot(0).value(); }), Code::kTransport);
}

// A window whose in-neighbor never maps its segment (it failed first, or the ranks
// created windows in different orders) keeps the name in /dev/shm while it lives; when
// its context goes, Registry::UnlinkSegments removes the name (the window, which may be
// kept until the process exits, keeps its mapping).
TEST(WindowSlots, AContextThatGoesRemovesSegmentsNoPeerMapped) {
  std::vector<double> data(8, 1.0);
  TensorView tensor;
  tensor.data = data.data();
  tensor.dtype = DType::kFloat64;
  tensor.shape = {8};
  tensor.numel = 8;
  tensor.bytes = 8 * sizeof(double);
  auto topology = std::make_shared<runtime::TopologyState>();
  topology->graph = std::make_shared<const topology::Graph>(topology::Graph::FromEdges(2, {{1, 0, 1.0}, {0, 1, 1.0}}));
  SharedSlotsPlan share;
  share.origins = {1};
  share.name = FreshName();
  auto window = std::make_shared<Window>(1, "never_mapped", tensor, /*rank=*/0, /*size=*/2, std::vector<int>{1},
                                         std::vector<int>{1}, topology, data.data(), nullptr, share);
  ASSERT_EQ(window->shared_slots_error(), "");
  Registry registry;
  registry.Add(window);
  const std::string path = "/dev/shm" + share.name;
  EXPECT_EQ(access(path.c_str(), F_OK), 0) << "rank 1 never mapped it: the name is still there";
  registry.UnlinkSegments();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " is left in /dev/shm";
  EXPECT_NE(registry.Find(1), nullptr);  // the window itself lives on
}

}  // namespace
}  // namespace starling::windows
