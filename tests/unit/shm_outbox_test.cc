// The neighbor outbox (impl/transport/shm/outbox.h) across real processes: readers see
// every publication addressed to them intact while they hold it, the writer never
// overwrites a held buffer and gives up (for MPI) after its bound instead of waiting
// forever, waits end through `check`, and what a peer announces or corrupts is checked.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "impl/common/error.h"
#include "impl/transport/shm/outbox.h"
#include "tests/unit/child_process.h"

namespace starling::transport::shm {
namespace {

using starling::testing::CodeOf;
using starling::testing::Reap;
using starling::testing::Spawn;

uint64_t TestJob() { return (static_cast<uint64_t>(getpid()) << 32) ^ NewNonce(); }

unsigned char Pattern(uint32_t n, size_t i) { return static_cast<unsigned char>(n * 131u + i * 7u + (i >> 8)); }

// Publication n addresses reader r unless (n + r) % 3 == 0: the set changes every time,
// as dynamic topologies make it.
bool Addressed(uint32_t n, uint32_t r) { return (n + r) % 3 != 0; }
size_t SizeOf(uint32_t n) { return (n * 2654435761u) % 200000; }

TEST(ShmOutbox, ReadersSeeEveryPublicationIntactWhileTheyHoldIt) {
  constexpr uint32_t kReaders = 2;
  constexpr uint32_t kPublications = 600;
  const std::string name = SegmentName(TestJob(), "test", 0, NewNonce());
  Outbox writer = Outbox::Create(name, kReaders, kReaders, 200000);
  WaitPolicy policy;
  policy.spin_seconds = 20e-6;
  policy.timeout_seconds = 60;
  std::vector<pid_t> readers;
  for (uint32_t r = 0; r < kReaders; ++r) {
    readers.push_back(Spawn([&, r] {
      const Outbox box = Outbox::Open(name);
      for (uint32_t n = 1; n <= kPublications; ++n) {
        if (!Addressed(n, r)) continue;
        const auto* data = reinterpret_cast<const unsigned char*>(box.Read(n, 0, SizeOf(n), policy, nullptr));
        for (size_t i = 0; i < SizeOf(n); ++i)
          if (data[i] != Pattern(n, i)) return false;
        if (n % 50 == r) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a slow reader
        for (size_t i = 0; i < SizeOf(n); i += 997)  // still intact after the pause
          if (data[i] != Pattern(n, i)) return false;
        box.Release(r, n);
      }
      return true;
    }));
  }
  for (uint32_t n = 1; n <= kPublications; ++n) {
    std::vector<uint32_t> to;
    for (uint32_t r = 0; r < kReaders; ++r)
      if (Addressed(n, r)) to.push_back(r);
    auto* buffer = reinterpret_cast<unsigned char*>(writer.Begin(SizeOf(n), to, 30.0, policy, nullptr));
    ASSERT_NE(buffer, nullptr) << "publication " << n;
    for (size_t i = 0; i < SizeOf(n); ++i) buffer[i] = Pattern(n, i);
    ASSERT_EQ(writer.Publish(), n);
  }
  for (pid_t pid : readers) EXPECT_EQ(Reap(pid), 0);
}

TEST(ShmOutbox, WriterGivesUpOnAHeldBufferAndChecksEndItsWait) {
  const std::string name = SegmentName(TestJob(), "test", 0, NewNonce());
  Outbox writer = Outbox::Create(name, 1, 1, 4096);
  const Outbox reader = Outbox::Open(name);
  WaitPolicy policy;
  ASSERT_NE(writer.Begin(100, {0}, 1.0, policy, nullptr), nullptr);
  ASSERT_EQ(writer.Publish(), 1u);
  ASSERT_NE(writer.Begin(100, {0}, 1.0, policy, nullptr), nullptr);  // the other buffer
  ASSERT_EQ(writer.Publish(), 2u);
  // Publication 3 needs buffer 0, still held by the reader (1 not released).
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(writer.Begin(100, {0}, 0.05, policy, nullptr), nullptr);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 1.0);
  // A check that throws (an abort, a gone peer) ends the wait at once with its error.
  EXPECT_EQ(CodeOf([&] { writer.Begin(100, {0}, 30.0, policy, [] { Fail(Code::kAborted, "aborted"); }); }),
            Code::kAborted);
  // Releasing 2 releases 1 too: the writer goes on.
  reader.Release(0, 2);
  ASSERT_NE(writer.Begin(100, {}, 1.0, policy, nullptr), nullptr);
  EXPECT_EQ(writer.Publish(), 3u);
  // Nobody addressed by 3: publication 5 (buffer 0 again) needs no release.
  ASSERT_NE(writer.Begin(100, {0}, 1.0, policy, nullptr), nullptr);
  EXPECT_EQ(writer.Publish(), 4u);
  ASSERT_NE(writer.Begin(100, {0}, 0.01, policy, nullptr), nullptr);
  EXPECT_EQ(writer.Publish(), 5u);
  // Too large for the buffers: nullptr at once (the caller sends through MPI).
  reader.Release(0, 5);
  EXPECT_EQ(writer.Begin(4097, {0}, 1.0, policy, nullptr), nullptr);
}

TEST(ShmOutbox, WhatAPeerAnnouncesOrCorruptsIsChecked) {
  const std::string name = SegmentName(TestJob(), "test", 0, NewNonce());
  Outbox writer = Outbox::Create(name, 2, 2, 8192);
  const Outbox reader = Outbox::Open(name);
  WaitPolicy policy;
  policy.timeout_seconds = 0.05;
  std::string message;
  // Offsets and sizes from a frame must lie inside a buffer.
  ASSERT_NE(writer.Begin(8192, {0}, 1.0, policy, nullptr), nullptr);
  writer.Publish();
  EXPECT_NE(reader.Read(1, 0, 8192, policy, nullptr), nullptr);
  EXPECT_EQ(CodeOf([&] { reader.Read(1, 1, 8192, policy, nullptr); }, &message), Code::kTransport);
  EXPECT_NE(message.find("8192 bytes at offset 1"), std::string::npos) << message;
  EXPECT_EQ(CodeOf([&] { reader.Read(1, ~uint64_t{0}, 2, policy, nullptr); }), Code::kTransport);
  // A publication that is never made: bounded by the policy, not a hang.
  EXPECT_EQ(CodeOf([&] { reader.Read(2, 0, 1, policy, nullptr); }), Code::kTimeout);
  // A writer "far ahead" of a publication this reader holds is a corrupted outbox.
  EXPECT_EQ(CodeOf([&] { reader.Read(0xFFFFFF00u, 0, 1, policy, nullptr); }), Code::kTransport);
  EXPECT_EQ(CodeOf([&] { reader.Release(2, 1); }), Code::kInvalidArgument);
  // A corrupted header: refused when mapped (the outbox header follows the segment's).
  const std::string other = SegmentName(TestJob(), "test", 1, NewNonce());
  Outbox victim = Outbox::Create(other, 1, 3, 4096);
  const int fd = open(("/dev/shm" + other).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  auto* bytes = static_cast<unsigned char*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  close(fd);
  ASSERT_NE(bytes, MAP_FAILED);
  bytes[kSegmentHeaderBytes] ^= 1;  // the magic
  EXPECT_EQ(CodeOf([&] { Outbox::Open(other); }, &message), Code::kTransport);
  EXPECT_NE(message.find("corrupted or foreign header"), std::string::npos) << message;
  bytes[kSegmentHeaderBytes] ^= 1;
  bytes[kSegmentHeaderBytes + 16] = 0xFF;  // the capacity: buffers beyond the segment
  EXPECT_EQ(CodeOf([&] { Outbox::Open(other); }, &message), Code::kTransport);
  EXPECT_NE(message.find("corrupted header"), std::string::npos) << message;
  munmap(bytes, 4096);
  victim.Unlink();
}

}  // namespace
}  // namespace starling::transport::shm
