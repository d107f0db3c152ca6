// The same-host shared-memory building blocks (impl/transport/shm) between real
// processes: segments (nothing left in /dev/shm, also when the creator is killed;
// names of two jobs never collide; a full /dev/shm is an error, not a SIGBUS), the
// shared futex (a wake crosses processes), the mailbox (versions and bytes exact under
// concurrent writer and readers) and corrupted headers (errors, never crashes).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "impl/common/error.h"
#include "impl/transport/shm/futex.h"
#include "impl/transport/shm/mailbox.h"
#include "impl/transport/shm/probe.h"
#include "impl/transport/shm/segment.h"
#include "tests/unit/child_process.h"

namespace starling::transport::shm {
namespace {

using starling::testing::CodeOf;
using starling::testing::Reap;
using starling::testing::Spawn;
using Clock = std::chrono::steady_clock;

// A job id no other run of this test shares.
uint64_t TestJob() { return (static_cast<uint64_t>(getpid()) << 32) ^ NewNonce(); }

bool Exists(const std::string& name, const std::string& directory = "/dev/shm") {
  struct stat st {};
  return stat((directory + name).c_str(), &st) == 0;
}

unsigned char Pattern(uint32_t version, size_t i) { return static_cast<unsigned char>(version * 131u + i * 7u + (i >> 8)); }

TEST(ShmSegment, PeersMapThenTheNameIsGone) {
  const std::string name = SegmentName(TestJob(), "test", 0, NewNonce());
  Segment segment = Segment::Create(name, 10000, 2);
  EXPECT_TRUE(Exists(name));
  auto* bytes = static_cast<unsigned char*>(segment.payload());
  ASSERT_GE(segment.payload_bytes(), 10000u);
  for (size_t i = 0; i < 10000; ++i) bytes[i] = Pattern(1, i);
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    children.push_back(Spawn([&, c] {
      Segment peer = Segment::Open(name);
      auto* b = static_cast<unsigned char*>(peer.payload());
      for (size_t i = 0; i < 10000 - 2; ++i)  // the last two bytes are the children's marks
        if (b[i] != Pattern(1, i)) return false;
      b[10000 - 1 - c] = 0xEE;  // each child leaves a mark the parent must see
      return true;
    }));
  }
  for (pid_t pid : children) EXPECT_EQ(Reap(pid), 0);
  EXPECT_FALSE(Exists(name)) << "the last peer to map must unlink the name";
  EXPECT_EQ(segment.header().attached.load(), 2u);
  EXPECT_EQ(bytes[9999], 0xEE);
  EXPECT_EQ(bytes[9998], 0xEE);
  EXPECT_EQ(CodeOf([&] { Segment::Open(name); }), Code::kNotFound);
}

TEST(ShmSegment, CreatorKilledAfterEveryPeerMappedLeavesNothing) {
  const std::string name = SegmentName(TestJob(), "test", 3, NewNonce());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t creator = fork();
  if (creator == 0) {
    try {
      Segment segment = Segment::Create(name, 4096, 1);
      std::memset(segment.payload(), 0x5A, 4096);
      char ok = 1;
      if (write(ready[1], &ok, 1) != 1) _exit(2);
      for (;;) pause();  // holds the segment until SIGKILLed
    } catch (...) {
      _exit(3);
    }
  }
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  close(ready[1]);
  Segment peer = Segment::Open(name);
  kill(creator, SIGKILL);
  EXPECT_EQ(Reap(creator), 1000 + SIGKILL);
  EXPECT_FALSE(Exists(name));
  EXPECT_EQ(static_cast<unsigned char*>(peer.payload())[4095], 0x5A) << "the memory outlives its creator";
}

TEST(ShmSegment, CreatorRemovesTheNameWhenPeersNeverCome) {
  const std::string name = SegmentName(TestJob(), "test", 1, NewNonce());
  {
    Segment segment = Segment::Create(name, 100, 3);
    EXPECT_TRUE(Exists(name));
  }
  EXPECT_FALSE(Exists(name));
  Segment alone = Segment::Create(name, 100, 0);  // no peers: unlinked at once
  EXPECT_FALSE(Exists(name));
}

TEST(ShmSegment, NamesKeepJobsApart) {
  const uint32_t nonce = 7;  // the same rank, purpose and nonce in two jobs
  const std::string a = SegmentName(TestJob(), "probe", 0, nonce);
  const std::string b = SegmentName(TestJob() + 1, "probe", 0, nonce);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("/starling-u" + std::to_string(getuid()) + "-j", 0), 0u) << a;
  Segment sa = Segment::Create(a, 64, 1);
  Segment sb = Segment::Create(b, 64, 1);
  static_cast<char*>(sa.payload())[0] = 'a';
  static_cast<char*>(sb.payload())[0] = 'b';
  const pid_t child = Spawn([&] {
    Segment pa = Segment::Open(a), pb = Segment::Open(b);
    return static_cast<char*>(pa.payload())[0] == 'a' && static_cast<char*>(pb.payload())[0] == 'b';
  });
  EXPECT_EQ(Reap(child), 0);
  EXPECT_FALSE(Exists(a));
  EXPECT_FALSE(Exists(b));
  // One name cannot be created twice, even while the first lives.
  const std::string c = SegmentName(TestJob(), "probe", 0, nonce);
  Segment sc = Segment::Create(c, 64, 1);
  EXPECT_EQ(CodeOf([&] { Segment::Create(c, 64, 1); }), Code::kAlreadyExists);
  EXPECT_EQ(CodeOf([&] { SegmentName(1, "Bad/Purpose", 0, 0); }), Code::kInvalidArgument);
}

