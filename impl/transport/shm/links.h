// The shared-memory links of one context's neighbor exchanges: this rank's outbox
// (outbox.h), readable by its same-host peers, and theirs, mapped here. Set up once
// when the context is created, right after the probe (probe.h), with two small
// collective exchanges; a pair is linked only when both of its ranks mapped each
// other's outbox, so both sides of every pair agree without a further message.
// When every rank of the context is on one host and every pair is linked, the ranks
// also share a board (board.h) for the classic collectives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "impl/transport/shm/board.h"
#include "impl/transport/shm/outbox.h"
#include "impl/transport/shm/probe.h"
#include "impl/transport/shm/publish_copy.h"

namespace starling::transport::shm {

struct LinksInput {
  int rank = 0;
  int size = 1;
  std::vector<uint64_t> host_keys;  // by rank, as given to the probe
  uint64_t job = 0;
  const ProbeResult* probe = nullptr;
  bool enabled = true;              // this rank's STARLING_SHM
  size_t capacity = 0;              // bytes per outbox buffer; 0: no links (still collective)
  CopyMode copy = CopyMode::kAuto;  // how this rank copies its publications (publish_copy.h)
  std::function<void(const void* mine, size_t bytes, void* all)> allgather;
  SegmentOptions segment;
};

class NeighborLinks {
 public:
  // Collective over every rank of `input` whenever some host holds two of them (known
  // to all alike); else nothing happens. Returns null when this rank has no linked
  // peer. Never throws for a pair that cannot be linked (it stays on MPI: `why`).
  static std::shared_ptr<NeighborLinks> Connect(const LinksInput& input, std::string* why);

  bool linked(int peer) const { return peer >= 0 && peer < static_cast<int>(peers_.size()) && peers_[peer].linked; }
  // Whether this rank may read `peer`'s memory (cross-memory attach: its probe of the
  // peer's outbox owner passed), and the peer's process.
  bool can_read(int peer) const { return linked(peer) && peers_[peer].readable; }
  int32_t pid_of(int peer) const { return peers_[peer].box.owner_pid(); }
  Outbox& own() { return own_; }
  // How this rank copies into its outbox (writer only, like own()).
  PublishCopy& publish_copy() { return copy_; }
  // This rank's offers to its readers (offers.h; writer only, like own()).
  OfferSender& offers() { return offers_; }
  // The context's board, or null: some rank is elsewhere, or some pair is not linked
  // (the same answer on every rank).
  Board* board() const { return board_.get(); }
  // `peer`'s reader index in this rank's outbox.
  uint32_t reader_index(int peer) const { return peers_[peer].their_index; }
  // `peer`'s outbox, and this rank's reader index in it.
  const Outbox& outbox_of(int peer) const { return peers_[peer].box; }
  uint32_t my_index_in(int peer) const { return peers_[peer].my_index; }
  // Names of other segments between linked peers of this context (window slots):
  // `rank`'s segment for `purpose`, unique to this context (it carries the nonce of the
  // rank's outbox, which no other context of that process shares).
  std::string SegmentNameOf(int rank, const std::string& purpose) const;
  // "ranks 1, 3" (linked peers), for logs.
  std::string Describe() const;

 private:
  struct Peer {
    bool linked = false;
    Outbox box;
    uint32_t my_index = 0;     // this rank's reader index in box
    uint32_t their_index = 0;  // the peer's reader index in own_
    uint32_t nonce = 0;        // of the peer's outbox's name
    bool readable = false;     // this rank may read the peer's memory
  };
  Outbox own_;
  PublishCopy copy_;
  OfferSender offers_;
  std::unique_ptr<Board> board_;
  uint64_t job_ = 0;
  int rank_ = 0;
  uint32_t nonce_ = 0;  // of this rank's outbox's name
  std::vector<Peer> peers_;  // by rank
};

}  // namespace starling::transport::shm
