// One step of an operation's message traffic with its peers, and the wait loop that
// drives it. Operations post frames (header + payload) and raw chunked streams, then
// call Wait(), which polls the transport, delivers chunks in order to callbacks (so a
// reduction overlaps the arrival of the next chunk), warns about stalled peers and
// enforces the timeout.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "impl/ops/wire.h"
#include "impl/runtime/context.h"
#include "impl/runtime/wait_monitor.h"
#include "impl/transport/transport.h"

namespace starling::ops {

// Called for each chunk of a stream once it has arrived, in order.
using ChunkFn = std::function<void(const char* data, size_t offset, size_t length)>;

class Exchange {
 public:
  Exchange(runtime::Context& context, transport::Channel channel, LazyText what);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;
  const LazyText& what() const { return what_; }

  // --- frames: a header and a payload of header.payload_bytes (any size) ---
  void SendFrame(int peer, const Header& header, const void* payload);
  // Posts the receive of one frame from `peer`; returns its id for header()/payload().
  int RecvFrame(int peer);
  const Header& header(int frame) const;
  // The frame's payload (header().payload_bytes bytes), valid until Clear().
  const char* payload(int frame) const;

  // Moves a completed frame's storage out, so its payload (whose pointer stays valid)
  // can outlive this Exchange.
  std::shared_ptr<runtime::ScratchPool::Buffer> TakeFrameStorage(int frame);
  // A completed frame's trailer (FrameTrailerBytes of its header; null if none).
  std::shared_ptr<runtime::ScratchPool::Buffer> TakeFrameTrailer(int frame);

  // --- raw streams whose size both sides already agreed on ---
  // chunk: split into messages of at most this size (0: ChunkFor(peer)); the receiver
  // must use the same value.
  void SendRaw(int peer, const void* data, size_t bytes, size_t chunk = 0);
  // Receives straight into dst; on_chunk (optional) runs as each chunk lands. chunk:
  // the sender's chunk size (0: ChunkFor(peer)).
  void RecvRaw(int peer, void* dst, size_t bytes, ChunkFn on_chunk = nullptr, size_t chunk = 0);
  // Receives through a few rotating scratch slots: on_chunk must consume each chunk.
  void RecvStream(int peer, size_t bytes, ChunkFn on_chunk);

  // Blocks until everything posted has completed. Throws Error(kTimeout) after
  // STARLING_TIMEOUT_SECONDS, Error(kMismatch) on a malformed or oversized message,
  // Error(kAborted) once the context is aborted, Error(kPeerFailed) when an awaited
  // rank of this host is gone or another rank reported a gone peer. Everything posted
  // is withdrawn before it throws.
  void Wait();
  // The same wait, ending as soon as a frame completes (or nothing is left to wait
  // for): a receiver that waits for frames from several peers handles each as it
  // arrives and posts that peer's next receive at once. Waiting for all of them first
  // can deadlock: a peer ahead blocks until its next frame is taken, while the peer
  // that this rank still waits for needs that peer to move on (neighbor_exchange.cc).
  // patience_seconds >= 0: returns false if no frame completed within it (the caller
  // may then do something before it waits again), true otherwise.
  bool WaitForFrame(double patience_seconds = -1);
  bool frame_done(int frame) const;
  // Frees a completed frame's buffers (after its payload and trailer were taken).
  void ReleaseFrame(int frame);
  // Forgets completed frames and streams so the object can serve the next round.
  void Clear();

  size_t chunk_bytes() const { return chunk_; }
  // The default chunk of a stream between this rank and `peer`, the same on both sides:
  // STARLING_CHUNK_BYTES within a machine; kNetworkChunkFactor times that to a peer on
  // another machine, where each message costs a rendezvous (the receiver's answer) that
  // leaves the link idle, and reducing a chunk takes far less time than its arrival.
  size_t ChunkFor(int peer) const;
  size_t inline_bytes() const { return inline_; }

 private:
  struct Stream;
  struct Frame;
  struct Send;

  bool WaitUntil(bool any_frame, double patience_seconds);
  bool Progress();
  bool ProgressFrame(Frame& frame);
  bool FinishFrame(Frame& frame);
  bool ProgressStream(Stream& stream);
  void PostChunks(Stream& stream);
  Stream& AddStream(bool is_send, int peer, const char* src, char* dst, size_t bytes, size_t chunk,
                    ChunkFn on_chunk);
  // The peers still to be heard from / to receive, for the wait monitor.
  runtime::Awaited Awaited() const;
  // Withdraws everything posted (after a failure). True if a receive into the caller's
  // memory could not be withdrawn.
  bool Abandon();
  // A message to or from `peer` completed in this polling pass (per-peer wait times);
  // StampSettled gives such peers the time at the pass's end.
  void Settled(int peer);
  void StampSettled();

  runtime::Context& context_;
  transport::Transport& transport_;
  transport::Channel channel_;
  LazyText what_;
  size_t chunk_;
  size_t inline_;
  std::vector<std::unique_ptr<Frame>> frames_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Send>> sends_;
  int active_ = 0;
  uint64_t frames_done_ = 0;  // frames completed so far (WaitForFrame)
  // Peers with messages completed during the current Wait(), and when the last did (ns).
  std::vector<std::pair<int, int64_t>> settled_;  // -1: not stamped yet
  bool unstamped_ = false;
  int64_t wait_start_ = -1;  // ns, -1 until the current Wait() first finds nothing to do
};

}  // namespace starling::ops
