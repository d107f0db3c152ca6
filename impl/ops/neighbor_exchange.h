// The message layer of neighbor operations. A neighbor frame carries a table of
// segments, one per operation it serves, each tagged with that operation's sequence
// number; the data follows in the frame (small) or as raw streams (large). Senders may
// fuse consecutive operations into one frame and receivers may fuse differently: a
// receiver takes, per source, exactly the segments of the operations it is running and
// keeps any that arrived early in the context's mailbox. So fusion needs no
// negotiation between ranks.
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
