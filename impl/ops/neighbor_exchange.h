// The message layer of neighbor operations. A neighbor frame carries a table of
// segments, one per operation it serves, each tagged with that operation's sequence
// number; the data follows in the frame (small) or as raw streams (large). Senders may
// fuse consecutive operations into one frame and receivers may fuse differently: a
// receiver takes, per source, exactly the segments of the operations it is running and
// keeps any that arrived early in the context's mailbox. So fusion needs no
// negotiation between ranks.
//
// Between ranks of one host that share memory (runtime Context::shm_links), the data
// does not travel in the frame: the sender publishes it once into its outbox
// (transport/shm/outbox.h) and flags the table entries; each receiver reads it there
// directly. The frames still go through MPI, small (a table only), and keep doing what
// they did: ordering, fusion and every mismatch check, including a rank calling another
// operation, work exactly as on the MPI path. Because the sender chooses per exchange
// and says so in the frame, ranks can never disagree on the path (tensor sizes,
// thresholds and buffer capacity are the sender's business).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "impl/ops/exchange.h"
#include "impl/ops/wire.h"
#include "impl/runtime/context.h"

namespace starling::ops {

struct Segment {
  SegmentInfo info;
  std::shared_ptr<runtime::ScratchPool::Buffer> storage;  // keeps `data` alive
  std::shared_ptr<void> lease;  // data in a peer's outbox: released when the last goes
  const char* data = nullptr;
};

// What one operation sends: its table entry (weight is set per destination) and data.
struct Outgoing {
  SegmentInfo info;
  const void* data = nullptr;
};

// Segments received before their operation ran, per source. Used by the executor only.
class Mailbox {
 public:
  std::deque<Segment>& from(int rank) { return stash_[rank]; }
  // Forgets every segment of operations up to `seq` (after an exchange failed: none
  // can serve a later operation).
  void DropThrough(uint64_t seq) {
    for (auto& entry : stash_)
      while (!entry.second.empty() && entry.second.front().info.seq <= seq) entry.second.pop_front();
  }
  template <typename F>
  void ForEach(F f) {
    for (auto& entry : stash_)
      for (Segment& segment : entry.second) f(segment);
  }

 private:
  std::unordered_map<int, std::deque<Segment>> stash_;
};

// Sends every outgoing segment to every destination (with that destination's weight)
// and returns, for each source, the segments whose sequence numbers are `seqs`, in
// that order. Throws Error(kMismatch) when a source sends something else.
std::vector<std::vector<Segment>> NeighborExchange(runtime::Context& context, const std::vector<int>& destinations,
                                                   const std::vector<double>& destination_weights,
                                                   const std::vector<Outgoing>& outgoing,
                                                   const std::vector<int>& sources,
                                                   const std::vector<uint64_t>& seqs, const LazyText& what);

// "neighbor_allreduce #7 (float32, 1024 elements)" for a table entry.
std::string DescribeSegment(const SegmentInfo& info);

}  // namespace starling::ops
