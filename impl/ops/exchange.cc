#include "impl/ops/exchange.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <set>

#include "impl/common/logging.h"
#include "impl/common/quarantine.h"
#include "impl/runtime/engine.h"
#include "impl/runtime/wait_monitor.h"

namespace starling::ops {
namespace {
using Clock = std::chrono::steady_clock;
using transport::Completion;
using transport::Ticket;

constexpr size_t kMaxOutstandingChunks = 16;  // per stream: bounds MPI requests in flight
constexpr size_t kStreamSlots = 4;            // scratch slots of a RecvStream
// Between machines (ChunkFor): measured across namespace hosts with 1 Gbit/s links, DDP
// of a 23 MB gradient, 1 rank per host: 1 MiB chunks 251 ms per step, 4 and 16 MiB 231-238.
constexpr size_t kNetworkChunkFactor = 4;
constexpr size_t kMaxNetworkChunkBytes = size_t{64} << 20;
constexpr int kSpinsBeforeYield = 128;

constexpr int64_t kNoWait = 0;  // a settled time: completed before the wait had to poll twice

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

struct Exchange::Send {
  int peer;
  Ticket ticket;
  runtime::ScratchPool::Buffer buffer;  // packed header + inline payload
};

struct Exchange::Stream {
  bool is_send = false;
  int peer = -1;
  const char* src = nullptr;
  char* dst = nullptr;  // nullptr: rotating slots
  size_t bytes = 0;
  size_t chunk = 0;
  size_t num_chunks = 0;
  size_t posted = 0;
  size_t delivered = 0;
  std::deque<Ticket> tickets;  // outstanding, chunk `delivered + i` at index i
  std::vector<runtime::ScratchPool::Buffer> slots;
  ChunkFn on_chunk;
  bool done = false;
};

struct Exchange::Frame {
  int peer = -1;
  Ticket ticket;
  runtime::ScratchPool::Buffer buffer;   // header + inline payload
  runtime::ScratchPool::Buffer payload;  // a larger payload's follow-up messages
  std::shared_ptr<runtime::ScratchPool::Buffer> trailer;  // FrameTrailerBytes after the payload
  Header header;
  const char* data = nullptr;
  Stream* payload_stream = nullptr;
  Stream* trailer_stream = nullptr;
  bool header_done = false;
  bool done = false;
};

Exchange::Exchange(runtime::Context& context, transport::Channel channel, LazyText what)
    : context_(context),
      transport_(context.transport()),
      channel_(channel),
      what_(std::move(what)),
      chunk_(context.config().chunk_bytes),
      inline_(std::min(context.config().inline_bytes, kMaxInlineBytes)) {}

Exchange::~Exchange() {
  if (active_ > 0) Abandon();
}

void Exchange::SendFrame(int peer, const Header& header, const void* payload) {
  const size_t bytes = header.payload_bytes;
  const bool inlined = bytes <= inline_;
  auto send = std::make_unique<Send>();
  send->peer = peer;
  send->buffer = context_.scratch().Get(sizeof(Header) + (inlined ? bytes : 0));
  Header h = header;
  h.chunk = static_cast<uint32_t>(WholeMessageChunk(bytes));
  if (inlined) h.flags |= kFlagPayloadInline;
  std::memcpy(send->buffer.data(), &h, sizeof h);
  if (inlined && bytes > 0) std::memcpy(send->buffer.data() + sizeof h, payload, bytes);
  send->ticket = transport_.Isend(channel_, peer, send->buffer.data(), sizeof h + (inlined ? bytes : 0));
  sends_.push_back(std::move(send));
  ++active_;
  if (!inlined && bytes > 0) SendRaw(peer, payload, bytes, h.chunk);
}

int Exchange::RecvFrame(int peer) {
  auto frame = std::make_unique<Frame>();
  frame->peer = peer;
  frame->buffer = context_.scratch().Get(sizeof(Header) + kMaxInlineBytes);
  frame->ticket = transport_.Irecv(channel_, peer, frame->buffer.data(), sizeof(Header) + kMaxInlineBytes);
  frames_.push_back(std::move(frame));
  ++active_;
  return static_cast<int>(frames_.size()) - 1;
}

const Header& Exchange::header(int frame) const { return frames_.at(static_cast<size_t>(frame))->header; }
const char* Exchange::payload(int frame) const { return frames_.at(static_cast<size_t>(frame))->data; }

std::shared_ptr<runtime::ScratchPool::Buffer> Exchange::TakeFrameTrailer(int frame) {
  Frame& f = *frames_.at(static_cast<size_t>(frame));
  STARLING_CHECK(f.done, Code::kInternal, "TakeFrameTrailer on an unfinished frame");
  return f.trailer;
}

std::shared_ptr<runtime::ScratchPool::Buffer> Exchange::TakeFrameStorage(int frame) {
  Frame& f = *frames_.at(static_cast<size_t>(frame));
  STARLING_CHECK(f.done, Code::kInternal, "TakeFrameStorage on an unfinished frame");
  return std::make_shared<runtime::ScratchPool::Buffer>(std::move(f.payload_stream ? f.payload : f.buffer));
}

Exchange::Stream& Exchange::AddStream(bool is_send, int peer, const char* src, char* dst, size_t bytes,
                                      size_t chunk, ChunkFn on_chunk) {
  auto stream = std::make_unique<Stream>();
  stream->is_send = is_send;
  stream->peer = peer;
  stream->src = src;
  stream->dst = dst;
  stream->bytes = bytes;
  stream->chunk = chunk;
  stream->num_chunks = (bytes + chunk - 1) / chunk;
  stream->on_chunk = std::move(on_chunk);
  streams_.push_back(std::move(stream));
  Stream& s = *streams_.back();
  if (s.num_chunks == 0) {
    s.done = true;
    return s;
  }
  ++active_;
  if (!is_send && dst == nullptr) {
    for (size_t i = 0; i < std::min(kStreamSlots, s.num_chunks); ++i) s.slots.push_back(context_.scratch().Get(chunk));
  }
  PostChunks(s);
  return s;
}

size_t Exchange::ChunkFor(int peer) const {
  const std::vector<int>& machine = context_.layout().machine_ranks;
  if (std::binary_search(machine.begin(), machine.end(), peer)) return chunk_;
  return std::max(chunk_, std::min(chunk_ * kNetworkChunkFactor, kMaxNetworkChunkBytes));
}

void Exchange::SendRaw(int peer, const void* data, size_t bytes, size_t chunk) {
  AddStream(true, peer, static_cast<const char*>(data), nullptr, bytes, chunk ? chunk : ChunkFor(peer), nullptr);
}

void Exchange::RecvRaw(int peer, void* dst, size_t bytes, ChunkFn on_chunk, size_t chunk) {
  AddStream(false, peer, nullptr, static_cast<char*>(dst), bytes, chunk ? chunk : ChunkFor(peer),
            std::move(on_chunk));
}

void Exchange::RecvStream(int peer, size_t bytes, ChunkFn on_chunk) {
  AddStream(false, peer, nullptr, nullptr, bytes, ChunkFor(peer), std::move(on_chunk));
}

void Exchange::PostChunks(Stream& s) {
  const size_t limit = s.dst == nullptr && !s.is_send ? s.slots.size() : kMaxOutstandingChunks;
  while (s.posted < s.num_chunks && s.posted - s.delivered < limit) {
    const size_t offset = s.posted * s.chunk;
    const size_t length = std::min(s.chunk, s.bytes - offset);
    if (s.is_send) {
      s.tickets.push_back(transport_.Isend(channel_, s.peer, s.src + offset, length));
    } else {
      char* target = s.dst ? s.dst + offset : s.slots[s.posted % s.slots.size()].data();
      s.tickets.push_back(transport_.Irecv(channel_, s.peer, target, length));
    }
    ++s.posted;
  }
}

bool Exchange::ProgressStream(Stream& s) {
  bool progressed = false;
  while (!s.tickets.empty()) {
    Completion completion;
    if (!transport_.Test(s.tickets.front(), &completion)) break;
    s.tickets.pop_front();
    const size_t offset = s.delivered * s.chunk;
    const size_t length = std::min(s.chunk, s.bytes - offset);
    if (!s.is_send) {
      STARLING_CHECK(completion.bytes == length, Code::kMismatch, what_(), ": rank ", s.peer, " sent ",
                     completion.bytes, " bytes where ", length, " were expected; ranks are out of step");
      if (s.on_chunk) {
        const char* data = s.dst ? s.dst + offset : s.slots[s.delivered % s.slots.size()].data();
        s.on_chunk(data, offset, length);
      }
    }
    ++s.delivered;
    progressed = true;
    PostChunks(s);
  }
  if (s.delivered == s.num_chunks) {
    s.done = true;
    --active_;
    Settled(s.peer);
  }
  return progressed;
}

bool Exchange::ProgressFrame(Frame& f) {
  if (f.header_done) {
    if (f.payload_stream != nullptr && !f.payload_stream->done) return false;
    return FinishFrame(f);
  }
  Completion completion;
  if (!transport_.Test(f.ticket, &completion)) return false;
  f.header_done = true;
  const std::string problem = ValidateFrameHeader(f.buffer.data(), completion.bytes, &f.header);
  STARLING_CHECK(problem.empty(), Code::kMismatch, what_(), ": rank ", f.peer, " sent ", problem,
                 "; ranks are out of step");
  const Header& h = f.header;
  if (channel_ == transport::Channel::kCollective && h.sig.seq > context_.sequence()) {
    // A frame of a later operation of the sender: it made a call this rank did not
    // make, and the frame meant for this rank's next operation is taken here, so later
    // operations would wait for it forever. This one fails as ranks that disagree do
    // (its headers); every later one, on every rank, fails at once.
    const std::string reason =
        Str("ranks are out of step: rank ", f.peer, " sent ", DescribeSignature(h.sig), " to ", what_(), " (#",
            context_.sequence(), " here); the context cannot match later messages");
    context_.MarkBroken(reason, Code::kMismatch);
    context_.NotifyMismatch(reason);
  }
  if (h.flags & kFlagPayloadInline) {
    f.data = f.buffer.data() + sizeof(Header);
    FinishFrame(f);
    return true;
  }
  f.payload = context_.scratch().Get(h.payload_bytes);
  f.data = f.payload.data();
  f.payload_stream = &AddStream(false, f.peer, nullptr, f.payload.data(), h.payload_bytes, h.chunk, nullptr);
  return true;
}

// The payload is in. A trailer is received next (never beside the payload: the
// receives of two streams from one peer must be posted in the order of the sends), by
// every receiver, also one that expected another operation (see Header).
bool Exchange::FinishFrame(Frame& f) {
  const uint64_t trailer = FrameTrailerBytes(f.header);
  if (trailer > 0 && f.trailer_stream == nullptr) {
    f.trailer = std::make_shared<runtime::ScratchPool::Buffer>(context_.scratch().Get(trailer));
    f.trailer_stream = &AddStream(false, f.peer, nullptr, f.trailer->data(), trailer, WholeMessageChunk(trailer), nullptr);
    return true;
  }
  if (f.trailer_stream != nullptr && !f.trailer_stream->done) return false;
  f.done = true;
  ++frames_done_;
  --active_;
  Settled(f.peer);
  return true;
}

bool Exchange::Progress() {
  bool progressed = false;
  for (auto& send : sends_) {
    if (send->ticket.active && transport_.Test(send->ticket, nullptr)) {
      --active_;
      progressed = true;
      Settled(send->peer);
    }
  }
  for (auto& frame : frames_) {
    if (!frame->done) progressed |= ProgressFrame(*frame);
  }
  // Index loop: completing a frame header may append its payload stream.
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (!streams_[i]->done) progressed |= ProgressStream(*streams_[i]);
  }
  return progressed;
}

void Exchange::Settled(int peer) {
  unstamped_ = true;
  for (auto& [p, when] : settled_) {
    if (p == peer) {
      when = -1;
      return;
    }
  }
  settled_.emplace_back(peer, -1);
}

void Exchange::StampSettled() {
  if (!unstamped_) return;
  unstamped_ = false;
  // One clock read per polling pass, not per message; none before the wait first found
  // nothing to do (what completed on the first pass did not wait).
  const int64_t now = wait_start_ < 0 ? kNoWait : NowNs();
  for (auto& entry : settled_)
    if (entry.second < 0) entry.second = now;
}

void Exchange::Wait() { WaitUntil(false, -1); }

bool Exchange::WaitForFrame(double patience_seconds) { return WaitUntil(true, patience_seconds); }

bool Exchange::frame_done(int frame) const { return frames_.at(static_cast<size_t>(frame))->done; }

void Exchange::ReleaseFrame(int frame) {
  Frame& f = *frames_.at(static_cast<size_t>(frame));
  STARLING_CHECK(f.done, Code::kInternal, "ReleaseFrame on an unfinished frame");
  f.buffer = {};
  f.payload = {};
  f.trailer.reset();
  f.data = nullptr;
}

bool Exchange::WaitUntil(bool any_frame, double patience_seconds) {
  // Per-peer wait times (starling_get_peer_stats): from here (the first polling pass
  // that found nothing to do) until the last message to or from each peer in this wait
  // completed (a peer that is late to send, or to take what we send it, holds it up).
  wait_start_ = -1;
  settled_.clear();
  runtime::WaitMonitor monitor(context_, what_,
                              channel_ == transport::Channel::kCollective ? context_.sequence() : 0);
  auto awaited = [this] { return Awaited(); };
  // A wait on the application's thread (a blocking call, or a wait that runs the queue)
  // keeps its core: the application is waiting for it. A wait on the progress thread
  // yields: the application may be computing beside it (nonblocking work overlapping
  // computation). Where this job's ranks outnumber the host's CPUs, the peer awaited
  // may need this very core: every wait yields.
  const bool yield = context_.layout().host_oversubscribed || runtime::Engine::OnProgressThread();
  int idle = 0;
  const uint64_t frames_before = frames_done_;
  const int64_t patience_ns = patience_seconds < 0 ? -1 : static_cast<int64_t>(patience_seconds * 1e9);
  bool out_of_patience = false;
  try {
    while (active_ > 0 && !(any_frame && frames_done_ > frames_before)) {
      monitor.CheckAborted();  // one relaxed load: an abort ends the wait within microseconds
      bool progressed = false;
      try {
        progressed = Progress();
      } catch (const Error& e) {
        monitor.ExplainTransportFailure(e, awaited);  // a gone same-host peer: PEER_FAILED
        throw;
      }
      StampSettled();
      if (progressed) {
        idle = 0;
        continue;
      }
      ++idle;
      if (wait_start_ < 0) wait_start_ = NowNs();
      if (patience_ns >= 0 && (idle & 15) == 0 && NowNs() - wait_start_ > patience_ns) {
        out_of_patience = true;
        break;
      }
      // Serve one-sided window requests on every idle poll: a peer may be waiting for us
      // to acknowledge its put before it can reach this collective, and where ranks share
      // cores each poll may be our last before the scheduler switches (4 ranks on 2
      // cores: a 4 KiB put took 150-220 us serving every 16th poll, 45-55 us every poll).
      // Without windows this is one load and a compare-and-swap.
      if (context_.ServiceBackground()) idle = 0;
      // Stall warning, timeout, peer failure: checked every 64 idle polls.
      if ((idle & 63) == 0) monitor.Check(awaited);
      // Where nothing of ours needs the core, a yield hands it to an unrelated busy
      // process for a whole time slice (2 ranks on 2 cores beside 2 busy processes:
      // blocking calls from Python took up to 130x mpi4py's time), so the wait spins as
      // MPI's own waits do.
      if (yield && idle > kSpinsBeforeYield) sched_yield();
    }
  } catch (const Error& e) {
    if (active_ > 0 && Abandon()) {
      throw Error(e.code(), Str(e.what(), "; a receive already under way could not be withdrawn: keep this "
                                          "operation's output tensor allocated (MPI may still write it)"));
    }
    throw;
  }
  if (transport::Traffic* traffic = transport_.traffic()) {
    for (const auto& [peer, when] : settled_)
      traffic->Waited(peer, when == kNoWait ? 0 : static_cast<uint64_t>(std::max<int64_t>(0, when - wait_start_)));
  }
  return !out_of_patience;
}

void Exchange::Clear() {
  STARLING_CHECK(active_ == 0, Code::kInternal, "Exchange::Clear with operations in flight");
  frames_.clear();
  streams_.clear();
  sends_.clear();
}

runtime::Awaited Exchange::Awaited() const {
  std::set<int> receiving, sending;
  for (const auto& f : frames_)
    if (!f->done) receiving.insert(f->peer);
  for (const auto& s : streams_)
    if (!s->done) (s->is_send ? sending : receiving).insert(s->peer);
  for (const auto& s : sends_)
    if (s->ticket.active) sending.insert(s->peer);
  std::string text;
  auto list = [](const std::set<int>& ranks) {
    std::string out;
    for (int r : ranks) out += Str(out.empty() ? "" : ", ", r);
    return out;
  };
  if (!receiving.empty()) text += Str("rank(s) ", list(receiving), " (not heard from)");
  if (!sending.empty()) text += Str(text.empty() ? "" : " and ", "rank(s) ", list(sending), " (not receiving)");
  runtime::Awaited awaited;
  awaited.ranks = receiving;
  awaited.ranks.insert(sending.begin(), sending.end());
  awaited.text = text.empty() ? "nothing" : text;
  return awaited;
}

bool Exchange::Abandon() {
  // Receives are withdrawn; one whose message is already arriving gets a short grace
  // period (its sender may be dead: never an unbounded MPI_Wait). Sends cannot be
  // withdrawn: their packed buffers are quarantined (kept, never freed) so MPI never
  // reads freed memory. This only happens after a failure (timeout, abort, dead peer), when the
  // context is unusable anyway.
  using Outcome = transport::Transport::CancelOutcome;
  const auto deadline = Clock::now() + std::chrono::milliseconds(200);
  auto remaining = [&] { return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count()); };
  bool scratch_pending = false;
  bool user_pending = false;
  for (auto& f : frames_) {
    if (f->ticket.active && transport_.CancelRecvWithin(f->ticket, remaining()) == Outcome::kPending)
      scratch_pending = true;
  }
  for (auto& s : streams_) {
    if (s->is_send) continue;
    for (auto& t : s->tickets) {
      if (t.active && transport_.CancelRecvWithin(t, remaining()) == Outcome::kPending) {
        // Frame payloads and rotating slots are scratch; RecvRaw targets are the caller's.
        bool scratch = s->dst == nullptr;
        for (const auto& f : frames_)
          if (f->payload_stream == s.get() || f->trailer_stream == s.get()) scratch = true;
        (scratch ? scratch_pending : user_pending) = true;
      }
    }
  }
  for (auto& send : sends_) {
    if (send->ticket.active) Quarantine(std::make_shared<runtime::ScratchPool::Buffer>(std::move(send->buffer)));
  }
  if (scratch_pending) {
    // MPI may still write into these buffers: quarantine them with their owners.
    Quarantine(std::make_shared<std::vector<std::unique_ptr<Frame>>>(std::move(frames_)));
    Quarantine(std::make_shared<std::vector<std::unique_ptr<Stream>>>(std::move(streams_)));
    frames_.clear();
    streams_.clear();
  }
  active_ = 0;
  return user_pending;
}

}  // namespace starling::ops
