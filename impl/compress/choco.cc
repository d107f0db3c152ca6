// CHOCO-gossip (Koloskova, Stich, Jaggi 2019): neighbor averaging that sends only
// compressed differences yet reaches exact consensus. Every rank keeps public copies
// x_hat of itself and of each in-neighbor; all holders of a copy apply the same decoded
// updates, so the copies agree bit for bit across ranks. Per call:
//   q_i = C(x_i - x_hat_i)            sent to the out-neighbors
//   x_hat_j += decode(q_j)            for self and every in-neighbor j
//   x_i' = x_i + gamma * sum_j w_ij (x_hat_j - x_hat_i)
// The copies need every step's q from every in-neighbor, so the neighbor set is fixed
// (static mode) and stored with the state.
#include <vector>

#include "impl/compress/ops.h"
#include "impl/compress/state.h"
#include "impl/compress/tensor_io.h"
#include "impl/ops/collectives.h"
#include "impl/ops/neighbor.h"
#include "impl/ops/neighbor_exchange.h"
#include "impl/ops/sequence.h"

namespace starling::compress {
namespace {

std::string DescribeChoco(const ops::SegmentInfo& info) {
  std::string s = Str(ops::OpKindName(info.kind), " #", info.seq, " (");
  if (info.dtype < kNumDTypes) s += Str(DTypeName(static_cast<DType>(info.dtype)), ", ");
  s += Str(info.count, " elements");
  if (info.kind == ops::OpKind::kChocoNeighborAllreduce) {
    const Kind kind = static_cast<Kind>(info.reserved[0]);
    s += Str(", ", KindName(kind));
    if (kind == Kind::kTopK || kind == Kind::kRandomK) s += Str(" k=", info.first_dim);
    s += Str(", fingerprint 0x", std::hex, info.shape_hash, std::dec);
  }
  return s + ")";
}

class ChocoOp : public runtime::Op {
 public:
  ChocoOp(const TensorView& in, const TensorView& out, std::shared_ptr<const ops::NeighborPlan> plan,
          std::string name, const Spec& spec, std::shared_ptr<TensorState> state)
      : in_(in), out_(out), plan_(std::move(plan)), name_(std::move(name)), spec_(spec),
        codec_(spec, in.dtype, in.numel), state_(std::move(state)) {}

  std::string Describe() const override {
    return ops::DescribeOp("neighbor_allreduce", name_,
                           Str(in_.Describe(), ", CHOCO ", codec_.Describe(), ", gamma ", spec_.gamma));
  }

