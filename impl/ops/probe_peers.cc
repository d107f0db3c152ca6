// probe_peers: every rank measures its latency to, and throughput to, every other rank
// by ping-pong. In round r (1 .. size-1) rank i pings i + r and answers i - r, so each
// rank has one ping out and one to answer at a time, and every ordered pair is probed
// once. A rank answers the ping it gets the moment it lands and times only its own
// ping's round trip, so a slow link from i - r does not show as one to i + r.
// Latency: half the best round trip with header-only pings. Throughput: the ping
// carries `bulk` bytes, and the best round trip less the header-only one is its
// transfer time. Everyone probes at once, so a shared link or memory bus is measured
// under that load (as during training), and the ranks' clocks never need to agree.
#include <algorithm>
#include <chrono>
#include <limits>

#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

using Clock = std::chrono::steady_clock;

class ProbePeersOp : public runtime::Op {
 public:
  ProbePeersOp(int repetitions, size_t bulk_bytes, double* latency, double* throughput)
      : repetitions_(repetitions), bulk_(bulk_bytes), latency_(latency), throughput_(throughput) {}

  std::string Describe() const override {
    return Str("probe_peers (", repetitions_, " repetitions, ", bulk_, "-byte pings)");
  }

  void Run(runtime::Context& context) override {
    const int n = context.size(), rank = context.rank();
    Signature sig;
    sig.kind = OpKind::kProbePeers;
    sig.seq = NextSequence(context, sig.kind);
    sig.count = static_cast<int64_t>(bulk_);
    sig.root = repetitions_;
    std::vector<double> latency(static_cast<size_t>(n), 0.0), throughput(static_cast<size_t>(n), 0.0);
    if (n > 1) {
      Agree(context, WorldGroup(context), sig, Label());  // every rank probes, alike, or all get MISMATCH
      runtime::ScratchPool::Buffer payload = context.scratch().Get(bulk_);
      std::fill(payload.data(), payload.data() + bulk_, 0);
      for (int r = 1; r < n; ++r) {
        const int to = (rank + r) % n, from = (rank - r + n) % n;
        double small = std::numeric_limits<double>::infinity(), big = small;
        for (int i = 0; i < repetitions_; ++i) small = std::min(small, RoundTrip(context, sig, to, from, nullptr, 0));
        for (int i = 0; i < repetitions_; ++i) big = std::min(big, RoundTrip(context, sig, to, from, payload.data(), bulk_));
        latency[static_cast<size_t>(to)] = small / 2;
        // A transfer faster than the clock can tell is reported at the clock's limit.
        throughput[static_cast<size_t>(to)] = static_cast<double>(bulk_) / std::max(big - small, 1e-9);
      }
    }
    if (transport::Traffic* traffic = context.transport().traffic()) {
      for (int peer = 0; peer < n; ++peer)
        if (peer != rank) traffic->Probed(peer, latency[static_cast<size_t>(peer)], throughput[static_cast<size_t>(peer)]);
    }
    if (latency_) std::copy(latency.begin(), latency.end(), latency_);
    if (throughput_) std::copy(throughput.begin(), throughput.end(), throughput_);
  }

 private:
  // Seconds from sending a ping to `to` until its answer arrived. `from`'s ping is
  // answered the moment it lands, and does not hold up the timing: a slow link from
  // `from` must not make the link to `to` look slow.
  double RoundTrip(runtime::Context& context, const Signature& sig, int to, int from, const char* data,
                   size_t bytes) {
    Agreement agreement(context.rank(), sig);
    Exchange ex(context, transport::Channel::kCollective, Label());
    auto send = [&](bool ping) {
      Header header;
      agreement.Stamp(&header);
      header.aux = ping ? 0 : 1;
      header.payload_bytes = ping ? bytes : 0;
      ex.SendFrame(ping ? to : from, header, ping ? data : nullptr);
    };
    auto check = [&](int frame, int peer, bool ping) {
      const Header& h = ex.header(frame);
      STARLING_CHECK(agreement.Check(h) && h.aux == (ping ? 0u : 1u) && h.payload_bytes == (ping ? bytes : 0),
                     Code::kMismatch, "rank ", peer, " sent ", DescribeSignature(h.sig), " but this rank called ",
                     DescribeSignature(sig));
    };
    const auto start = Clock::now();
    send(true);
    const int ping = ex.RecvFrame(from);
    // From the same peer, the answer's receive follows its ping's (a frame's payload is
    // received after its header: receives from one peer are posted in the order sent).
    int answer = to == from ? -1 : ex.RecvFrame(to);
    bool answered = false;
    double seconds = -1;
    while (!answered || seconds < 0) {
      ex.WaitForFrame();
      if (!answered && ex.frame_done(ping)) {
        check(ping, from, true);
        send(false);
        answered = true;
        if (answer < 0) answer = ex.RecvFrame(to);
      }
      if (seconds < 0 && answer >= 0 && ex.frame_done(answer)) {
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
        check(answer, to, false);
      }
    }
    ex.Wait();  // our answer has left
    return seconds;
  }

  int repetitions_;
  size_t bulk_;
  double* latency_;
  double* throughput_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakeProbePeers(const runtime::Context&, int repetitions, uint64_t bulk_bytes,
                                            double* latency, double* throughput) {
  constexpr int kMaxRepetitions = 1000;
  constexpr uint64_t kMaxBulk = uint64_t{1} << 30;
  STARLING_CHECK_ARG(repetitions >= 1 && repetitions <= kMaxRepetitions, "repetitions is ", repetitions,
                     "; give 1 to ", kMaxRepetitions, " (0 in the C args: the default, 5)");
  STARLING_CHECK_ARG(bulk_bytes >= 1 && bulk_bytes <= kMaxBulk, "bulk_bytes is ", bulk_bytes, "; give 1 to ",
                     kMaxBulk, " (1 GiB; 0 in the C args: the default, 1 MiB)");
  return std::make_unique<ProbePeersOp>(repetitions, static_cast<size_t>(bulk_bytes), latency, throughput);
}

}  // namespace starling::ops
