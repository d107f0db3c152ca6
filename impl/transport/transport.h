// The message layer the operations are written against: nonblocking point-to-point
// messages on a few channels, tested for completion by polling. MPI implements it
// (transport/mpi); the interface keeps MPI's headers out of the rest of the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "impl/transport/traffic.h"

namespace starling::transport {

// Independent message streams. Messages on one channel between two ranks arrive in
// the order they were sent; channels never see each other's messages.
enum class Channel : int {
  kCollective = 0,     // operations every rank takes part in, in order
  kPeer = 1,           // pair_gossip between two ranks
  kWindowRequest = 2,  // one-sided window requests (received from any source)
  kWindowData = 3,     // payloads that follow a window request
  kWindowReply = 4,    // acknowledgements and get replies
  kControl = 5,        // failure notices (a rank tells the others that a peer is gone)
  kHeartbeat = 6,      // pings and answers of the failure detector (runtime/heartbeat.h)
};
constexpr int kNumChannels = 7;
constexpr int kAnySource = -1;

// Data moves on these; the failure detector's and failure notices' messages are not
// counted as traffic.
constexpr bool CountsAsTraffic(Channel channel) {
  return channel != Channel::kControl && channel != Channel::kHeartbeat;
}

// A posted send or receive. Opaque storage for the transport's own request handle.
struct Ticket {
  alignas(8) unsigned char storage[8] = {};
  bool active = false;
  bool receive = false;  // counted as received data when it completes
};

struct Completion {
  size_t bytes = 0;  // bytes received (receives only)
  int source = -1;   // sender (receives only)
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // `data` must stay untouched (send) / valid (receive) until the ticket completes.
  virtual Ticket Isend(Channel channel, int peer, const void* data, size_t bytes) = 0;
  virtual Ticket Irecv(Channel channel, int peer, void* data, size_t capacity) = 0;
  // True once the ticket completed (it is then inactive). Throws Error(kMismatch) if an
  // incoming message was larger than the receive capacity, Error(kTransport) on failure.
  virtual bool Test(Ticket& ticket, Completion* completion) = 0;
  // Withdraws a posted receive. Returns true if it was withdrawn before a message
  // matched it; false if it completed (it is then inactive either way).
  virtual bool CancelRecv(Ticket& ticket) = 0;
  // Withdraws a posted receive without waiting longer than max_seconds for a message
  // that is already arriving (whose sender may be dead). kPending: the receive could
  // not be withdrawn in time; the ticket stays active and its buffer must stay valid
  // (the caller must then never free it: see Quarantine).
  enum class CancelOutcome { kCancelled, kCompleted, kPending };
  virtual CancelOutcome CancelRecvWithin(Ticket& ticket, double max_seconds) = 0;

  // Where messages are counted (set once by the context before any traffic; null:
  // nothing is counted).
  void SetTraffic(std::shared_ptr<Traffic> traffic) { traffic_ = std::move(traffic); }
  Traffic* traffic() const { return traffic_.get(); }

 protected:
  std::shared_ptr<Traffic> traffic_;
};

}  // namespace starling::transport
