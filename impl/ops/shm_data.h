// An operation's data through shared memory between ranks of one host (Context::
// shm_links): the sender publishes it once into its outbox (transport/shm/outbox.h) and
// announces it in its frame; each receiver reads it there, in place, and releases it.
// Used by neighbor exchanges (neighbor_exchange.cc) and pair_gossip.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "impl/ops/neighbor_exchange.h"
#include "impl/runtime/context.h"
#include "impl/runtime/wait_monitor.h"
#include "impl/transport/shm/links.h"

namespace starling::ops {

// Where an exchange's data went: its publication number in the sender's outbox and
// each outgoing segment's offset there; or, for an offer (`offered`), the offer's
// number and each segment's address in the sender's memory.
struct Published {
  uint32_t number = 0;
  std::vector<uint64_t> offsets;
  bool offered = false;
};

// The checks of every wait for peers (abort, STARLING_TIMEOUT_SECONDS, a gone peer,
// stall warnings), for a wait on shared-memory counters. `sequence`: the operation's
// number when it is a numbered collective, else 0 (see WaitMonitor). `ranks`: those
// waited for; empty: every other rank of the context (nothing to build on the fast path).
class SharedWait {
 public:
  SharedWait(runtime::Context& context, const LazyText& what, uint64_t sequence, std::set<int> ranks,
             const char* doing);
  transport::shm::WaitPolicy policy;
  std::function<void()> check;

 private:
  runtime::Context& context_;
  runtime::WaitMonitor monitor_;
  std::set<int> ranks_;
  const char* doing_;
};

// Publishes the outgoing data once for every destination linked through shared memory
// (the readers), or returns false: none linked, below STARLING_SHM_MIN_BYTES, too large,
// or the buffer still held by a reader after a bounded wait (then the frames carry the
// data, as on the MPI path: giving up keeps a reader that is blocked on an MPI send to
// this rank from deadlocking it).
// `sequence`: as SharedWait's.
bool PublishShared(runtime::Context& context, transport::shm::NeighborLinks* links,
                   const std::vector<int>& destinations, const std::vector<Outgoing>& outgoing, const LazyText& what,
                   uint64_t sequence, Published* published);

// An exchange's data offered to the destinations linked through shared memory, which
// read it straight from this rank's memory (transport/shm/offers.h). Finish() returns
// once every reader has read it or has a copy; until then the outgoing data must stay
// as it is. An offer not finished (the exchange failed) is withdrawn on destruction.
class Offer {
 public:
  // Offers, or leaves valid() false: none linked, a size outside [48 KiB,
  // STARLING_SHM_PULL_BYTES] or below STARLING_SHM_MIN_BYTES, more ranks than cores on
  // this host, or a reader that cannot read this process or still holds a slot; the
  // caller then publishes (PublishShared).
  Offer(runtime::Context& context, std::shared_ptr<transport::shm::NeighborLinks> links,
        const std::vector<int>& destinations, const std::vector<Outgoing>& outgoing, Published* published);
  ~Offer();
  Offer(const Offer&) = delete;
  Offer& operator=(const Offer&) = delete;
  bool valid() const { return number_ != 0; }
  void Finish(runtime::Context& context, const LazyText& what, uint64_t sequence);

 private:
  std::shared_ptr<transport::shm::NeighborLinks> links_;
  const std::vector<Outgoing>& outgoing_;
  std::vector<uint32_t> readers_;
  std::set<int> ranks_;
  std::vector<uint64_t> packed_;  // each segment's offset in a copy for a late reader
  size_t total_ = 0;
  uint32_t number_ = 0;
};

// Reads the segments `entries` of offer `number` of `source` into `dst` (one buffer
// per entry, of its bytes).
void PullShared(runtime::Context& context, const transport::shm::NeighborLinks& links, int source, uint32_t number,
                const std::vector<SegmentInfo>& entries, const std::vector<char*>& dst, const LazyText& what,
                uint64_t sequence);

// `bytes` at `offset` of publication `number` in `source`'s outbox. The publication was
// made before the frame announcing it was sent, so it is visible at once; the wait is
// bounded all the same by the checks of every wait for peers.
const char* ReadShared(runtime::Context& context, const transport::shm::NeighborLinks& links, int source,
                       uint32_t number, uint64_t offset, uint64_t bytes, const LazyText& what, uint64_t sequence);

// A receiver's hold on one publication of a peer's outbox: released (with every earlier
// one) when destroyed.
class Lease {
 public:
  Lease(std::shared_ptr<transport::shm::NeighborLinks> links, int peer, uint32_t number)
      : links_(std::move(links)), peer_(peer), number_(number) {}
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

 private:
  std::shared_ptr<transport::shm::NeighborLinks> links_;
  int peer_;
  uint32_t number_;
};

}  // namespace starling::ops
