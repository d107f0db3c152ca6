// Compressed allreduce. Each rank compresses its tensor (plus its error-feedback
// residual), the compressed tensors (all of one size, known from the signature) are
// gathered by dissemination, and every rank decodes them in rank order into a float64
// sum: the same bytes in the same order give bit-identical results everywhere. A
// gather, not a ring: sparse and sign codes cannot be summed without decoding, and
// re-encoding partial sums would compound the compression error.
#include <algorithm>
#include <cstring>
#include <vector>

#include "impl/compress/ops.h"
#include "impl/compress/state.h"
#include "impl/compress/tensor_io.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/sequence.h"

namespace starling::compress {
namespace {

class CompressedAllreduceOp : public runtime::Op {
 public:
  CompressedAllreduceOp(const TensorView& in, const TensorView& out, ReduceOp op, std::string name, const Spec& spec,
                        std::shared_ptr<TensorState> state)
      : in_(in), out_(out), op_(op), name_(std::move(name)), spec_(spec), codec_(spec, in.dtype, in.numel),
        state_(std::move(state)) {}

  std::string Describe() const override {
    return ops::DescribeOp("allreduce", name_,
                           Str(ReduceOpName(op_), ", ", in_.Describe(), ", ", codec_.Describe(),
                               spec_.error_feedback ? " + error feedback" : ""));
  }

  void Run(runtime::Context& context) override {
    const size_t n = in_.numel;
    const uint64_t step = state_ ? state_->step : 0;
    const uint64_t stream = StreamId(spec_.seed, name_, step);
    ops::Signature sig;
    sig.kind = ops::OpKind::kCompressedAllreduce;
    sig.seq = ops::NextSequence(context, sig.kind);
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.reduce = static_cast<uint8_t>(op_);
    sig.count = static_cast<int64_t>(n);
    sig.extra = static_cast<uint8_t>(codec_.kind());
    sig.root = static_cast<int32_t>(codec_.Fingerprint(stream));
    sig.chunk = static_cast<uint32_t>(codec_.bytes());

    // value = in (+ residual); the residual becomes what this call's code drops. The
    // float64 work buffers come from the context's scratch pool (reused, not zeroed).
    runtime::ScratchPool::Buffer value_buffer = context.scratch().Get(n * sizeof(double));
    double* value = reinterpret_cast<double*>(value_buffer.data());
    LoadDoubles(in_, value);
    std::vector<double>* residual = nullptr;
    if (spec_.error_feedback) {
      residual = &state_->residual;
      if (residual->size() != n) residual->assign(n, 0.0);
      for (size_t i = 0; i < n; ++i) value[i] += (*residual)[i];
    }
    runtime::ScratchPool::Buffer code = context.scratch().Get(codec_.bytes());
    codec_.Encode(value, stream, code.data());

    const ops::Group group = ops::WorldGroup(context);
    runtime::ScratchPool::Buffer sum_buffer = context.scratch().Get(n * sizeof(double));
    double* sum = reinterpret_cast<double*>(sum_buffer.data());
    std::fill(sum, sum + n, 0.0);
    if (group.size() == 1) {
      codec_.DecodeAdd(code.data(), stream, sum);
    } else {
      ops::Exchange ex(context, transport::Channel::kCollective, Label());
      const std::vector<const char*> all =
          ops::DisseminationGather(context, group, sig, code.data(), codec_.bytes(), ex);
      for (const char* contribution : all) codec_.DecodeAdd(contribution, stream, sum);
      runtime::Stats& stats = context.stats();
      const uint64_t sends = static_cast<uint64_t>(group.size() - 1);
      stats.bytes_before_compression.fetch_add(sends * in_.bytes, std::memory_order_relaxed);
      stats.bytes_after_compression.fetch_add(sends * codec_.bytes(), std::memory_order_relaxed);
    }
    if (residual) {
      // residual = value - decode(own code), kept only once the call succeeded (O(k)
      // for the sparse codes after the copy).
      std::copy(value, value + n, residual->begin());
      codec_.DecodeAdd(code.data(), stream, residual->data(), -1.0);
    }
    if (state_) ++state_->step;
    if (op_ == ReduceOp::kAverage)
      for (size_t i = 0; i < n; ++i) sum[i] /= static_cast<double>(group.size());
    StoreDoubles(sum, out_);
  }

 private:
  TensorView in_, out_;
  ReduceOp op_;
  std::string name_;
  Spec spec_;
  Codec codec_;
  std::shared_ptr<TensorState> state_;
};

}  // namespace

void CheckSpec(const Spec& spec) {
  const int kind = static_cast<int>(spec.kind);
  STARLING_CHECK_ARG(kind >= 0 && kind <= static_cast<int>(Kind::kSign), "compression->compressor is ", kind,
                     ", not one of STARLING_COMPRESS_NONE ... STARLING_COMPRESS_SIGN");
  if (spec.kind == Kind::kTopK || spec.kind == Kind::kRandomK) {
    STARLING_CHECK_ARG(spec.k >= 0, KindName(spec.kind), ": k must be >= 1 (or 0 to use ratio), got ", spec.k);
    STARLING_CHECK_ARG(spec.k != 0 || (spec.ratio > 0.0 && spec.ratio <= 1.0), KindName(spec.kind),
                       ": with k = 0 the ratio must be in (0, 1], got ", spec.ratio);
    STARLING_CHECK_ARG(spec.k == 0 || spec.ratio == 0.0, KindName(spec.kind), ": give k or ratio, not both (k = ",
                       spec.k, ", ratio = ", spec.ratio, ")");
  }
  STARLING_CHECK_ARG(spec.gamma > 0.0 && spec.gamma <= 1.0, "compression->gamma must be in (0, 1], got ",
                     spec.gamma);
}

std::unique_ptr<runtime::Op> MakeCompressedAllreduce(runtime::Context& context, const TensorView& in,
                                                     const TensorView& out, ReduceOp op, std::string name,
                                                     const Spec& spec) {
  CheckSpec(spec);
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  STARLING_CHECK(op == ReduceOp::kSum || op == ReduceOp::kAverage, Code::kUnsupported, "compressed allreduce ",
                 "supports STARLING_SUM and STARLING_AVERAGE, not ", ReduceOpName(op));
  const Codec codec(spec, in.dtype, in.numel);  // checks dtype and k
  std::shared_ptr<TensorState> state;
  if (spec.error_feedback || spec.kind == Kind::kRandomK) {
    STARLING_CHECK_ARG(!name.empty(), spec.error_feedback ? "error feedback" : "random-k",
                       " keeps state per tensor name: pass a name");
    TensorState identity;
    identity.use = Use::kAllreduce;
    identity.dtype = in.dtype;
    identity.shape = in.shape;
    identity.kind = spec.kind;
    identity.k = codec.k();
    state = context.Extension<StateStore>().Register(name, identity);
  }
  return std::make_unique<CompressedAllreduceOp>(in, out, op, std::move(name), spec, std::move(state));
}

namespace {
class ResetOp : public runtime::Op {
 public:
  ResetOp(std::string name, bool all) : name_(std::move(name)), all_(all) {}
  std::string Describe() const override {
    return all_ ? std::string("compression_reset (all)") : ops::DescribeOp("compression_reset", name_, "");
  }
  void Run(runtime::Context& context) override { context.Extension<StateStore>().Reset(name_, all_); }

 private:
  std::string name_;
  bool all_;
};
}  // namespace

std::unique_ptr<runtime::Op> MakeCompressionReset(std::string name, bool all) {
  return std::make_unique<ResetOp>(std::move(name), all);
}

}  // namespace starling::compress
