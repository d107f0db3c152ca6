// pair_gossip: two ranks exchange tensors on their own channel (only the pair calls
// it, so it takes no part in the context's collective sequence) and each computes
// out = self_weight * in + pair_weight * peer's in. Between ranks of one host the
// tensors go through shared memory (shm_data.h).
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/neighbor.h"
#include "impl/ops/reduce.h"
#include "impl/ops/shm_data.h"

#include <cmath>

namespace starling::ops {
namespace {

// A frame's aux when the data is in the sender's outbox: this bit, and the publication.
constexpr uint64_t kInOutbox = uint64_t{1} << 32;

class PairGossipOp : public runtime::Op {
 public:
  PairGossipOp(const TensorView& in, const TensorView& out, int peer, double self_weight, double pair_weight,
               std::string name)
      : in_(in), out_(out), peer_(peer), self_weight_(self_weight), pair_weight_(pair_weight), name_(std::move(name)) {}

  std::string Describe() const override {
    return DescribeOp("pair_gossip", name_, Str(in_.Describe(), ", peer ", peer_));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = OpKind::kPairGossip;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.count = static_cast<int64_t>(in_.numel);
    const LazyText what = Label();
    Agreement agreement(context.rank(), sig);
    // On one host the data goes through this rank's outbox, as neighbor data does
    // (shm_data.h); the frame then says where (aux) and carries no payload.
    const std::shared_ptr<transport::shm::NeighborLinks> links = context.shm_links();
    Outgoing outgoing;
    outgoing.info.bytes = in_.bytes;
    outgoing.data = in_.data;
    Published published;
    // Sequence 0 in its waits: pair gossip is not one of the numbered collectives.
    const bool shared = PublishShared(context, links.get(), {peer_}, {outgoing}, what, 0, &published);
    transport::Traffic* traffic = context.transport().traffic();
    if (shared && traffic) traffic->SentShared(peer_, in_.bytes);
    Exchange ex(context, transport::Channel::kPeer, what);
    Header header;
    agreement.Stamp(&header);
    header.payload_bytes = shared ? 0 : in_.bytes;
    header.aux = shared ? (kInOutbox | published.number) : 0;
    ex.SendFrame(peer_, header, in_.data);
    const int frame = ex.RecvFrame(peer_);
    ex.Wait();
    const Header& h = ex.header(frame);
    const bool in_outbox = h.aux != 0;
    std::unique_ptr<Lease> lease;  // the peer's publication, released when done (or refused)
    if (in_outbox) {
      const bool linked = links && links->linked(peer_);
      STARLING_CHECK((h.aux >> 32) == (kInOutbox >> 32) && h.payload_bytes == 0 && linked, Code::kTransport, what(),
                     ": rank ", peer_, " announced data in shared memory that this rank cannot read (",
                     linked ? "a malformed frame" : "the two ranks share no memory", ")");
      lease = std::make_unique<Lease>(links, peer_, static_cast<uint32_t>(h.aux));
    }
    STARLING_CHECK(agreement.Check(h) && (in_outbox || h.payload_bytes == in_.bytes), Code::kMismatch, "rank ", peer_,
                   " sent ", DescribeSignature(h.sig), " but this rank called ", DescribeSignature(sig));
    const void* peer_data = ex.payload(frame);
    if (in_outbox) {
      peer_data = ReadShared(context, *links, peer_, static_cast<uint32_t>(h.aux), 0, in_.bytes, what, 0);
      if (traffic) traffic->ReceivedShared(peer_, in_.bytes);
    }
    WeightedSum(out_.data, in_.data, self_weight_, &peer_data, &pair_weight_, 1, out_.numel, out_.dtype);
  }

 private:
  TensorView in_, out_;
  int peer_;
  double self_weight_, pair_weight_;
  std::string name_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakePairGossip(const runtime::Context& context, const TensorView& in,
                                            const TensorView& out, int peer, double self_weight,
                                            double pair_weight, std::string name) {
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  STARLING_CHECK_ARG(peer >= 0 && peer < context.size(), "pair_gossip peer ", peer, " is out of range [0, ",
                     context.size(), ")");
  STARLING_CHECK_ARG(peer != context.rank(), "pair_gossip peer ", peer, " is this rank; name the other rank");
  for (double w : {self_weight, pair_weight})
    STARLING_CHECK_ARG(std::isfinite(w) && w >= 0, "pair_gossip weight ", w, " must be finite and >= 0");
  return std::make_unique<PairGossipOp>(in, out, peer, self_weight, pair_weight, std::move(name));
}

}  // namespace starling::ops
