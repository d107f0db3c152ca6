// allreduce. Small tensors: every rank gathers every contribution by dissemination
// (ceil(log2 p) rounds, the same message pattern every classic collective starts with,
// so a rank calling something else is always noticed) and reduces them locally in rank
// order. Large tensors: an agreement round, then ring reduce-scatter and ring
// allgather, each step streamed in chunks so the reduction of one chunk overlaps the
// arrival of the next. Either way every element is reduced in one fixed order, so all
// ranks get bit-identical results.
#include <cstring>
#include <vector>

#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/reduce.h"

namespace starling::ops {
namespace {

// The gather path moves (p - 1) copies of the tensor to every rank: it wins on latency
// while that stays small; beyond, the ring's 2 (p - 1) / p copies win.
constexpr size_t kGatherMaxBytes = 64 << 10;
constexpr size_t kGatherMaxTotalBytes = 512 << 10;

class AllreduceOp : public runtime::Op {
 public:
  AllreduceOp(const TensorView& in, const TensorView& out, ReduceOp op, std::string name)
      : in_(in), out_(out), op_(op), name_(std::move(name)) {}

  std::string Describe() const override {
    return DescribeOp("allreduce", name_, Str(ReduceOpName(op_), ", ", in_.Describe()));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.seq = context.NextSequence();
    sig.kind = OpKind::kAllreduce;
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.reduce = static_cast<uint8_t>(op_);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.chunk = static_cast<uint32_t>(context.config().chunk_bytes);
    const int p = context.size();
    if (p == 1) {
      if (out_.data != in_.data && in_.bytes > 0) std::memcpy(out_.data, in_.data, in_.bytes);
      return;
    }
    if (in_.bytes <= kGatherMaxBytes && in_.bytes * static_cast<size_t>(p - 1) <= kGatherMaxTotalBytes) {
      GatherAndReduce(context, sig);
    } else {
      Agree(context, sig, Describe());
      Ring(context);
    }
  }

 private:
  char* out() const { return static_cast<char*>(out_.data); }

  void Finish(char* data, size_t numel, int p) const {
    if (op_ == ReduceOp::kAverage && numel > 0) Divide(data, numel, out_.dtype, static_cast<double>(p));
  }

  // Dissemination gather: before round k rank r knows the contributions of ranks r,
  // r - 1, ..., r - 2^k + 1; it sends the ones its target r + 2^k lacks and receives
  // those of r - 2^k, ... Then out = x_0 (op) x_1 (op) ... (op) x_{p-1}, on every rank.
  void GatherAndReduce(runtime::Context& context, const Signature& sig) {
    const int p = context.size();
    const int r = context.rank();
    Agreement agreement(r, sig);
    Exchange ex(context, transport::Channel::kCollective, Describe());
    // Our own contribution must survive `out` being overwritten: copy it when in place.
    runtime::ScratchPool::Buffer own;
    const char* mine = static_cast<const char*>(in_.data);
    if (in_.data == out_.data) {
      own = context.scratch().Get(in_.bytes);
      std::memcpy(own.data(), in_.data, in_.bytes);
      mine = own.data();
    }
    std::vector<const char*> known{mine};
    for (int k = 0, d = 1; k < DisseminationRounds(p); ++k, d <<= 1) {
      const size_t count = std::min<size_t>(std::min(d, p - d), known.size());
      runtime::ScratchPool::Buffer packed = context.scratch().Get(count * out_.bytes);
      for (size_t i = 0; i < count; ++i) std::memcpy(packed.data() + i * out_.bytes, known[i], out_.bytes);
      Header header;
      agreement.Stamp(&header);
      header.payload_bytes = count * out_.bytes;
      ex.SendFrame((r + d) % p, header, packed.data());
      const int frame = ex.RecvFrame((r - d + p) % p);
      ex.Wait();  // frames stay alive until the end: their payloads are in `known`
      const Header& h = ex.header(frame);
      const size_t incoming = static_cast<size_t>(std::min(d, p - d));
      if (agreement.Check(h) && h.payload_bytes == incoming * out_.bytes) {
        for (size_t i = 0; i < incoming; ++i) known.push_back(ex.payload(frame) + i * out_.bytes);
      }
    }
    agreement.ThrowIfPoisoned();
    STARLING_CHECK(static_cast<int>(known.size()) == p, Code::kInternal, "gathered ", known.size(), " of ", p,
                   " contributions");
    // known[i] is rank (r - i)'s contribution.
    auto of = [&](int q) { return known[static_cast<size_t>((r - q + p) % p)]; };
    Reduce3(out_.data, of(0), of(1), out_.numel, out_.dtype, op_);
    for (int q = 2; q < p; ++q) Reduce(out_.data, of(q), out_.numel, out_.dtype, op_);
    Finish(out(), out_.numel, p);
  }

