// barrier: a header-only dissemination round (ceil(log2 p) message rounds).
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

class BarrierOp : public runtime::Op {
 public:
  std::string Describe() const override { return "barrier"; }
  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = OpKind::kBarrier;
    sig.seq = NextSequence(context, sig.kind);
    if (context.size() > 1) Agree(context, WorldGroup(context), sig, Label());
  }
};

}  // namespace

std::unique_ptr<runtime::Op> MakeBarrier(const runtime::Context&) { return std::make_unique<BarrierOp>(); }

}  // namespace starling::ops
