#include "impl/ops/neighbor_exchange.h"

#include <cstring>

namespace starling::ops {
namespace {


// `keep` holds the frame payload (and packed data) until the sends complete.
// Small frames carry table and data in one message. Otherwise the table travels
// alone and the data follows as ONE message: a single segment straight from the
// caller's tensor, several (a fused group) packed together.
void Send(Exchange& ex, int sender, int peer, double weight, const std::vector<Outgoing>& outgoing,
          std::vector<std::vector<char>>& keep) {
  const size_t table_bytes = outgoing.size() * sizeof(SegmentInfo);
  size_t data_bytes = 0;
  for (const Outgoing& o : outgoing) data_bytes += o.info.bytes;
  const bool packed = table_bytes + data_bytes <= ex.inline_bytes();
  keep.emplace_back(table_bytes + (packed ? data_bytes : 0));
  std::vector<char>& payload = keep.back();
  char* cursor = payload.data() + table_bytes;
  for (size_t i = 0; i < outgoing.size(); ++i) {
    SegmentInfo info = outgoing[i].info;
    info.weight = weight;
    std::memcpy(payload.data() + i * sizeof(SegmentInfo), &info, sizeof info);
    if (packed && info.bytes > 0) {
      std::memcpy(cursor, outgoing[i].data, info.bytes);
      cursor += info.bytes;
    }
  }
  Header header;
  header.sender = sender;
  header.sig.kind = OpKind::kNeighborFrame;
  header.sig.seq = outgoing[0].info.seq;  // the first operation, for the message of a
  header.sig.dtype = outgoing[0].info.dtype;  // classic collective's agreement that gets it
  header.sig.extra = static_cast<uint8_t>(outgoing[0].info.kind);
  header.sig.count = static_cast<int64_t>(outgoing.size());
  header.sig.chunk = static_cast<uint32_t>(WholeMessageChunk(data_bytes));
  header.payload_bytes = payload.size();
  header.aux = packed ? 0 : data_bytes;
  ex.SendFrame(peer, header, payload.data());
  if (packed || data_bytes == 0) return;
  const void* data = outgoing[0].data;
  if (outgoing.size() > 1) {
    keep.emplace_back(data_bytes);
    char* out = keep.back().data();
    for (const Outgoing& o : outgoing) {
      if (o.info.bytes > 0) std::memcpy(out, o.data, o.info.bytes);
      out += o.info.bytes;
    }
    data = keep.back().data();
  }
  ex.SendRaw(peer, data, data_bytes, WholeMessageChunk(data_bytes));
}

// Moves, for each source still missing segments, its stashed segments into `result`.
// Returns true when every source has all of `seqs`.
bool TakeFromMailbox(Mailbox& mailbox, const std::vector<int>& sources, const std::vector<uint64_t>& seqs,
                     std::vector<std::vector<Segment>>& result, const LazyText& what) {
  bool complete = true;
  for (size_t s = 0; s < sources.size(); ++s) {
    std::deque<Segment>& stash = mailbox.from(sources[s]);
    while (result[s].size() < seqs.size() && !stash.empty()) {
      const uint64_t expected = seqs[result[s].size()];
      const Segment& front = stash.front();
      STARLING_CHECK(front.info.seq == expected, Code::kMismatch, what(), ": rank ", sources[s], " sent ",
                     DescribeSegment(front.info), " where this rank expected data for operation #", expected,
                     front.info.seq < expected ? " (it sent data this rank never asked for: its destinations and "
                                                 "this rank's sources disagree)"
                                               : " (it skipped an operation or does not send to this rank)");
      result[s].push_back(stash.front());
      stash.pop_front();
    }
    if (result[s].size() < seqs.size()) complete = false;
  }
  return complete;
}

}  // namespace

std::string DescribeSegment(const SegmentInfo& info) {
  std::string s = Str(OpKindName(info.kind), " #", info.seq, " (");
  if (info.dtype < kNumDTypes) s += Str(DTypeName(static_cast<DType>(info.dtype)), ", ");
  if (info.kind == OpKind::kNeighborAllgather)
    s += Str(info.first_dim, " rows of ", info.count, " bytes");
  else
    s += Str(info.count, " elements");
  return s + ")";
}

std::vector<std::vector<Segment>> NeighborExchange(runtime::Context& context, const std::vector<int>& destinations,
                                                   const std::vector<double>& destination_weights,
                                                   const std::vector<Outgoing>& outgoing,
                                                   const std::vector<int>& sources,
                                                   const std::vector<uint64_t>& seqs, const LazyText& what) {
  Mailbox& mailbox = context.Extension<Mailbox>();
  Exchange sends(context, transport::Channel::kCollective, what);
  std::vector<std::vector<char>> keep;
  keep.reserve(destinations.size());
  for (size_t d = 0; d < destinations.size(); ++d)
    Send(sends, context.rank(), destinations[d], destination_weights[d], outgoing, keep);

  std::vector<std::vector<Segment>> result(sources.size());
  while (!TakeFromMailbox(mailbox, sources, seqs, result, what)) {
    // One more frame from every source still missing segments.
    Exchange ex(context, transport::Channel::kCollective, what);
    std::vector<int> frames(sources.size(), -1);
    for (size_t s = 0; s < sources.size(); ++s)
      if (result[s].size() < seqs.size()) frames[s] = ex.RecvFrame(sources[s]);
    ex.Wait();
    std::vector<std::vector<Segment>> arrived(sources.size());
    for (size_t s = 0; s < sources.size(); ++s) {
      if (frames[s] < 0) continue;
      const Header& h = ex.header(frames[s]);
      NeighborTable table;
      const std::string problem = ParseNeighborTable(h, ex.payload(frames[s]), &table);
      STARLING_CHECK(problem.empty(), Code::kMismatch, what(), ": rank ", sources[s], " ", problem,
                     "; this rank called ", DescribeSegment(outgoing[0].info));
      // The data lives in the frame (packed) or in its trailer.
      std::shared_ptr<runtime::ScratchPool::Buffer> storage =
          table.packed ? ex.TakeFrameStorage(frames[s]) : ex.TakeFrameTrailer(frames[s]);
      const char* cursor = table.packed ? ex.payload(frames[s]) + table.table_bytes : storage->data();
      for (const SegmentInfo& info : table.entries) {
        Segment segment;
        segment.info = info;
        segment.storage = storage;
        segment.data = cursor;
        cursor += info.bytes;
        arrived[s].push_back(std::move(segment));
      }
    }
    for (size_t s = 0; s < sources.size(); ++s)
      for (Segment& segment : arrived[s]) mailbox.from(sources[s]).push_back(std::move(segment));
  }
  sends.Wait();
  return result;
}

}  // namespace starling::ops
