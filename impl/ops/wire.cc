#include "impl/ops/wire.h"

#include "impl/common/error.h"

namespace starling::ops {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kNone: return "none";
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kAllgatherDims: return "allgather_first_dims";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kNeighborAllreduce: return "neighbor_allreduce";
    case OpKind::kNeighborAllgather: return "neighbor_allgather";
    case OpKind::kHierarchicalNeighborAllreduce: return "hierarchical_neighbor_allreduce";
    case OpKind::kPairGossip: return "pair_gossip";
    case OpKind::kSetTopology: return "set_topology";
    case OpKind::kWindowCreate: return "window_create";
    case OpKind::kWindowFree: return "window_free";
    case OpKind::kLocalAllreduce: return "local_allreduce";
  }
  return "unknown";
}

bool Signature::operator==(const Signature& o) const {
  return seq == o.seq && count == o.count && root == o.root && chunk == o.chunk && kind == o.kind &&
         dtype == o.dtype && reduce == o.reduce && extra == o.extra;
}

std::string DescribeSignature(const Signature& sig) {
  if (sig.kind == OpKind::kSetTopology)
    return Str(sig.extra ? "set_machine_topology" : "set_topology", " #", sig.seq, " (graph fingerprint ", std::hex,
               sig.count, std::dec, ")");
  std::string s = Str(OpKindName(sig.kind), " #", sig.seq, " (");
  if (sig.kind == OpKind::kAllreduce || sig.kind == OpKind::kLocalAllreduce)
    s += Str(ReduceOpName(static_cast<ReduceOp>(sig.reduce)), ", ");
  if (sig.kind != OpKind::kBarrier && sig.dtype < kNumDTypes) s += Str(DTypeName(static_cast<DType>(sig.dtype)), ", ");
  if (sig.kind == OpKind::kAllgather || sig.kind == OpKind::kAllgatherDims || sig.kind == OpKind::kNeighborAllgather)
    s += Str(sig.count, " bytes per row");
  else if (sig.kind != OpKind::kBarrier)
    s += Str(sig.count, " elements");
  if (sig.kind == OpKind::kBroadcast) s += Str(", root ", sig.root);
  s += Str(", chunk ", sig.chunk, ")");
  return s;
}

void Agreement::Stamp(Header* header) const {
  header->magic = kHeaderMagic;
  header->sender = rank_;
  header->sig = mine_;
  if (poisoned_) {
    header->flags |= kFlagPoisoned;
    header->culprit_a = culprit_a_;
    header->culprit_b = culprit_b_;
    header->culprit_sig_a = sig_a_;
    header->culprit_sig_b = sig_b_;
  }
}

bool Agreement::Check(const Header& header) {
  if (header.flags & kFlagPoisoned) {
    if (!poisoned_) {
      poisoned_ = true;
      culprit_a_ = header.culprit_a;
      culprit_b_ = header.culprit_b;
      sig_a_ = header.culprit_sig_a;
      sig_b_ = header.culprit_sig_b;
    }
    return false;
  }
  if (header.sig != mine_) {
    if (!poisoned_) {
      poisoned_ = true;
      culprit_a_ = header.sender;
      sig_a_ = header.sig;
      culprit_b_ = rank_;
      sig_b_ = mine_;
    }
    return false;
  }
  return !poisoned_;
}

void Agreement::ThrowIfPoisoned() const {
  if (!poisoned_) return;
  Fail(Code::kMismatch, "ranks disagree: rank ", culprit_a_, " called ", DescribeSignature(sig_a_), " while rank ",
       culprit_b_, " called ", DescribeSignature(sig_b_),
       "; every rank must make the same collective calls, in the same order, with matching tensors");
}

}  // namespace starling::ops