TEST(ShmSegment, TooLittleFreeSpaceIsAClearError) {
  const std::string name = SegmentName(TestJob(), "test", 0, NewNonce());
  SegmentOptions options;
  options.free_bytes = [] { return uint64_t{1258291}; };  // 1.2 MiB
  std::string message;
  EXPECT_EQ(CodeOf([&] { Segment::Create(name, 4 << 20, 1, options); }, &message), Code::kOutOfMemory);
  EXPECT_NE(message.find("/dev/shm has 1.2 MiB free"), std::string::npos) << message;
  EXPECT_FALSE(Exists(name)) << "nothing is created";
}

// A real 1 MiB tmpfs (a private mount namespace: nothing outside sees it). With
// statvfs the segment is refused up front; with the free-space check fooled, the page
// reservation (posix_fallocate) still refuses it: an error instead of a SIGBUS later.
TEST(ShmSegment, SmallTmpfsRefusesInsteadOfSigbus) {
  char dir[] = "/tmp/starling-shm-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string directory = dir;
  const pid_t child = fork();
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", directory.c_str(), "tmpfs", 0, "size=1m") != 0)
      _exit(77);  // no privilege for a mount namespace
    SegmentOptions options;
    options.directory = directory;
    std::string message;
    const std::string name = SegmentName(1, "test", 0, 1);
    if (CodeOf([&] { Segment::Create(name, 8 << 20, 1, options); }, &message) != Code::kOutOfMemory) _exit(1);
    if (message.find(" free") == std::string::npos) _exit(2);
    options.free_bytes = [] { return uint64_t{1} << 40; };  // the statvfs check fooled
    if (CodeOf([&] { Segment::Create(name, 8 << 20, 1, options); }, &message) != Code::kOutOfMemory) _exit(3);
    if (message.find("cannot reserve the pages") == std::string::npos) _exit(4);
    struct stat st {};
    if (stat((directory + name).c_str(), &st) == 0) _exit(5);  // a failed creation leaves no file
    Segment fits = Segment::Create(name, 256 << 10, 1, options);  // 256 KiB fit in 1 MiB
    std::memset(fits.payload(), 1, fits.payload_bytes());
    _exit(0);
  }
  const int status = Reap(child);
  rmdir(dir);
  if (status == 77) GTEST_SKIP() << "cannot mount a tmpfs in a private mount namespace here";
  EXPECT_EQ(status, 0) << "1: statvfs check, 2: message, 3/4: posix_fallocate, 5: file left";
}

