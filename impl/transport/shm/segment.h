// A POSIX shared-memory segment (a file in /dev/shm) that one process creates and its
// peers on the same host map. The name is removed as soon as every expected peer has
// mapped it (the last one to map unlinks it), so a crash afterwards leaves nothing in
// /dev/shm: the memory lives exactly as long as some process maps it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace starling::transport::shm {

// "/starling-u<uid>-j<job>-<purpose>-r<rank>-<nonce>": the user and the job (an id all
// ranks agree on) keep parallel jobs apart; the nonce keeps this job's contexts apart.
// `purpose`: a short word ([a-z0-9_], at most 16 characters).
std::string SegmentName(uint64_t job, const std::string& purpose, int rank, uint32_t nonce);
// A random 32-bit nonce (never the same twice in one process).
uint32_t NewNonce();

struct SegmentOptions {
  std::string directory = "/dev/shm";  // where POSIX shared memory lives (tests: elsewhere)
  // Free bytes of `directory`; empty: statvfs. Tests inject a figure here.
  std::function<uint64_t()> free_bytes;
};

// The first 128 bytes of every segment; the payload follows.
struct SegmentHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t expected_peers;
  uint64_t total_bytes;
  int32_t creator_pid;
  uint32_t reserved;
  alignas(64) std::atomic<uint32_t> attached;  // peers that mapped it so far
};
constexpr size_t kSegmentHeaderBytes = 128;
static_assert(sizeof(SegmentHeader) <= kSegmentHeaderBytes, "segment header fits its 128 bytes");

class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates `name` (it must not exist) with room for `payload_bytes`, reserving the
  // pages now (posix_fallocate: ftruncate alone reserves nothing on tmpfs, and a write
  // to a page /dev/shm cannot supply is a SIGBUS). With expected_peers == 0 the name is
  // removed at once. Throws Error: kOutOfMemory when the directory lacks the space
  // (the message says how much is free), kAlreadyExists, kTransport for other failures.
  static Segment Create(const std::string& name, size_t payload_bytes, uint32_t expected_peers,
                        const SegmentOptions& options = {});
  // The same, but only the first `reserved_bytes` of the payload are reserved now; the
  // rest is a hole that the creator reserves piece by piece with Reserve (so a segment
  // sized for the largest tensor a rank may publish costs memory only once one is).
  // Keeps the file open for Reserve. Peers map the whole size; they must read only
  // what the creator reserved and wrote.
  static Segment CreateSparse(const std::string& name, size_t payload_bytes, size_t reserved_bytes,
                              uint32_t expected_peers, const SegmentOptions& options = {});
  // Creator of a sparse segment: reserves payload bytes [offset, offset + bytes).
  // Returns false (nothing changed) when the pages cannot be had: /dev/shm is full.
  bool Reserve(size_t offset, size_t bytes);
  // Maps a peer's segment and counts this process as attached; the peer that completes
  // the count unlinks the name. Validates the header: a file that is not a segment, or
  // whose header disagrees with its size, is Error(kTransport), never a crash.
  // kNotFound when the name does not exist (another /dev/shm: a different container).
  static Segment Open(const std::string& name, const SegmentOptions& options = {});

  // Removes the name (idempotent; the mapping stays valid). The creator calls it once
  // its peers have had their chance to map, whether or not they all did; its destructor
  // does at the latest.
  void Unlink();

  bool valid() const { return base_ != nullptr; }
  const std::string& name() const { return name_; }
  void* payload() const { return static_cast<unsigned char*>(base_) + kSegmentHeaderBytes; }
  size_t payload_bytes() const { return bytes_ - kSegmentHeaderBytes; }
  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
  // True once this process removed the name, or saw that it was removed.
  bool unlinked() const { return unlinked_; }

 private:
  void Reset();
  std::string name_;
  std::string path_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool unlinked_ = false;
  bool creator_ = false;  // the creator removes the name at the latest when it lets go
  int fd_ = -1;           // sparse segments: kept open by the creator for Reserve
};

// Free bytes in `directory` per statvfs (what an unprivileged writer may use).
uint64_t FreeBytes(const std::string& directory);
// "1.2 MiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace starling::transport::shm