  void Run(runtime::Context& context) override {
    const size_t n = in_.numel;
    const ops::NeighborPlan& plan = *plan_;
    TensorState& st = *state_;
    const size_t sources = plan.recv_ranks.size();
    if (st.self_copy.size() != n) {
      st.self_copy.assign(n, 0.0);
      st.copies.assign(sources, std::vector<double>(n, 0.0));
    }
    const uint64_t stream = StreamId(spec_.seed, name_, st.step);

    runtime::ScratchPool::Buffer x_buffer = context.scratch().Get(n * sizeof(double));
    runtime::ScratchPool::Buffer diff_buffer = context.scratch().Get(n * sizeof(double));
    double* x = reinterpret_cast<double*>(x_buffer.data());
    double* diff = reinterpret_cast<double*>(diff_buffer.data());
    LoadDoubles(in_, x);
    for (size_t i = 0; i < n; ++i) diff[i] = x[i] - st.self_copy[i];
    runtime::ScratchPool::Buffer code = context.scratch().Get(codec_.bytes());
    codec_.Encode(diff, stream, code.data());

    ops::SegmentInfo info;
    info.kind = ops::OpKind::kChocoNeighborAllreduce;
    info.seq = ops::NextSequence(context, info.kind);
    info.dtype = static_cast<uint8_t>(in_.dtype);
    info.count = static_cast<int64_t>(n);
    info.bytes = codec_.bytes();
    info.first_dim = static_cast<int64_t>(codec_.k());
    info.shape_hash = codec_.Fingerprint(stream);
    info.reserved[0] = static_cast<uint8_t>(codec_.kind());
    const auto received = ops::NeighborExchange(context, plan.send_ranks, plan.send_weights,
                                                {ops::Outgoing{info, code.data()}}, plan.recv_ranks, {info.seq},
                                                Label());
    runtime::Stats& stats = context.stats();
    stats.bytes_before_compression.fetch_add(plan.send_ranks.size() * in_.bytes, std::memory_order_relaxed);
    stats.bytes_after_compression.fetch_add(plan.send_ranks.size() * codec_.bytes(), std::memory_order_relaxed);

    // Check every source before touching any copy: a failed call leaves the state as it was.
    for (size_t s = 0; s < sources; ++s) {
      const ops::SegmentInfo& got = received[s][0].info;
      const bool same = got.kind == info.kind && got.dtype == info.dtype && got.count == info.count &&
                        got.bytes == info.bytes && got.first_dim == info.first_dim &&
                        got.shape_hash == info.shape_hash && got.reserved[0] == info.reserved[0];
      STARLING_CHECK(same, Code::kMismatch, "rank ", plan.recv_ranks[s], " sent ", DescribeChoco(got),
                     " but this rank called ", DescribeChoco(info),
                     "; every rank must compress alike (the CHOCO copies on both ranks are now out of step: "
                     "reset them with starling_compression_reset on every rank)");
    }
    codec_.DecodeAdd(code.data(), stream, st.self_copy.data());
    for (size_t s = 0; s < sources; ++s) codec_.DecodeAdd(received[s][0].data, stream, st.copies[s].data());
    ++st.step;

    // x' = x + gamma * sum_j w_j (x_hat_j - x_hat_self): differences, so that equal
    // copies leave x exactly as it is.
    const double uniform = 1.0 / static_cast<double>(sources + 1);
    const double* self = st.self_copy.data();
    for (size_t s = 0; s < sources; ++s) {
      const double w = spec_.gamma * (plan.uniform ? uniform : plan.recv_weights[s]);
      if (w == 0.0) continue;
      const double* copy = st.copies[s].data();
      for (size_t i = 0; i < n; ++i) x[i] += w * (copy[i] - self[i]);
    }
    StoreDoubles(x, out_);
  }

 private:
  TensorView in_, out_;
  std::shared_ptr<const ops::NeighborPlan> plan_;
  std::string name_;
  Spec spec_;
  Codec codec_;
  std::shared_ptr<TensorState> state_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakeChocoNeighborAllreduce(runtime::Context& context, const TensorView& in,
                                                        const TensorView& out, const ops::NeighborArgs& args,
                                                        const Spec& spec) {
  CheckSpec(spec);
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  STARLING_CHECK(!args.dynamic, Code::kUnsupported, "compressed (CHOCO) neighbor_allreduce needs a fixed neighbor ",
                 "set (its public copies need every step's update from every in-neighbor): use static mode");
  const Codec codec(spec, in.dtype, in.numel);
  STARLING_CHECK_ARG(!args.name.empty(), "compressed (CHOCO) neighbor_allreduce keeps public copies per tensor name: "
                     "pass args->name");
  std::shared_ptr<const ops::NeighborPlan> plan = ops::PlanFor(context, args);
  TensorState identity;
  identity.use = Use::kChoco;
  identity.dtype = in.dtype;
  identity.shape = in.shape;
  identity.kind = spec.kind;
  identity.k = codec.k();
  identity.sources = plan->recv_ranks;
  std::shared_ptr<TensorState> state = context.Extension<StateStore>().Register(args.name, identity);
  return std::make_unique<ChocoOp>(in, out, std::move(plan), args.name, spec, std::move(state));
}

}  // namespace starling::compress
