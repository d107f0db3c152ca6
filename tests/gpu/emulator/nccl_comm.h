// The emulated NCCL communicator: the ranks of one comm are processes on one host,
// connected pairwise (a full mesh) by Unix-domain stream sockets in Linux's abstract
// namespace, named after the unique id and the rank, so nothing is left in /tmp.
//
// Each peer connection has a reader thread that drains every incoming frame into that
// peer's queues at once (unbounded), so a send never waits for the peer to call anything:
// grouped sends and receives between the same ranks cannot deadlock, and frames between
// a pair are matched in order. A peer that exits closes its socket; the reader sees it and
// waiting operations fail at once instead of hanging. Every wait is also bounded by
// STARLING_EMU_NCCL_TIMEOUT (a real NCCL would hang: a missing group, a mismatched call).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace starling::emu {

// One frame on the wire: this header, then `payload` bytes.
struct Frame {
  uint32_t magic = 0;
  uint32_t kind = 0;  // FrameKind
  uint32_t coll = 0;  // for kColl: CollKind
  int32_t dtype = -1;
  int32_t op = -1;
  int32_t root = -1;
  uint64_t count = 0;    // the call's count (elements for all_reduce and reduce_scatter, else bytes)
  uint64_t payload = 0;  // bytes following the header
};
enum FrameKind : uint32_t { kHello = 1, kP2P = 2, kColl = 3, kAck = 4, kBye = 5 };
enum CollKind : uint32_t { kAllReduce = 1, kBroadcast = 2, kAllGather = 3, kReduceScatter = 4 };

struct Message {
  Frame frame;
  std::vector<char> data;
};

enum class Channel { kP2P, kColl };

class Comm {
 public:
  // Starts the collective bootstrap of nccl_comm_init (on a thread); 0 or Fail().
  static int Create(int nranks, const void* id, int rank, int device, std::shared_ptr<Comm>* out);
  // Fills STARLING_NCCL_ID_BYTES bytes with a fresh id.
  static void NewId(void* id);
  ~Comm();

  int nranks() const { return nranks_; }
  int rank() const { return rank_; }
  int device() const { return device_; }

  // Sends a frame and its payload to peer (to itself: straight into its own queue).
  // Returns "" or the failure.
  std::string Send(int peer, Frame frame, const void* payload);
  // The next message from peer on a channel, waiting at most the timeout.
  std::string Take(int peer, Channel channel, Message* out);
  // Counts the p2p messages sent to peer; the number of this one.
  uint64_t CountSend(int peer);
  // Waits until peer has received `n` of our p2p messages (it acknowledges each).
  std::string WaitAcks(int peer, uint64_t n);

  // ncclCommGetAsyncError: 0 ready, 1 initializing, 2 failed (*why says how).
  int Status(std::string* why);

  // A failed communicator fails every later operation (as NCCL's async errors do).
  void MarkFailed(const std::string& why);
  std::string Failure();

  // Operations queued on streams and not finished; destroy waits for them.
  void Begin();
  void End();
  // destroy: waits for queued operations, says goodbye, closes. abort: closes now,
  // failing whatever waits. Neither waits for peers.
  void Close(bool abort);

 private:
  struct Peer {
    int fd = -1;
    std::thread reader;
    std::mutex send_mu;  // one frame at a time on the socket
    // Guarded by Comm::mu_:
    std::deque<Message> p2p, coll;
    uint64_t sent = 0;   // p2p messages sent to it
    uint64_t acked = 0;  // of which it has received
    bool said_bye = false;
    std::string closed;  // why the connection ended, once it did
  };

  Comm(int nranks, int rank, int device);
  void Bootstrap(const std::string& token);
  // mu_ held: a wait for a peer that is gone, which only an abort (or the emulator's
  // timeout) ends, as NCCL's kernels wait for such a peer forever. Returns the failure.
  std::string Hang(std::unique_lock<std::mutex>& lock, const std::string& why,
                   std::chrono::steady_clock::time_point deadline);
  // mu_ held: a peer is gone (reported as an async error only with PEER_LOSS=error).
  void PeerLost(const std::string& why);
  int Connect(const std::string& token, std::chrono::steady_clock::time_point deadline);
  void Read(int peer);
  void Deliver(int peer, Message message);
  // The reason a wait on peer cannot succeed, or "".
  std::string Blocked(int peer);

  const int nranks_, rank_, device_;
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; ours has no socket
  std::mutex mu_;
  std::condition_variable cv_;
  std::string failed_;
  std::string async_error_;
  bool initialized_ = false;
  std::atomic<bool> stop_{false};  // abort or destroy: the bootstrap gives up
  std::thread init_thread_;
  bool closing_ = false;
  bool closed_ = false;
  int in_flight_ = 0;
};

}  // namespace starling::emu