  // Ring reduce-scatter then ring allgather over p blocks of nearly equal size. The
  // reduce-scatter reads `in` and writes `out` (out_block = in_block op incoming), so
  // out-of-place calls need no initial copy: every block of `out` is written by one of
  // the two phases.
  void Ring(runtime::Context& context) {
    const int p = context.size();
    const int r = context.rank();
    const size_t elem = DTypeSize(out_.dtype);
    const size_t base = out_.numel / p;
    const size_t extra = out_.numel % p;
    auto block_begin = [&](int b) { return static_cast<size_t>(b) * base + std::min<size_t>(b, extra); };
    auto block_count = [&](int b) { return base + (static_cast<size_t>(b) < extra ? 1 : 0); };
    const int right = (r + 1) % p;
    const int left = (r - 1 + p) % p;
    Exchange ex(context, transport::Channel::kCollective, Describe());

    const char* in = static_cast<const char*>(in_.data);
    for (int s = 0; s < p - 1; ++s) {
      const int send_block = (r - s + p) % p;
      const int recv_block = (r - s - 1 + 2 * p) % p;
      // Step 0 sends our own contribution; later steps forward the block reduced last.
      const char* send_base = s == 0 ? in : out();
      ex.SendRaw(right, send_base + block_begin(send_block) * elem, block_count(send_block) * elem);
      char* target = out() + block_begin(recv_block) * elem;
      const char* mine = in + block_begin(recv_block) * elem;
      ex.RecvStream(left, block_count(recv_block) * elem,
                    [&, target, mine](const char* data, size_t offset, size_t length) {
                      Reduce3(target + offset, mine + offset, data, length / elem, out_.dtype, op_);
                    });
      ex.Wait();
      ex.Clear();
    }
    // This rank now holds the reduced block r + 1; finish it before sharing it.
    const int own = (r + 1) % p;
    Finish(out() + block_begin(own) * elem, block_count(own), p);
    for (int s = 0; s < p - 1; ++s) {
      const int send_block = (r + 1 - s + p) % p;
      const int recv_block = (r - s + p) % p;
      ex.SendRaw(right, out() + block_begin(send_block) * elem, block_count(send_block) * elem);
      ex.RecvRaw(left, out() + block_begin(recv_block) * elem, block_count(recv_block) * elem);
      ex.Wait();
      ex.Clear();
    }
  }

  TensorView in_, out_;
  ReduceOp op_;
  std::string name_;
};

}  // namespace

std::string DescribeOp(const char* kind, const std::string& name, const std::string& details) {
  return name.empty() ? Str(kind, " (", details, ")") : Str(kind, " '", name, "' (", details, ")");
}

std::unique_ptr<runtime::Op> MakeAllreduce(const runtime::Context& context, const TensorView& in,
                                           const TensorView& out, ReduceOp op, std::string name) {
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  STARLING_CHECK_ARG(op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kMin ||
                         op == ReduceOp::kMax,
                     "reduce op ", static_cast<int>(op), " is not STARLING_SUM, _AVERAGE, _MIN or _MAX");
  STARLING_CHECK(op != ReduceOp::kAverage || IsFloating(in.dtype), Code::kUnsupported,
                 "STARLING_AVERAGE needs a floating-point tensor, got ", DTypeName(in.dtype),
                 "; use STARLING_SUM and divide");
  return std::make_unique<AllreduceOp>(in, out, op, std::move(name));
}

}  // namespace starling::ops
