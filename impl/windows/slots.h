// Where a window keeps its in-neighbors' buffers: one slot per in-neighbor, each with
// two buffers, the index of the one that holds the slot's value, a version counter and
// the associated p, guarded by a lock that other processes can take. The slots of
// in-neighbors on this host live in a shared-memory segment (SlotArea::Share) that
// those ranks map (SlotArea::Attach), so they write into them themselves: no message,
// no progress needed on this rank. The others live in private memory, with the same
// layout and the same rules, written by this rank's window service.
//
// The rules (every writer of a slot follows them, in any process):
// - A slot's value is buffer[current]. It is read, and changed in place (an
//   accumulate, a reset, a get's result), only under the lock.
// - A put writes the other buffer, buffer[current ^ 1], without the lock, then takes
//   the lock to flip `current`, count the version and set p. Only the slot's own origin
//   puts into it, one put at a time (its executor runs one operation at a time, and its
//   put through MPI completes before the next operation starts), so nobody else writes
//   that buffer meanwhile, and nobody reads it: readers hold the lock, and the flip that
//   made the buffer "other" happened under the lock after their last read.
//
// A shared area also serves gets: same-host out-neighbors (the readers) read the
// owner's tensor straight from its memory (cross_memory.h), at the address the header
// gives, under the area's tensor lock, which the owner's window_update takes while it
// rewrites the tensor. So a get never sees half an update, as through messages, where
// the owner's service reads under the window's own mutex. Each reader has a counter of
// the bytes it read, which the owner adds to its traffic figures.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "impl/transport/shm/lock.h"
#include "impl/transport/shm/segment.h"

namespace starling::windows {

// In shared memory: address-free, fields other than `lock`, `current` and `mutex`
// accessed under the lock only.
struct alignas(128) SlotState {
  // The window mutex for this slot (BlueFog's win_mutex, require_mutex), held across
  // any number of operations: kMutexFree, kMutexOwner (the window's rank) or
  // kMutexOrigin (the slot's origin). Waiters sleep on it; a release wakes them.
  transport::shm::SharedCounter mutex;
  transport::shm::SharedLock lock;
  std::atomic<uint32_t> current{0};  // 0 or 1; changed under the lock, by the origin's puts only
  int64_t version = 0;
  double p = 0.0;
  // Bytes the origin wrote here itself, not yet counted in this rank's traffic figures
  // (the owner adds them when it next locks the slot: Window::Count).
  uint64_t bytes_in = 0;
};

constexpr uint32_t kMutexFree = 0;
constexpr uint32_t kMutexOwner = 1;
constexpr uint32_t kMutexOrigin = 2;

// The owner's tensor as its readers see it: the lock its window_update and their reads
// take, and who holds it (a rank, for the failure checks of a wait; -1 when free).
struct alignas(128) TensorState {
  transport::shm::SharedLock lock;
  std::atomic<int32_t> holder{-1};
};

// One slot as seen from one process.
struct Slot {
  SlotState* state = nullptr;
  char* buffers[2] = {nullptr, nullptr};
  // The buffer holding the value (`current` checked: a peer may have corrupted it).
  char* value() const;
  char* other() const;
};

class SlotArea {
 public:
  SlotArea() = default;
  // Private memory for `slots` slots of `bytes` each, every buffer set to `initial`
  // (`bytes` bytes) or zeros.
  static SlotArea Private(size_t slots, size_t bytes, const void* initial);
  // A shared segment `name` with one slot per rank of `origins` and one read counter
  // per rank of `readers` (each list ascending; every rank of either maps it, the last
  // to map removes the name), the slots laid out and filled like Private; `tensor_address`
  // is where the owner's tensor lies in its own address space (for the readers). Throws
  // Error (kOutOfMemory when /dev/shm lacks the room).
  static SlotArea Share(const std::string& name, uint32_t window_id, int owner, const std::vector<int>& origins,
                        const std::vector<int>& readers, size_t bytes, const void* initial, uint64_t tensor_address,
                        const transport::shm::SegmentOptions& options = {});
  // Rank `peer` maps `owner`'s segment and finds its slot (`*slot`, an index for slot(),
  // or kNone) and its read counter (reader(), or null): it must have at least one.
  // Everything in the segment is checked: a segment that is not this window's, or that
  // has nothing for `peer`, is Error(kTransport), never a wild access.
  static SlotArea Attach(const std::string& name, uint32_t window_id, int owner, int peer, size_t bytes, size_t* slot,
                         const transport::shm::SegmentOptions& options = {});

  // The checks and layout of Attach over `region` (`region_bytes` mapped), owning
  // nothing (Attach keeps the mapping alive; tests and the fuzzer use it directly).
  static SlotArea View(void* region, size_t region_bytes, uint32_t window_id, int owner, int peer, size_t bytes,
                       size_t* slot);

  static constexpr size_t kNone = ~size_t{0};

  size_t slots() const { return slots_; }
  Slot slot(size_t index) const;
  bool shared() const { return segment_ != nullptr; }
  // Removes a shared area's name from /dev/shm (its mappings stay valid); see
  // Registry::UnlinkSegments.
  void Unlink() {
    if (segment_) segment_->Unlink();
  }

  // Shared areas only (null or 0 otherwise): the owner's tensor lock and address; the
  // read counter of reader `index` (Share's order), or of the peer that attached.
  TensorState* tensor_state() const { return tensor_state_; }
  uint64_t tensor_address() const { return tensor_address_; }
  size_t readers() const { return readers_; }
  std::atomic<uint64_t>* read_count(size_t index) const;
  std::atomic<uint64_t>* reader() const { return reader_; }
  // The whole area (header first), for tests and seeds.
  const char* region() const { return region_; }
  size_t region_bytes() const { return region_bytes_; }

 private:
  void Layout(char* base, size_t slots, size_t bytes);
  // The header line, the tensor line, the readers' directory and counters, the origins'
  // directory: where the slots begin.
  static size_t SlotsOffset(size_t slots, size_t readers);
  std::unique_ptr<char[]> heap_;
  std::shared_ptr<transport::shm::Segment> segment_;
  char* region_ = nullptr;
  size_t region_bytes_ = 0;
  TensorState* tensor_state_ = nullptr;
  uint64_t tensor_address_ = 0;
  std::atomic<uint64_t>* read_counts_ = nullptr;
  size_t readers_ = 0;
  std::atomic<uint64_t>* reader_ = nullptr;
  char* first_ = nullptr;  // slot 0's state
  size_t stride_ = 0;      // bytes per slot: its state, then its two buffers
  size_t buffer_ = 0;      // bytes per buffer (the tensor's, rounded up)
  size_t slots_ = 0;
};

}  // namespace starling::windows