TEST(ShmSegment, ForeignOrCorruptedFileIsAnError) {
  char dir[] = "/tmp/starling-shm-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  SegmentOptions options;
  options.directory = dir;
  auto write_file = [&](const std::string& name, const std::vector<unsigned char>& bytes) {
    const int fd = open((std::string(dir) + name).c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(fd);
  };
  std::string message;
  write_file("/garbage", std::vector<unsigned char>(4096, 0xA5));
  EXPECT_EQ(CodeOf([&] { Segment::Open("/garbage", options); }, &message), Code::kTransport);
  EXPECT_NE(message.find("corrupted or foreign header"), std::string::npos) << message;
  write_file("/short", std::vector<unsigned char>(10, 0));
  EXPECT_EQ(CodeOf([&] { Segment::Open("/short", options); }, &message), Code::kTransport);
  // A real segment whose recorded size was overwritten.
  {
    Segment s = Segment::Create("/sized", 100, 2, options);
    s.header().total_bytes += 4096;
    EXPECT_EQ(CodeOf([&] { Segment::Open("/sized", options); }, &message), Code::kTransport);
    EXPECT_NE(message.find("corrupted header"), std::string::npos) << message;
  }
  // More peers than expected.
  {
    Segment s = Segment::Create("/crowded", 100, 1, options);
    s.header().expected_peers = 0;
    EXPECT_EQ(CodeOf([&] { Segment::Open("/crowded", options); }, &message), Code::kTransport);
  }
  EXPECT_EQ(CodeOf([&] { Segment::Open("/absent", options); }), Code::kNotFound);
  unlink((std::string(dir) + "/garbage").c_str());
  unlink((std::string(dir) + "/short").c_str());
  rmdir(dir);
}

TEST(ShmFutex, WakeCrossesProcesses) {
  Segment segment = Segment::Create(SegmentName(TestJob(), "test", 0, NewNonce()), sizeof(SharedCounter), 0);
  auto* counter = new (segment.payload()) SharedCounter{};
  const pid_t child = Spawn([counter] {
    WaitPolicy policy;
    policy.spin_seconds = 0;
    policy.slice_seconds = 20;  // only a cross-process wake ends this sleep early
    const auto start = Clock::now();
    const uint32_t seen = WaitUntil(*counter, [](uint32_t v) { return v == 42; }, policy, nullptr, "the test");
    return seen == 42 && Clock::now() - start < std::chrono::seconds(10);
  });
  // Wait until the child sleeps on the futex, then wake it from this process.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (counter->sleepers.load() == 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(counter->sleepers.load(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto woke = Clock::now();
  Set(*counter, 42);
  EXPECT_EQ(Reap(child), 0);
  EXPECT_LT(Clock::now() - woke, std::chrono::seconds(5));
  EXPECT_EQ(counter->sleepers.load(), 0u);
}

TEST(ShmFutex, WaitsAreBounded) {
  SharedCounter counter;
  WaitPolicy policy;
  policy.timeout_seconds = 0.05;
  const auto start = Clock::now();
  std::string message;
  EXPECT_EQ(CodeOf([&] { WaitUntil(counter, [](uint32_t v) { return v == 1; }, policy, nullptr, "version 1"); },
                   &message),
            Code::kTimeout);
  EXPECT_NE(message.find("version 1"), std::string::npos) << message;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  // The check between slices ends a wait with its own error (abort, a dead peer).
  policy.timeout_seconds = 0;
  policy.slice_seconds = 0.001;
  int checks = 0;
  EXPECT_EQ(CodeOf([&] {
              WaitUntil(counter, [](uint32_t v) { return v == 1; }, policy,
                        [&] {
                          if (++checks == 5) throw Error(Code::kAborted, "aborted");
                        },
                        "version 1");
            }),
            Code::kAborted);
  EXPECT_EQ(checks, 5);
  EXPECT_TRUE(AtOrAfter(2, 0xFFFFFFFFu));  // wrap-safe order
  EXPECT_FALSE(AtOrAfter(0xFFFFFFFFu, 2));
}

// One writer, three reader processes, every version read by every reader, bytes exact.
// 4 processes on this 2-core machine: the futex sleeps are exercised, not just spins.
TEST(ShmMailbox, ConcurrentWriterAndReadersSeeEveryVersionExactly) {
  constexpr uint32_t kReaders = 3;
  constexpr size_t kCapacity = 4096 + 77;
  constexpr uint32_t kVersions = 3000;
  const size_t bytes = Mailbox::RegionBytes(kReaders, kCapacity);
  Segment segment = Segment::Create(SegmentName(TestJob(), "test", 0, NewNonce()), bytes, 0);
  Mailbox writer = Mailbox::Format(segment.payload(), segment.payload_bytes(), kReaders, kCapacity);
  auto size_of = [](uint32_t v) { return static_cast<size_t>((v * 2654435761u) % (kCapacity + 1)); };
  WaitPolicy policy;
  policy.spin_seconds = 20e-6;
  policy.timeout_seconds = 60;
  std::vector<pid_t> readers;
  for (uint32_t r = 0; r < kReaders; ++r) {
    readers.push_back(Spawn([&, r] {
      const Mailbox box = Mailbox::Attach(segment.payload(), segment.payload_bytes());
      std::vector<unsigned char> copy(kCapacity);
      for (uint32_t v = 1; v <= kVersions; ++v) {
        size_t n = 0;
        const auto* data = static_cast<const unsigned char*>(box.Read(r, v, &n, policy, nullptr));
        if (n != size_of(v)) return false;
        std::memcpy(copy.data(), data, n);  // the buffer is stable until Release
        for (size_t i = 0; i < n; ++i)
          if (copy[i] != Pattern(v, i) || data[i] != Pattern(v, i)) return false;
        box.Release(r, v);
      }
      return true;
    }));
  }
  for (uint32_t v = 1; v <= kVersions; ++v) {
    auto* buffer = static_cast<unsigned char*>(writer.BeginWrite(policy, nullptr));
    const size_t n = size_of(v);
    for (size_t i = 0; i < n; ++i) buffer[i] = Pattern(v, i);
    writer.Publish(n);
    // Never more than one version ahead of the slowest reader's release.
    for (uint32_t r = 0; r < kReaders; ++r) ASSERT_LE(v - writer.consumed(r), 2u);
  }
  for (pid_t pid : readers) EXPECT_EQ(Reap(pid), 0);
  for (uint32_t r = 0; r < kReaders; ++r) EXPECT_EQ(writer.consumed(r), kVersions);
}

TEST(ShmMailbox, CorruptedHeaderIsAnError) {
  const size_t bytes = Mailbox::RegionBytes(2, 256);
  std::vector<unsigned char> storage(bytes + 128);
  void* region = storage.data() + (128 - reinterpret_cast<uintptr_t>(storage.data()) % 128) % 128;
  auto fresh = [&] {
    std::memset(region, 0, bytes);
    return Mailbox::Format(region, bytes, 2, 256);
  };
  auto* header = static_cast<MailboxHeader*>(region);
  std::string message;
  fresh();
  header->magic ^= 1;
  EXPECT_EQ(CodeOf([&] { Mailbox::Attach(region, bytes); }, &message), Code::kTransport);
  EXPECT_NE(message.find("corrupted or foreign header"), std::string::npos) << message;
  fresh();
  header->readers = 100000;
  EXPECT_EQ(CodeOf([&] { Mailbox::Attach(region, bytes); }), Code::kTransport);
  fresh();
  header->capacity = 1 << 20;  // buffers beyond the region
  EXPECT_EQ(CodeOf([&] { Mailbox::Attach(region, bytes); }), Code::kTransport);
  EXPECT_EQ(CodeOf([&] { Mailbox::Attach(region, 64); }), Code::kTransport);
  // A publication claiming more bytes than its buffer holds.
  Mailbox box = fresh();
  std::memset(box.BeginWrite(WaitPolicy{}, nullptr), 1, 256);
  box.Publish(256);
  header->sizes[0].store(257);
  const void* data = nullptr;
  size_t n = 0;
  EXPECT_EQ(CodeOf([&] { box.TryRead(0, 1, &data, &n); }, &message), Code::kTransport);
  EXPECT_NE(message.find("claims 257 bytes"), std::string::npos) << message;
  header->sizes[0].store(256);
  EXPECT_TRUE(box.TryRead(0, 1, &data, &n));
  EXPECT_EQ(n, 256u);
  EXPECT_FALSE(box.TryRead(0, 2, &data, &n));  // not published yet
  EXPECT_EQ(CodeOf([&] { box.TryRead(0, 0xFFFFFF00u, &data, &n); }), Code::kTransport);  // writer "far ahead"
  EXPECT_EQ(CodeOf([&] { box.TryRead(2, 1, &data, &n); }), Code::kInvalidArgument);
}

TEST(ShmProbe, FormatRanks) {
  EXPECT_EQ(FormatRanks({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(FormatRanks({0, 2, 5, 6, 7}), "0,2,5-7");
  EXPECT_EQ(FormatRanks({4}), "4");
}

}  // namespace
}  // namespace starling::transport::shm
