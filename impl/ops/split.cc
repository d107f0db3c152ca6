// starling_context_split's collective half, on the parent context's engine: ordered
// with the parent's other operations, and agreed first (the dissemination every
// classic collective starts with), so a rank making another call meanwhile gets
// MISMATCH instead of a hang inside MPI_Comm_split. The same agreement opens a grow or
// a shrink.
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

class ContextSplitOp : public runtime::Op {
 public:
  ContextSplitOp(int color, int key, MPI_Comm* out) : color_(color), key_(key), out_(out) {}

  std::string Describe() const override { return Str("context_split (color ", color_, ", key ", key_, ")"); }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = OpKind::kContextSplit;
    sig.seq = NextSequence(context, sig.kind);
    Agree(context, WorldGroup(context), sig, Label());
    *out_ = context.SplitCommunicator(color_, key_);
  }

 private:
  int color_, key_;
  MPI_Comm* out_;
};

class ResizeAgreementOp : public runtime::Op {
 public:
  ResizeAgreementOp(OpKind kind, int count) : kind_(kind), count_(count) {}

  std::string Describe() const override { return Str(OpKindName(kind_), " (count ", count_, ")"); }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = kind_;
    sig.seq = NextSequence(context, sig.kind);
    sig.count = count_;
    Agree(context, WorldGroup(context), sig, Label());
  }

 private:
  OpKind kind_;
  int count_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakeResizeAgreement(OpKind kind, int count) {
  return std::make_unique<ResizeAgreementOp>(kind, count);
}

std::unique_ptr<runtime::Op> MakeContextSplit(const runtime::Context&, int color, int key, MPI_Comm* out) {
  STARLING_CHECK_ARG(color >= -1, "color must be >= 0, or STARLING_SPLIT_UNDEFINED (-1), got ", color);
  return std::make_unique<ContextSplitOp>(color, key, out);
}

}  // namespace starling::ops
