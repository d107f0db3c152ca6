#include "impl/transport/traffic.h"

namespace starling::transport {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

void PeerTraffic::AddTraffic(const PeerTraffic& o) {
  messages_sent += o.messages_sent;
  bytes_sent += o.bytes_sent;
  messages_received += o.messages_received;
  bytes_received += o.bytes_received;
  shm_bytes_sent += o.shm_bytes_sent;
  shm_bytes_received += o.shm_bytes_received;
}

Traffic::Traffic(int size) : size_(size > 0 ? size : 0), peers_(new Counters[(size > 0 ? size : 0) + 1]) {}

void Traffic::Sent(int peer, size_t bytes) {
  Counters& c = at(peer);
  c.messages_sent.fetch_add(1, kRelaxed);
  c.bytes_sent.fetch_add(bytes, kRelaxed);
}

void Traffic::Received(int peer, size_t bytes) {
  Counters& c = at(peer);
  c.messages_received.fetch_add(1, kRelaxed);
  c.bytes_received.fetch_add(bytes, kRelaxed);
}

void Traffic::SentShared(int peer, size_t bytes) {
  Counters& c = at(peer);
  c.bytes_sent.fetch_add(bytes, kRelaxed);
  c.shm_bytes_sent.fetch_add(bytes, kRelaxed);
}

void Traffic::ReceivedShared(int peer, size_t bytes) {
  Counters& c = at(peer);
  c.bytes_received.fetch_add(bytes, kRelaxed);
  c.shm_bytes_received.fetch_add(bytes, kRelaxed);
}

void Traffic::Waited(int peer, uint64_t ns) {
  Counters& c = at(peer);
  c.waits.fetch_add(1, kRelaxed);
  c.wait_ns.fetch_add(ns, kRelaxed);
  c.last_wait_ns.store(ns, kRelaxed);
}

void Traffic::Probed(int peer, double latency_seconds, double bytes_per_second) {
  Counters& c = at(peer);
  c.probe_latency_ns.store(static_cast<uint64_t>(latency_seconds * 1e9 + 0.5), kRelaxed);
  c.probe_bytes_per_second.store(static_cast<uint64_t>(bytes_per_second + 0.5), kRelaxed);
}

PeerTraffic Traffic::Load(const Counters& c) const {
  PeerTraffic out;
  out.messages_sent = c.messages_sent.load(kRelaxed);
  out.bytes_sent = c.bytes_sent.load(kRelaxed);
  out.messages_received = c.messages_received.load(kRelaxed);
  out.bytes_received = c.bytes_received.load(kRelaxed);
  out.shm_bytes_sent = c.shm_bytes_sent.load(kRelaxed);
  out.shm_bytes_received = c.shm_bytes_received.load(kRelaxed);
  out.waits = c.waits.load(kRelaxed);
  out.wait_ns = c.wait_ns.load(kRelaxed);
  out.last_wait_ns = c.last_wait_ns.load(kRelaxed);
  out.probe_latency_ns = c.probe_latency_ns.load(kRelaxed);
  out.probe_bytes_per_second = c.probe_bytes_per_second.load(kRelaxed);
  return out;
}

PeerTraffic Traffic::Peer(int peer) const { return peer >= 0 && peer < size_ ? Load(peers_[peer]) : PeerTraffic{}; }

PeerTraffic Traffic::Sums() const {
  PeerTraffic sums;
  for (int p = 0; p <= size_; ++p) sums.AddTraffic(Load(peers_[p]));
  return sums;
}

}  // namespace starling::transport
