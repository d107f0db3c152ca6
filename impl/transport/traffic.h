// What a context moves to and from its peers, per peer (starling_get_peer_stats) and in
// total (starling_get_stats). Counted where messages are handed to MPI and where
// receives complete, on the data channels only (not the failure detector's pings or
// failure notices), and where data is published in shared memory for a same-host peer
// and read there, so the totals are the sums over the peers whatever the path.
//
// Written by whichever thread moves the bytes (the executor, the progress thread
// serving windows), read by anyone: relaxed atomics, each counter exact on its own
// (a reader may see one counter of a message updated and not yet the other). Only the
// per-peer counters are written on the message path (two additions per message); the
// totals are summed when read.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace starling::transport {

// One peer's figures, or the sums over peers (a plain copy).
struct PeerTraffic {
  uint64_t messages_sent = 0;
  uint64_t bytes_sent = 0;  // through MPI or shared memory
  uint64_t messages_received = 0;
  uint64_t bytes_received = 0;
  uint64_t shm_bytes_sent = 0;  // of bytes_sent, through shared memory
  uint64_t shm_bytes_received = 0;
  uint64_t waits = 0;         // operation steps that exchanged messages with this peer
  uint64_t wait_ns = 0;       // their total time from the step's start to its last message with this peer
  uint64_t last_wait_ns = 0;  // the most recent such time
  // The last starling_probe_peers (0: never probed).
  uint64_t probe_latency_ns = 0;
  uint64_t probe_bytes_per_second = 0;

  // Adds the message and byte counts (not the waits or probes) of `other`.
  void AddTraffic(const PeerTraffic& other);
};

// Per-peer counters for one numbering of the ranks: a repair or grow renumbers them,
// and the context then starts a new Traffic (keeping the old one's sums).
class Traffic {
 public:
  explicit Traffic(int size);
  int size() const { return size_; }

  // Peers outside 0 .. size-1 (none expected) count in the sums only.
  void Sent(int peer, size_t bytes);
  void Received(int peer, size_t bytes);
  // Data published in shared memory for `peer`, and read from `peer`'s (no message).
  void SentShared(int peer, size_t bytes);
  void ReceivedShared(int peer, size_t bytes);
  void Waited(int peer, uint64_t ns);
  void Probed(int peer, double latency_seconds, double bytes_per_second);

  PeerTraffic Peer(int peer) const;
  // Messages and bytes summed over every peer.
  PeerTraffic Sums() const;

 private:
  struct Counters {
    std::atomic<uint64_t> messages_sent{0};
    std::atomic<uint64_t> bytes_sent{0};
    std::atomic<uint64_t> messages_received{0};
    std::atomic<uint64_t> bytes_received{0};
    std::atomic<uint64_t> shm_bytes_sent{0};
    std::atomic<uint64_t> shm_bytes_received{0};
    std::atomic<uint64_t> waits{0};
    std::atomic<uint64_t> wait_ns{0};
    std::atomic<uint64_t> last_wait_ns{0};
    std::atomic<uint64_t> probe_latency_ns{0};
    std::atomic<uint64_t> probe_bytes_per_second{0};
  };
  // peers_[size_] collects what names no valid peer.
  Counters& at(int peer) const { return peers_[peer >= 0 && peer < size_ ? peer : size_]; }
  PeerTraffic Load(const Counters& c) const;

  int size_;
  std::unique_ptr<Counters[]> peers_;
};

}  // namespace starling::transport
