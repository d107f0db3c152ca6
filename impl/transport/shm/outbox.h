// A rank's outbox for neighbor data on one host: the writer (its owner) publishes the
// data of one neighbor exchange at a time into one of two buffers, and the peers it
// sends to on that host read it there, straight from the owner's memory, then release
// it. Unlike Mailbox, each publication names the readers it addresses (the exchange's
// destinations, which change with dynamic topologies), and only those must release it
// before its buffer is written again.
//
// Who may touch what, when:
// - Publication n lives in buffer (n - 1) % 2. The writer writes a buffer only after
//   every reader addressed by the publication that last used it (n - 2) released it,
//   so readers never see bytes change under them (plain or SIMD copies, no seqlock);
//   a writer waits for that a bounded time, then sends through MPI instead (Begin).
// - A reader learns of publication n from a message (the neighbor frame, sent after
//   Publish); it then acquires `published` (>= n), pairing with the writer's release
//   in Publish, before it reads the data.
// - A reader's `consumed` counter (written by that reader only) is the last
//   publication it released; releasing n also releases every earlier one (a reader
//   that never read an earlier publication addressed to it, because it was running
//   another operation that found the mismatch, does not hold the writer up forever).
// - Capacity: the buffers are a sparse file region sized at creation (the largest
//   payload that may go through shared memory); the writer reserves pages
//   (posix_fallocate) as payloads first reach a size, so memory follows the largest
//   payload actually published, and a full /dev/shm means "send this one through MPI",
//   never SIGBUS.
//
// Everything a peer writes (header, counters, offsets from its messages) is checked
// before use: a corrupted value is Error(kTransport), never an out-of-bounds access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "impl/transport/shm/futex.h"
#include "impl/transport/shm/offers.h"
#include "impl/transport/shm/segment.h"

namespace starling::transport::shm {

class Outbox {
 public:
  static constexpr uint32_t kMaxReaders = 4096;

  Outbox() = default;
  // The writer creates its outbox for `readers` peers (reader indexes 0 .. readers-1)
  // with two buffers of `capacity` bytes (reserved lazily); `expected_peers` of them
  // will map it (the last one unlinks the name). Throws Error (kOutOfMemory when
  // /dev/shm lacks room for the counters).
  static Outbox Create(const std::string& name, uint32_t readers, uint32_t expected_peers, size_t capacity,
                       const SegmentOptions& options = {});
  // A reader maps a peer's outbox; validates its header.
  static Outbox Open(const std::string& name, const SegmentOptions& options = {});

  bool valid() const { return segment_.valid(); }
  uint32_t readers() const { return readers_; }
  size_t capacity() const { return capacity_; }
  void Unlink() { segment_.Unlink(); }

  // --- the writer ---
  // The buffer for the next publication, or nullptr: `bytes` exceeds the capacity, its
  // pages cannot be reserved, or a reader addressed by the publication that last used
  // the buffer has not released it within `give_up_seconds` (waiting under `policy`;
  // `check` runs between sleeps and may end the wait by throwing). On nullptr the
  // caller sends through MPI: giving up is what keeps this deadlock-free, whatever a
  // reader is blocked on while it holds the buffer.
  // `readers`: the reader indexes this publication addresses.
  char* Begin(size_t bytes, const std::vector<uint32_t>& readers, double give_up_seconds, const WaitPolicy& policy,
              const std::function<void()>& check);
  // Publishes what Begin returned; returns its number (1, 2, ...; wraps around).
  uint32_t Publish();

  // --- a reader (index `reader` in this outbox) ---
  // Publication `number`'s bytes [offset, offset + bytes), once the writer's release of
  // it is visible (it is, by the time its message arrived; waits otherwise). Valid
  // until Release(reader, number).
  const char* Read(uint32_t number, uint64_t offset, uint64_t bytes, const WaitPolicy& policy,
                   const std::function<void()>& check) const;
  // Releases `number` and every earlier publication.
  void Release(uint32_t reader, uint32_t number) const;

  // --- offers (offers.h): reader `reader`'s ring of offer slots, and the owner's pid ---
  OfferRing& ring(uint32_t reader) const;
  int32_t owner_pid() const { return segment_.header().creator_pid; }
  // A reader checks that it may read the owner's memory (a read of a token through
  // cross-memory attach) and, if so, tells the owner in its ring. Empty, or why not.
  std::string ProbeOwner(uint32_t reader) const;

 private:
  Segment segment_;
  SharedCounter* published_ = nullptr;
  SharedCounter* consumed_ = nullptr;  // one per reader
  OfferRing* rings_ = nullptr;         // one per reader
  char* buffers_ = nullptr;
  size_t data_offset_ = 0;  // of buffer 0 in the segment's payload
  size_t stride_ = 0;       // bytes between the two buffers
  size_t capacity_ = 0;
  uint32_t readers_ = 0;
  // Writer only: per buffer, its last publication, the readers it addressed, and the
  // bytes reserved so far.
  uint32_t last_[2] = {0, 0};
  std::vector<uint32_t> addressed_[2];
  size_t reserved_[2] = {0, 0};
  uint32_t next_ = 1;
  bool writing_ = false;
};

}  // namespace starling::transport::shm
