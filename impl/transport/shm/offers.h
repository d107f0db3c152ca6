// Offers: neighbor data that a rank's same-host readers copy straight out of its memory
// (cross-memory attach, cross_memory.h) instead of out of its outbox. The writer then
// copies nothing: it announces where its tensor is, each reader reads it in one kernel
// copy into its own memory (where its combine then finds it, in its own cache), and the
// writer holds the tensor unchanged until every reader is done. This is how Open MPI
// moves large messages between processes of one host; for mid sizes it beats the
// outbox, whose writer copies into lines the reader's core holds and whose reader then
// combines from another core's cache (docs/performance.md, "Offers").
//
// Each reader has a ring of kOfferSlots slots in the writer's outbox segment (the
// outbox's layout places them). A slot's word is (number << 3) | phase:
//   writer: Offer          -> kOffered  (then sends the frame naming the number)
//   reader: CAS kOffered   -> kClaimed, reads the writer's memory, -> kDone
//   writer: CAS kOffered   -> kRevoked when the reader has not claimed it within a
//           short wait (it is late: descheduled, in other work, or will never come:
//           ranks that disagree), copies the bytes into memory of its own that it
//           keeps until the reader is done, stores that address, -> kMoved
//   reader: sees kRevoked or kMoved: waits for kMoved, reads the copy, -> kDone
//   writer: on a failed operation, CAS kOffered -> kWithdrawn (the reader fails too)
// So the writer never waits for a reader that has not started reading (no wait on a
// peer's progress: nothing can deadlock), and never changes bytes a reader is reading.
// Words are release-stored and acquire-loaded (futex.h's Set and WaitUntil); the CAS
// are sequentially consistent. Everything read from a slot is checked: a corrupted
// word is Error(kTransport), a corrupted address a failed read, never a crash.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "impl/transport/shm/futex.h"

namespace starling::transport::shm {

constexpr uint32_t kOfferSlots = 8;

// One reader's slots in the writer's outbox (shared memory: address-free atomics only).
struct OfferRing {
  SharedCounter slots[kOfferSlots];
  alignas(128) std::atomic<uint64_t> moved[kOfferSlots];  // writer: where a revoked offer's copy is
  alignas(128) std::atomic<uint32_t> readable;            // reader: 1 once it has read the writer's memory (the probe)
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "offer addresses must be lock-free atomics");

// A piece of an offer: `bytes` at `address` in the writer (its tensor), to `dst` in
// the reader. `packed`: the piece's offset in the writer's copy if the offer is moved.
struct OfferPiece {
  uint64_t address = 0;
  uint64_t packed = 0;
  uint64_t bytes = 0;
  char* dst = nullptr;
};

// The writer's side; one per outbox, used by one thread at a time (the engine's).
class OfferSender {
 public:
  OfferSender() = default;
  OfferSender(OfferRing* rings, uint32_t readers) : rings_(rings), readers_(readers) {}
  bool valid() const { return rings_ != nullptr; }

  // The number of a new offer to `readers` (reader indexes), or 0 when one of them
  // cannot read this process's memory or still holds a slot (a moved offer it has not
  // read yet): then the caller uses the outbox.
  uint32_t Offer(const std::vector<uint32_t>& readers);
  // Returns once every reader of offer `number` has read it or has been given a copy:
  // a reader that has not claimed it after `revoke_seconds` gets one, `bytes` bytes
  // that `pack(dst)` writes. Waits under `policy` (`check` may end the wait by throwing).
  void Finish(uint32_t number, const std::vector<uint32_t>& readers, double revoke_seconds, size_t bytes,
              const std::function<void(char*)>& pack, const WaitPolicy& policy, const std::function<void()>& check);
  // The operation failed before Finish: readers that have not claimed the offer will
  // get an error; waits up to `give_up_seconds` (never throws) for those reading it.
  void Withdraw(uint32_t number, const std::vector<uint32_t>& readers, double give_up_seconds = 1.0) noexcept;
  // Copies made for late readers and not read yet (tests).
  size_t moved_outstanding() const { return moved_.size(); }

 private:
  struct Moved {
    uint32_t reader;
    uint32_t number;
    std::unique_ptr<char[]> bytes;
  };
  void Reclaim();
  OfferRing* rings_ = nullptr;
  uint32_t readers_ = 0;
  uint32_t next_ = 1;
  std::vector<Moved> moved_;
};

// The reader's side: reads offer `number` of the writer (process `pid`) from `ring`
// (this reader's ring in that writer's outbox) into the pieces' destinations. Throws
// Error(kPeerFailed) when the writer's process is gone, Error(kTransport) for a slot
// that does not hold the offer, another failed read, or an offer withdrawn (the
// writer's operation failed).
void PullOffer(OfferRing& ring, int32_t pid, uint32_t number, const std::vector<OfferPiece>& pieces,
               const WaitPolicy& policy, const std::function<void()>& check);

}  // namespace starling::transport::shm
