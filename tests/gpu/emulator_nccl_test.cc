// The emulated NCCL between processes, under mpiexec at 1..4 ranks: MPI only carries the
// unique id (MPI_Bcast) and keeps the ranks in step; every transfer goes through the
// emulator's own sockets, on streams with random delays.
#include <cmath>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "emulator_loader.h"
#include "impl/device/kernels/host_kernels.h"

namespace {

using starling::emu_test::Emu;

enum { kF16 = 0, kF32 = 2, kI8 = 4, kI16 = 5 };
enum { kSum = 0, kMin = 2, kMax = 3 };
const size_t kSizes[] = {2, 2, 4, 8, 1, 2, 4, 8, 1};

const starling_device_plugin_t& T() { return *Emu().t; }
std::string Err() { return T().last_error(); }

int Rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int Size() {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::vector<uint8_t> RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct Buffer {
  explicit Buffer(size_t b) : bytes(b) { EXPECT_EQ(T().device_alloc(0, b, &p), 0) << Err(); }
  ~Buffer() { EXPECT_EQ(T().device_free(p), 0) << Err(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* c() const { return static_cast<char*>(p); }
  void Upload(const void* src) const { EXPECT_EQ(Emu().memcpy(p, src, bytes), 0) << Emu().last_error(); }
  std::vector<uint8_t> Download() const {
    std::vector<uint8_t> out(bytes);
    EXPECT_EQ(Emu().memcpy(out.data(), p, bytes), 0) << Emu().last_error();
    return out;
  }
  void* p = nullptr;
  size_t bytes;
};

// A communicator over all MPI ranks, and a stream, for one test.
class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(T().nccl_load(), 0) << Err();
    char id[STARLING_NCCL_ID_BYTES] = {};
    if (Rank() == 0) {
      ASSERT_EQ(T().nccl_unique_id(id), 0) << Err();
    }
    MPI_Bcast(id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ASSERT_EQ(T().nccl_comm_init(&comm_, Size(), id, Rank(), 0), 0) << Err();
    ASSERT_EQ(starling::emu_test::WaitReady(comm_), 0) << Err();
    ASSERT_EQ(T().stream_create(0, &stream_), 0) << Err();
  }
  void TearDown() override {
    if (stream_ != nullptr) T().stream_destroy(stream_);
    if (comm_ != nullptr) {
      EXPECT_EQ(T().nccl_comm_destroy(comm_), 0) << Err();
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  void Sync() { ASSERT_EQ(T().stream_synchronize(stream_), 0) << Err(); }

  void* comm_ = nullptr;
  void* stream_ = nullptr;
};

// NCCL's MIN/MAX of floating types: fminf/fmaxf (the half types through float), where a
// NaN loses to a number; Starling's HostReduce, where it wins, for the rest.
void NcclReduce(void* acc, const void* part, size_t count, int dtype, int op) {
  namespace hk = starling::device::kernels;
  const bool min_max = op == kMin || op == kMax;
  if (!min_max || (dtype != kF32 && dtype != kF16)) {
    ASSERT_EQ(hk::HostReduce(acc, part, count, dtype, op), 0);
    return;
  }
  std::vector<float> a(count), b(count);
  ASSERT_EQ(hk::HostConvert(a.data(), kF32, acc, dtype, count), 0);
  ASSERT_EQ(hk::HostConvert(b.data(), kF32, part, dtype, count), 0);
  for (size_t i = 0; i < count; ++i) a[i] = op == kMin ? std::fmin(a[i], b[i]) : std::fmax(a[i], b[i]);
  ASSERT_EQ(hk::HostConvert(acc, dtype, a.data(), kF32, count), 0);
}

TEST_F(NcclTest, AllReduceGivesTheRankOrderReductionOnEveryRank) {
  const int n = Size(), me = Rank();
  constexpr size_t count = 4099;
  for (int dtype : {kF32, kI8, kF16}) {
    for (int op : {kSum, kMin, kMax}) {
      const size_t bytes = count * kSizes[dtype];
      auto seed = [&](int r) { return static_cast<unsigned>(r * 100 + dtype * 10 + op); };
      std::vector<uint8_t> expected = RandomBytes(bytes, seed(0));
      for (int r = 1; r < n; ++r) {
        auto part = RandomBytes(bytes, seed(r));
        NcclReduce(expected.data(), part.data(), count, dtype, op);
      }
      Buffer send(bytes), recv(bytes);
      // The input arrives through the stream after a delay: all_reduce must wait for it.
      auto mine = RandomBytes(bytes, seed(me));
      ASSERT_EQ(Emu().sleep_on_stream(stream_, 5000), 0);
      ASSERT_EQ(Emu().fill_on_stream(stream_, send.p, mine.data(), bytes), 0);
      ASSERT_EQ(T().nccl_all_reduce(send.p, recv.p, count, dtype, op, comm_, stream_), 0) << Err();
      // In place too.
      ASSERT_EQ(T().nccl_all_reduce(send.p, send.p, count, dtype, op, comm_, stream_), 0) << Err();
      Sync();
      EXPECT_EQ(recv.Download(), expected) << "dtype " << dtype << " op " << op;
      EXPECT_EQ(send.Download(), expected) << "in place, dtype " << dtype << " op " << op;
    }
  }
}

// Rank r gets block r of the rank-order reduction, out of place and in place
// (recv = send + r * count).
TEST_F(NcclTest, ReduceScatterGivesEachRankItsBlock) {
  const int n = Size(), me = Rank();
  constexpr size_t count = 1031;
  for (int dtype : {kF32, kF16}) {
    for (int op : {kSum, kMax}) {
      const size_t block = count * kSizes[dtype], bytes = block * n;
      auto seed = [&](int r) { return static_cast<unsigned>(r * 100 + dtype * 10 + op + 7); };
      std::vector<uint8_t> expected = RandomBytes(bytes, seed(0));
      for (int r = 1; r < n; ++r) {
        auto part = RandomBytes(bytes, seed(r));
        NcclReduce(expected.data(), part.data(), count * n, dtype, op);
      }
      const std::vector<uint8_t> mine_expected(expected.begin() + me * block, expected.begin() + (me + 1) * block);
      Buffer send(bytes), recv(block);
      auto mine = RandomBytes(bytes, seed(me));
      send.Upload(mine.data());
      ASSERT_EQ(T().nccl_reduce_scatter(send.p, recv.p, count, dtype, op, comm_, stream_), 0) << Err();
      ASSERT_EQ(T().nccl_reduce_scatter(send.p, send.c() + me * block, count, dtype, op, comm_, stream_), 0) << Err();
      Sync();
      EXPECT_EQ(recv.Download(), mine_expected) << "dtype " << dtype << " op " << op;
      std::vector<uint8_t> after = send.Download();
      EXPECT_EQ(std::vector<uint8_t>(after.begin() + me * block, after.begin() + (me + 1) * block), mine_expected)
          << "in place";
      std::memcpy(mine.data() + me * block, mine_expected.data(), block);
      EXPECT_EQ(after, mine) << "in place: the other blocks are untouched";
    }
  }
  Buffer send(16), recv(16);
  EXPECT_NE(T().nccl_reduce_scatter(send.p, recv.p, 4, kI16, kSum, comm_, stream_), 0);
  EXPECT_NE(std::string(Err()).find("NCCL has no dtype"), std::string::npos) << Err();
}

// As NCCL (fminf/fmaxf): a NaN on one rank is lost to the other ranks' numbers. The
// core must not rely on NCCL's MIN/MAX for floating types (gpu_ops_test checks it does not).
TEST_F(NcclTest, FloatMinMaxDropNaNsLikeNccl) {
  if (Size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Buffer send(4 * sizeof(float)), recv(4 * sizeof(float));
  const float nan = std::nanf("");
  const float mine[4] = {Rank() == 0 ? nan : 1.0f, 2.0f, Rank() == 1 ? nan : -3.0f, 4.0f};
  send.Upload(mine);
  for (int op : {kMin, kMax}) {
    ASSERT_EQ(T().nccl_all_reduce(send.p, recv.p, 4, kF32, op, comm_, stream_), 0) << Err();
    Sync();
    std::vector<uint8_t> got = recv.Download();
    float out[4];
    std::memcpy(out, got.data(), sizeof out);
    EXPECT_EQ(out[0], 1.0f) << "op " << op;
    EXPECT_EQ(out[1], 2.0f);
    EXPECT_EQ(out[2], -3.0f);
    EXPECT_EQ(out[3], 4.0f);
  }
}

TEST_F(NcclTest, BroadcastFromEveryRoot) {
  const int n = Size(), me = Rank();
  constexpr size_t bytes = 100003;
  for (int root = 0; root < n; ++root) {
    const auto data = RandomBytes(bytes, 7 + root);
    Buffer send(bytes), recv(bytes);
    if (me == root) send.Upload(data.data());
    ASSERT_EQ(T().nccl_broadcast(send.p, recv.p, bytes, root, comm_, stream_), 0) << Err();
    Sync();
    EXPECT_EQ(recv.Download(), data) << "root " << root;
  }
}

TEST_F(NcclTest, AllGatherPutsBlocksInRankOrder) {
  const int n = Size(), me = Rank();
  constexpr size_t bytes = 12345;
  std::vector<uint8_t> expected;
  for (int r = 0; r < n; ++r) {
    auto block = RandomBytes(bytes, 50 + r);
    expected.insert(expected.end(), block.begin(), block.end());
  }
  Buffer send(bytes), recv(bytes * n), in_place(bytes * n);
  send.Upload(expected.data() + me * bytes);
  ASSERT_EQ(Emu().memcpy(in_place.c() + me * bytes, expected.data() + me * bytes, bytes), 0);
  ASSERT_EQ(T().nccl_all_gather(send.p, recv.p, bytes, comm_, stream_), 0) << Err();
  ASSERT_EQ(T().nccl_all_gather(in_place.c() + me * bytes, in_place.p, bytes, comm_, stream_), 0) << Err();
  Sync();
  EXPECT_EQ(recv.Download(), expected);
  EXPECT_EQ(in_place.Download(), expected);
}

// Every rank sends 4 MiB to both neighbours and receives from both, all in one group:
// without the group semantics this deadlocks (or, in the emulator, times out).
TEST_F(NcclTest, GroupedRingInBothDirections) {
  const int n = Size(), me = Rank();
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  constexpr size_t bytes = 4 << 20;
  auto pattern = [](int rank, int direction) { return RandomBytes(bytes, 1000 + rank * 2 + direction); };
  Buffer to_right(bytes), to_left(bytes), from_left(bytes), from_right(bytes);
  to_right.Upload(pattern(me, 0).data());
  to_left.Upload(pattern(me, 1).data());
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(T().nccl_group_start(), 0) << Err();
    ASSERT_EQ(T().nccl_group_start(), 0) << Err();  // nested: the outer end issues
    ASSERT_EQ(T().nccl_send(to_right.p, bytes, right, comm_, stream_), 0) << Err();
    ASSERT_EQ(T().nccl_send(to_left.p, bytes, left, comm_, stream_), 0) << Err();
    ASSERT_EQ(T().nccl_group_end(), 0) << Err();
    ASSERT_EQ(T().nccl_recv(from_left.p, bytes, left, comm_, stream_), 0) << Err();
    ASSERT_EQ(T().nccl_recv(from_right.p, bytes, right, comm_, stream_), 0) << Err();
    ASSERT_EQ(T().nccl_group_end(), 0) << Err();
    Sync();
    EXPECT_EQ(from_left.Download(), pattern(left, 0)) << "round " << round;
    EXPECT_EQ(from_right.Download(), pattern(right, 1)) << "round " << round;
  }
}

// Ranks that disagree on a size get an error, not corrupt data or a hang.
TEST_F(NcclTest, MismatchedSizesFail) {
  const int n = Size(), me = Rank();
  if (n < 2) GTEST_SKIP() << "needs a peer";
  const size_t count = me == 0 ? 100 : 200;
  Buffer a(800), b(800);
  ASSERT_EQ(T().nccl_all_reduce(a.p, b.p, count, kF32, kSum, comm_, stream_), 0) << Err();
  EXPECT_NE(T().stream_synchronize(stream_), 0);
  EXPECT_NE(Err().find("mismatched collectives"), std::string::npos) << Err();
  // Every rank has seen a frame that disagrees with its own call: none has left yet, so
  // none saw a closed connection instead.
  MPI_Barrier(MPI_COMM_WORLD);
  // The communicator is unusable from now on.
  EXPECT_NE(T().nccl_all_reduce(a.p, b.p, count, kF32, kSum, comm_, stream_), 0);
  EXPECT_EQ(T().nccl_comm_abort(comm_), 0) << Err();
  comm_ = nullptr;
}

TEST_F(NcclTest, MismatchedSendAndReceiveSizesFail) {
  const int n = Size(), me = Rank();
  if (n < 2) GTEST_SKIP() << "needs a peer";
  Buffer a(64);
  if (me == 0) {
    ASSERT_EQ(T().nccl_send(a.p, 16, 1, comm_, stream_), 0) << Err();
    // Its receiver fails and destroys its communicator: the send cannot complete.
    EXPECT_NE(T().stream_synchronize(stream_), 0);
    EXPECT_NE(Err().find("rank 1"), std::string::npos) << Err();
  } else if (me == 1) {
    ASSERT_EQ(T().nccl_recv(a.p, 32, 0, comm_, stream_), 0) << Err();
    EXPECT_NE(T().stream_synchronize(stream_), 0);
    EXPECT_NE(Err().find("received 16 bytes from rank 0, but expected 32"), std::string::npos) << Err();
  }
  EXPECT_EQ(T().nccl_comm_destroy(comm_), 0) << Err();
  comm_ = nullptr;
}

}  // namespace
