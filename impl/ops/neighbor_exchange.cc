#include "impl/ops/neighbor_exchange.h"

#include <cstring>
#include <set>

#include "impl/ops/shm_data.h"

namespace starling::ops {
namespace {

using transport::shm::NeighborLinks;

// How long a reader waits for more frames before it copies what it holds of its peers'
// outboxes out of them (Detach), so that a peer that needs its buffer back is held up by
// at most this long, far below the writer's give-up time (shm_data.cc).
constexpr double kDetachAfterSeconds = 0.0005;

// Copies a segment still in a peer's outbox into scratch and lets the publication go.
// Done to everything held once a wait for more frames lasts kDetachAfterSeconds, so a
// rank never blocks long while holding a peer's buffer (the peer may need it back to
// send what this rank waits for: ranks that fuse differently).
void Detach(runtime::Context& context, Segment& segment) {
  if (!segment.lease) return;
  auto copy = std::make_shared<runtime::ScratchPool::Buffer>(context.scratch().Get(segment.info.bytes));
  if (segment.info.bytes > 0) std::memcpy(copy->data(), segment.data, segment.info.bytes);
  segment.storage = std::move(copy);
  segment.data = segment.storage->data();
  segment.lease.reset();
}

// `keep` holds the frame payload (and packed data) until the sends complete.
// Small frames carry table and data in one message. Otherwise the table travels
// alone and the data follows as ONE message: a single segment straight from the
// caller's tensor, several (a fused group) packed together. `shared`: the data is in
// this rank's outbox instead, and the frame carries the table only.
void Send(Exchange& ex, int sender, int peer, double weight, const std::vector<Outgoing>& outgoing,
          const Published* shared, std::vector<std::vector<char>>& keep) {
  const size_t table_bytes = outgoing.size() * sizeof(SegmentInfo);
  size_t data_bytes = 0;
  if (shared == nullptr)
    for (const Outgoing& o : outgoing) data_bytes += o.info.bytes;
  const bool packed = table_bytes + data_bytes <= ex.inline_bytes();
  keep.emplace_back(table_bytes + (packed ? data_bytes : 0));
  std::vector<char>& payload = keep.back();
  char* cursor = payload.data() + table_bytes;
  for (size_t i = 0; i < outgoing.size(); ++i) {
    SegmentInfo info = outgoing[i].info;
    info.weight = weight;
    if (shared != nullptr) {
      info.in_shm = shared->offered ? 2 : 1;
      info.shm_publication = shared->number;
      info.shm_offset = shared->offsets[i];
    }
    std::memcpy(payload.data() + i * sizeof(SegmentInfo), &info, sizeof info);
    if (packed && shared == nullptr && info.bytes > 0) {
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

// Parses a completed frame from `source` and appends its segments to `stash`: the data
// stays in the frame or its trailer (kept alive by the segments), or is read in place
// in the source's outbox.
void ReceiveFrame(runtime::Context& context, const std::shared_ptr<NeighborLinks>& links, Exchange& ex, int frame,
                  int source, const SegmentInfo& called, const LazyText& what, std::deque<Segment>& stash) {
  const Header& h = ex.header(frame);
  NeighborTable table;
  const std::string problem = ParseNeighborTable(h, ex.payload(frame), &table);
  STARLING_CHECK(problem.empty(), Code::kMismatch, what(), ": rank ", source, " ", problem, "; this rank called ",
                 DescribeSegment(called));
  std::shared_ptr<runtime::ScratchPool::Buffer> storage =
      table.packed ? ex.TakeFrameStorage(frame) : ex.TakeFrameTrailer(frame);
  const char* cursor = table.packed ? ex.payload(frame) + table.table_bytes : storage->data();
  std::shared_ptr<Lease> lease;  // one per frame: its segments share one publication
  std::vector<Segment> arrived;
  std::vector<SegmentInfo> offered;  // read from the source's memory, into their storage
  std::vector<char*> offered_dst;
  transport::Traffic* traffic = context.transport().traffic();
  for (const SegmentInfo& info : table.entries) {
    Segment segment;
    segment.info = info;
    if (info.in_shm) {
      const bool same_publication = info.shm_publication == table.entries[0].shm_publication &&
                                    info.in_shm == table.entries[0].in_shm;
      STARLING_CHECK(links && links->linked(source) && same_publication, Code::kTransport, what(), ": rank ", source,
                     " announced data in shared memory that this rank cannot read (",
                     links && links->linked(source) ? "two publications in one frame" : "the two ranks share no memory",
                     ")");
      if (traffic) traffic->ReceivedShared(source, info.bytes);
      if (info.in_shm == 2) {
        segment.storage = std::make_shared<runtime::ScratchPool::Buffer>(context.scratch().Get(info.bytes));
        segment.data = segment.storage->data();
        offered.push_back(info);
        offered_dst.push_back(segment.storage->data());
        arrived.push_back(std::move(segment));
        continue;
      }
      if (!lease) lease = std::make_shared<Lease>(links, source, info.shm_publication);
      segment.lease = lease;
      segment.data = ReadShared(context, *links, source, info.shm_publication, info.shm_offset, info.bytes, what,
                                context.sequence());
    } else {
      segment.storage = storage;
      segment.data = cursor;
      cursor += info.bytes;
    }
    arrived.push_back(std::move(segment));
  }
  if (!offered.empty())
    PullShared(context, *links, source, offered[0].shm_publication, offered, offered_dst, what, context.sequence());
  for (Segment& segment : arrived) stash.push_back(std::move(segment));
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
  const std::shared_ptr<NeighborLinks> links = context.shm_links();  // kept for the leases
  Published published;
  // Readers pull mid-size data from this rank's memory (the offer), else read it in its
  // outbox; the outgoing data stays unchanged until offer.Finish below.
  Offer offer(context, links, destinations, outgoing, &published);
  const bool shared = offer.valid() ||
                      PublishShared(context, links.get(), destinations, outgoing, what, context.sequence(), &published);
  Exchange sends(context, transport::Channel::kCollective, what);
  std::vector<std::vector<char>> keep;
  keep.reserve(destinations.size());
  transport::Traffic* traffic = context.transport().traffic();
  size_t data_bytes = 0;
  for (const Outgoing& o : outgoing) data_bytes += o.info.bytes;
  for (size_t d = 0; d < destinations.size(); ++d) {
    const bool linked = shared && links->linked(destinations[d]);
    Send(sends, context.rank(), destinations[d], destination_weights[d], outgoing, linked ? &published : nullptr,
         keep);
    if (linked && traffic) traffic->SentShared(destinations[d], data_bytes);
  }

  // Every source still missing segments always has one frame receive posted, and each
  // frame is handled as soon as it lands (the next receive from its source posted at
  // once). Waiting for one frame from every source before posting any source's next
  // deadlocked: a source ahead of this rank blocks in its send of a large frame until
  // this rank takes it, while another source, that this rank still waits for, waits
  // for that rank to move on (a cycle of three ranks fusing differently).
  std::vector<std::vector<Segment>> result(sources.size());
  Exchange ex(context, transport::Channel::kCollective, what);
  std::vector<int> frames(sources.size(), -1);  // the receive posted per source, -1: none
  auto take = [&](size_t s) {
    const int frame = frames[s];
    frames[s] = -1;
    ReceiveFrame(context, links, ex, frame, sources[s], outgoing[0].info, what, mailbox.from(sources[s]));
    ex.ReleaseFrame(frame);
  };
  // Before a mismatch is reported, the frames already asked for are taken and dropped
  // with everything else of this exchange's operations, so that neither they nor
  // their messages are mistaken for the next operation's.
  auto drop_posted = [&] {
    ex.Wait();
    mailbox.DropThrough(seqs.back());
  };
  for (;;) {
    bool complete = false;
    try {
      complete = TakeFromMailbox(mailbox, sources, seqs, result, what);
    } catch (const Error&) {
      drop_posted();
      throw;
    }
    if (complete) break;
    for (size_t s = 0; s < sources.size(); ++s)
      if (frames[s] < 0 && result[s].size() < seqs.size()) frames[s] = ex.RecvFrame(sources[s]);
    // Segments still in peers' outboxes are copied out only when the wait lasts: the
    // other sources' frames usually follow within microseconds, and a copy of every
    // segment before each wait cost up to 1.25x the time of a 256 KiB exchange.
    if (!ex.WaitForFrame(links ? kDetachAfterSeconds : -1)) {
      for (auto& segments : result)
        for (Segment& segment : segments) Detach(context, segment);
      mailbox.ForEach([&](Segment& segment) { Detach(context, segment); });
      ex.WaitForFrame();
    }
    for (size_t s = 0; s < sources.size(); ++s) {
      if (frames[s] < 0 || !ex.frame_done(frames[s])) continue;
      try {
        take(s);
      } catch (const Error&) {
        drop_posted();
        throw;
      }
    }
  }
  offer.Finish(context, what, context.sequence());
  sends.Wait();
  return result;
}

}  // namespace starling::ops
