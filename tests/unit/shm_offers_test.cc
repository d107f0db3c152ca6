// Offers (impl/transport/shm/offers.h): readers copy a writer's data straight from its
// memory; the writer returns only once each reader has read it or has a copy of its
// own (a late reader), never while a reader is reading; withdrawn offers and what a
// peer corrupts give errors. Threads of one process play writer and readers here
// (cross-memory attach on itself), and a child process plays the writer once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "impl/common/error.h"
#include "impl/transport/shm/offers.h"
#include "impl/transport/shm/outbox.h"
#include "tests/unit/child_process.h"

namespace starling::transport::shm {
namespace {

using starling::testing::CodeOf;
using starling::testing::Reap;
using starling::testing::Spawn;

uint64_t TestJob() { return (static_cast<uint64_t>(getpid()) << 32) ^ NewNonce(); }
uint64_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

WaitPolicy Policy() {
  WaitPolicy policy;
  policy.spin_seconds = 20e-6;
  policy.timeout_seconds = 30;
  return policy;
}

// An outbox of `readers` readers whose every reader may pull (its probe done).
struct Writer {
  explicit Writer(uint32_t readers) {
    box = Outbox::Create(SegmentName(TestJob(), "test", 0, NewNonce()), readers, 0, 4096);
    for (uint32_t r = 0; r < readers; ++r) EXPECT_EQ(box.ProbeOwner(r), "");
    sender = OfferSender(&box.ring(0), readers);
  }
  Outbox box;
  OfferSender sender;
};

std::vector<float> Tensor(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) * 0.5f;
  return v;
}

TEST(ShmOffers, ReadersCopyTheWritersTensorWhileItWaits) {
  constexpr uint32_t kReaders = 3;
  constexpr int kRounds = 300;
  Writer w(kReaders);
  // The "frames": each round's offer number and the tensor's address, written before
  // the number (release).
  std::vector<std::atomic<uint32_t>> numbers(kRounds + 1);
  std::vector<uint64_t> addresses(kRounds + 1);
  auto size_of = [](int round) { return 1000 + static_cast<size_t>(round) * 37; };
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (uint32_t r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      for (int round = 1; round <= kRounds; ++round) {
        uint32_t number;
        while ((number = numbers[round].load(std::memory_order_acquire)) == 0) std::this_thread::yield();
        if (r == 1 && round % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // late
        std::vector<float> got(size_of(round));
        PullOffer(w.box.ring(r), getpid(), number,
                  {OfferPiece{addresses[round], 0, got.size() * sizeof(float), reinterpret_cast<char*>(got.data())}},
                  Policy(), nullptr);
        if (got != Tensor(got.size(), static_cast<float>(round))) ++failures;
      }
    });
  }
  const std::vector<uint32_t> all{0, 1, 2};
  std::vector<float> tensor;
  int fallbacks = 0;
  for (int round = 1; round <= kRounds; ++round) {
    tensor = Tensor(size_of(round), static_cast<float>(round));
    uint32_t number;
    // A late reader may still hold every slot with unread copies: the real caller then
    // goes through its outbox; here it waits for the reader to catch up.
    while ((number = w.sender.Offer(all)) == 0) {
      ++fallbacks;
      std::this_thread::yield();
    }
    addresses[round] = Address(tensor.data());
    numbers[round].store(number, std::memory_order_release);
    w.sender.Finish(
        number, all, 20e-6, tensor.size() * sizeof(float),
        [&](char* dst) { std::memcpy(dst, tensor.data(), tensor.size() * sizeof(float)); }, Policy(), nullptr);
    // Every reader has read it or holds a copy: changing the tensor now is safe.
    std::fill(tensor.begin(), tensor.end(), -1.0f);
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  RecordProperty("fallbacks", fallbacks);
}

TEST(ShmOffers, ALateReaderReadsACopyKeptUntilItHasReadIt) {
  Writer w(1);
  std::vector<float> tensor = Tensor(5000, 3.0f);
  const size_t bytes = tensor.size() * sizeof(float);
  const uint32_t number = w.sender.Offer({0});
  ASSERT_NE(number, 0u);
  w.sender.Finish(
      number, {0}, 0.0, bytes + 64 + 8,
      [&](char* dst) {  // two pieces, packed: the tensor at 0, 8 more bytes at bytes + 64
        std::memcpy(dst, tensor.data(), bytes);
        std::memcpy(dst + bytes + 64, "late!ok", 8);
      },
      Policy(), nullptr);
  EXPECT_EQ(w.sender.moved_outstanding(), 1u);
  std::fill(tensor.begin(), tensor.end(), -1.0f);  // the writer moved on
  std::vector<float> got(tensor.size());
  char tail[8] = {};
  PullOffer(w.box.ring(0), getpid(), number,
            {OfferPiece{Address(tensor.data()), 0, bytes, reinterpret_cast<char*>(got.data())},
             OfferPiece{Address(tail), bytes + 64, 8, tail}},
            Policy(), nullptr);
  EXPECT_EQ(got, Tensor(5000, 3.0f));
  EXPECT_STREQ(tail, "late!ok");
  const uint32_t next = w.sender.Offer({0});  // reclaims the copy that was read
  EXPECT_NE(next, 0u);
  EXPECT_EQ(w.sender.moved_outstanding(), 0u);
  w.sender.Withdraw(next, {0});
}

TEST(ShmOffers, AWriterWithUnreadCopiesFallsBackInsteadOfWaiting) {
  Writer w(2);
  char byte = 7;
  // Reader 1 never reads: once its kOfferSlots slots hold copies, offers to it fail
  // (the caller uses the outbox), and offers to reader 0 alone still go.
  for (uint32_t i = 0; i < kOfferSlots; ++i) {
    const uint32_t number = w.sender.Offer({0, 1});
    ASSERT_NE(number, 0u);
    PullOffer(w.box.ring(0), getpid(), number, {OfferPiece{Address(&byte), 0, 1, &byte}}, Policy(), nullptr);
    w.sender.Finish(
        number, {0, 1}, 0.0, 1, [](char* dst) { *dst = 1; }, Policy(), nullptr);
  }
  EXPECT_EQ(w.sender.moved_outstanding(), kOfferSlots);
  EXPECT_EQ(w.sender.Offer({0, 1}), 0u);
  EXPECT_EQ(w.sender.Offer({1}), 0u);
  const uint32_t alone = w.sender.Offer({0});
  EXPECT_NE(alone, 0u);
  w.sender.Withdraw(alone, {0});
}

TEST(ShmOffers, WithdrawnUnreadableAndCorruptedOffersAreErrors) {
  Writer w(2);
  char byte = 0;
  std::string message;
  // Withdrawn: the reader fails, naming why.
  uint32_t number = w.sender.Offer({0});
  w.sender.Withdraw(number, {0});
  EXPECT_EQ(
      CodeOf(
          [&] {
            PullOffer(w.box.ring(0), getpid(), number, {OfferPiece{Address(&byte), 0, 1, &byte}}, Policy(), nullptr);
          },
          &message),
      Code::kTransport);
  EXPECT_NE(message.find("withdrew"), std::string::npos) << message;
  // A number the slot does not hold.
  EXPECT_EQ(CodeOf(
                [&] {
                  PullOffer(w.box.ring(1), getpid(), number + 1, {OfferPiece{Address(&byte), 0, 1, &byte}}, Policy(),
                            nullptr);
                },
                &message),
            Code::kTransport);
  EXPECT_NE(message.find("does not hold offer"), std::string::npos) << message;
  // An address that is not mapped: the read fails, the slot is released all the same.
  number = w.sender.Offer({0});
  EXPECT_EQ(CodeOf(
                [&] {
                  PullOffer(w.box.ring(0), getpid(), number, {OfferPiece{8, 0, 1, &byte}}, Policy(), nullptr);
                },
                &message),
            Code::kTransport);
  EXPECT_NE(message.find("cannot read"), std::string::npos) << message;
  w.sender.Finish(
      number, {0}, 1.0, 1, [](char*) { ADD_FAILURE() << "no copy for a reader that has read"; }, Policy(), nullptr);
  // A slot a peer overwrote: the writer's wait says so instead of hanging.
  number = w.sender.Offer({0});
  w.box.ring(0).slots[number % kOfferSlots].value.store(12345, std::memory_order_release);
  EXPECT_EQ(CodeOf(
                [&] {
                  w.sender.Finish(
                      number, {0}, 1.0, 1, [](char*) {}, Policy(), nullptr);
                },
                &message),
            Code::kTransport);
  EXPECT_NE(message.find("corrupted"), std::string::npos) << message;
  // A reader that cannot read this process: no offers to it.
  w.box.ring(1).readable.store(0, std::memory_order_release);
  EXPECT_EQ(w.sender.Offer({1}), 0u);
  EXPECT_EQ(CodeOf([&] { w.sender.Offer({2}); }), Code::kInvalidArgument);
}

TEST(ShmOffers, AReaderPullsFromAnotherProcess) {
  // The child writes and offers; this process (its parent, which may read it) pulls.
  const std::string name = SegmentName(TestJob(), "test", 0, NewNonce());
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = Spawn([&] {
    Outbox box = Outbox::Create(name, 1, 1, 4096);
    OfferSender sender(&box.ring(0), 1);
    // The parent's probe must have marked the ring readable before an offer goes.
    while (box.ring(0).readable.load(std::memory_order_acquire) != 1) std::this_thread::yield();
    std::vector<double> tensor(100000);
    for (size_t i = 0; i < tensor.size(); ++i) tensor[i] = 1.0 / static_cast<double>(i + 1);
    const uint32_t number = sender.Offer({0});
    const uint64_t message[2] = {number, Address(tensor.data())};
    if (write(pipe_fds[1], message, sizeof message) != sizeof message) return false;
    sender.Finish(
        number, {0}, 10.0, tensor.size() * sizeof(double), [](char*) {}, Policy(), nullptr);
    return sender.moved_outstanding() == 0;  // the parent read it in time, no copy made
  });
  Outbox reader;
  for (int i = 0; i < 2000 && !reader.valid(); ++i) {
    try {
      reader = Outbox::Open(name);
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ASSERT_TRUE(reader.valid());
  EXPECT_EQ(reader.owner_pid(), child);
  ASSERT_EQ(reader.ProbeOwner(0), "");
  uint64_t message[2];
  ASSERT_EQ(read(pipe_fds[0], message, sizeof message), static_cast<ssize_t>(sizeof message));
  std::vector<double> got(100000);
  PullOffer(reader.ring(0), reader.owner_pid(), static_cast<uint32_t>(message[0]),
            {OfferPiece{message[1], 0, got.size() * sizeof(double), reinterpret_cast<char*>(got.data())}}, Policy(),
            nullptr);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 1.0 / static_cast<double>(i + 1)) << i;
  EXPECT_EQ(Reap(child), 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(ShmOffers, AWriterWhoseProcessIsGoneIsAPeerFailure) {
  const std::string name = SegmentName(TestJob(), "test", 0, NewNonce());
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = Spawn([&] {
    Outbox box = Outbox::Create(name, 1, 1, 4096);
    OfferSender sender(&box.ring(0), 1);
    while (box.ring(0).readable.load(std::memory_order_acquire) != 1) std::this_thread::yield();
    std::vector<char> tensor(100000, 'a');
    const uint64_t message[2] = {sender.Offer({0}), Address(tensor.data())};
    return write(pipe_fds[1], message, sizeof message) == sizeof message;  // and dies without Finish
  });
  Outbox reader;
  for (int i = 0; i < 2000 && !reader.valid(); ++i) {
    try {
      reader = Outbox::Open(name);
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ASSERT_TRUE(reader.valid());
  ASSERT_EQ(reader.ProbeOwner(0), "");
  uint64_t message[2];
  ASSERT_EQ(read(pipe_fds[0], message, sizeof message), static_cast<ssize_t>(sizeof message));
  ASSERT_EQ(Reap(child), 0);  // gone
  std::vector<char> got(100000);
  std::string text;
  EXPECT_EQ(CodeOf(
                [&] {
                  PullOffer(reader.ring(0), reader.owner_pid(), static_cast<uint32_t>(message[0]),
                            {OfferPiece{message[1], 0, got.size(), got.data()}}, Policy(), nullptr);
                },
                &text),
            Code::kPeerFailed);
  EXPECT_NE(text.find("is gone"), std::string::npos) << text;
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace starling::transport::shm
