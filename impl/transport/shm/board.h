// A context's board: where the ranks of a context that all share one host meet for the
// agreement and small data of every classic collective, without a message. Each rank
// owns a board segment with a counter and three slots; a round is: post this rank's
// tag (the operation's signature) and data in a slot, announce it, wait until every
// peer announced the same round, then read their slots in place.
//
// Who may touch what, when (round r lives in slot r % 3 of every board):
// - A rank writes its slot, then stores `arrived` = r with release ordering; peers
//   acquire `arrived` before they read the slot.
// - Every round waits for every rank's arrival, so no rank is ever more than one round
//   ahead of another: while this rank is in round r, a peer writes at most round
//   r + 1, into slot (r + 1) % 3, never the slots of rounds r and r - 1. So a caller
//   may still read the data of the round before (two gathers in one operation), and a
//   slot is rewritten only once every rank has started the round after next: no copy
//   is torn, no writer ever waits.
//
// A peer's slot header is copied and checked before use (its round, its length): a
// corrupted segment is Error(kTransport), never an out-of-bounds read. Rounds run one
// at a time (a context's operations do).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "impl/transport/shm/futex.h"
#include "impl/transport/shm/segment.h"

namespace starling::transport::shm {

class Board {
 public:
  static constexpr uint32_t kSlots = 3;
  // Data bytes per slot: 64 KiB, and room for the metadata a collective may post with
  // it (allgather's block of 64 KiB fits).
  static constexpr size_t kCapacity = (64 << 10) + 64;
  static constexpr size_t kTagBytes = 64;        // the caller's description of a round
  // Payload bytes of a board segment.
  static size_t SegmentBytes();
  // Where slot s's header starts in a board's payload (the fuzzer writes there).
  static size_t SlotOffset(uint32_t slot);
  // Where the board's `arrived` counter (a SharedCounter) lies in its payload (tests).
  static size_t ArrivedOffset();
  // Lays out a board in SegmentBytes() of fresh memory (the owner, before any peer
  // maps it).
  static void Format(void* payload);
  // Checks a peer's board of `bytes` bytes (Error(kTransport) naming `name` if it is
  // not one).
  static void Validate(const void* payload, size_t bytes, const std::string& name);

  // `segments` by rank: this rank's own (formatted) and every peer's (validated). Every
  // rank of the context takes part in every round.
  Board(int rank, std::vector<Segment> segments);
  // The same over memory the caller keeps mapped (tests, the fuzzer): SegmentBytes()
  // per rank.
  Board(int rank, std::vector<char*> payloads);

  struct Entry {
    const unsigned char* tag;  // kTagBytes, a copy taken after the checks
    const char* data;          // nullptr when the rank posted none
    uint64_t bytes;
  };
  // One round: posts `tag` (kTagBytes) and, when `data` is not null, `bytes` <= kCapacity
  // of data, then returns every rank's entry, by rank (valid until the next round). The
  // data pointers stay valid until this rank starts its second round after this one.
  // `check` runs between the sleeps of every wait and may end it by throwing (abort, a
  // gone peer, a deadline).
  const std::vector<Entry>& Round(const void* tag, const void* data, uint64_t bytes, const WaitPolicy& policy,
                                  const std::function<void()>& check);
  // The same with the data in `parts` pieces, posted one after another as one entry
  // (no copy of them beforehand); parts 0: no data.
  struct Piece {
    const void* data;  // may be null where bytes is 0
    uint64_t bytes;
  };
  const std::vector<Entry>& RoundInPieces(const void* tag, const Piece* pieces, size_t parts, const WaitPolicy& policy,
                                          const std::function<void()>& check);

  int size() const { return static_cast<int>(bases_.size()); }

 private:
  struct Control;
  struct SlotHeader;
  static std::vector<char*> Payloads(const std::vector<Segment>& segments);
  Board(int rank, std::vector<char*>&& payloads, std::vector<Segment>&& segments);
  Control& control(int rank) const;
  SlotHeader& slot_header(int rank, uint64_t count) const;
  char* slot_data(int rank, uint64_t count) const;

  int rank_ = 0;
  std::vector<Segment> segments_;  // empty when the caller keeps the memory
  std::vector<char*> bases_;       // each rank's payload
  uint64_t count_ = 0;  // rounds run
  // Copies of every rank's tag of the last round (kTagBytes each, by rank), as checked.
  std::vector<unsigned char> tags_;
  std::vector<Entry> entries_;
};

}  // namespace starling::transport::shm
