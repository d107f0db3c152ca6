// allreduce over a group (the context, or one machine). Small tensors: every member
// gathers every contribution by dissemination (ceil(log2 n) rounds; the pattern every
// classic collective starts with) and reduces them locally in member order. Large
// tensors: an agreement round, then ring reduce-scatter and ring allgather, each step
// streamed in chunks so the reduction of one chunk overlaps the arrival of the next.
// Across machines of several ranks each, large tensors go in two levels: reduce-scatter
// inside each machine, allreduce of each block across machines (one rank per machine
// and block), allgather inside each machine; each machine's link then carries
// 2 (M - 1) / M of the tensor each way instead of 2 (n - 1) / n, in fewer steps.
// Either way every element is reduced in one fixed order, so all members get
// bit-identical results.
#include <cstring>
#include <vector>

#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/reduce.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

// The gather path moves (n - 1) copies of the tensor to every member: it wins on
// latency while that stays small; beyond, the ring's 2 (n - 1) / n copies win.
constexpr size_t kAllreduceGatherMaxBytes = 64 << 10;
constexpr size_t kAllreduceGatherMaxTotalBytes = 512 << 10;

void Finish(const TensorView& out, char* data, size_t numel, ReduceOp op, int n) {
  if (op == ReduceOp::kAverage && numel > 0) Divide(data, numel, out.dtype, static_cast<double>(n));
}

void GatherAndReduce(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                     ReduceOp op, const Signature& sig, const LazyText& what) {
  Exchange ex(context, transport::Channel::kCollective, what);
  // known[i] must survive `out` being overwritten: gather from a copy when in place.
  runtime::ScratchPool::Buffer own;
  const void* mine = in.data;
  if (in.data == out.data && in.bytes > 0) {
    own = context.scratch().Get(in.bytes);
    std::memcpy(own.data(), in.data, in.bytes);
    mine = own.data();
  }
  const std::vector<const char*> all = DisseminationGather(context, group, sig, mine, in.bytes, ex);
  Reduce3(out.data, all[0], all[1], out.numel, out.dtype, op);
  for (int i = 2; i < group.size(); ++i) Reduce(out.data, all[static_cast<size_t>(i)], out.numel, out.dtype, op);
  Finish(out, static_cast<char*>(out.data), out.numel, op, group.size());
}

// The n blocks of nearly equal size a ring over n members cuts a tensor into.
struct Blocks {
  size_t base, extra, elem;
  Blocks(const TensorView& t, int n)
      : base(t.numel / static_cast<size_t>(n)), extra(t.numel % static_cast<size_t>(n)), elem(DTypeSize(t.dtype)) {}
  size_t begin(int b) const { return (static_cast<size_t>(b) * base + std::min<size_t>(b, extra)) * elem; }
  size_t bytes(int b) const { return (base + (static_cast<size_t>(b) < extra ? 1 : 0)) * elem; }
};

// Ring reduce-scatter: reads `in` and writes `out` (out_block = in_block op incoming),
// so out-of-place calls need no initial copy. Leaves block (index + 1) % n of `out`
// reduced over the group, not yet divided for kAverage.
void RingReduceScatter(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                       ReduceOp op, const LazyText& what) {
  const int n = group.size();
  const int me = group.index;
  const Blocks blocks(out, n);
  const int right = group.peer(1);
  const int left = group.peer(-1);
  const char* src = static_cast<const char*>(in.data);
  char* dst = static_cast<char*>(out.data);
  Exchange ex(context, transport::Channel::kCollective, what);
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = (me - s + n) % n;
    const int recv_block = (me - s - 1 + 2 * n) % n;
    // Step 0 sends our own contribution; later steps forward the block reduced last.
    ex.SendRaw(right, (s == 0 ? src : dst) + blocks.begin(send_block), blocks.bytes(send_block));
    char* target = dst + blocks.begin(recv_block);
    const char* mine = src + blocks.begin(recv_block);
    const size_t elem = blocks.elem;
    ex.RecvStream(left, blocks.bytes(recv_block), [&, target, mine, elem](const char* data, size_t offset,
                                                                          size_t length) {
      Reduce3(target + offset, mine + offset, data, length / elem, out.dtype, op);
    });
    ex.Wait();
    ex.Clear();
  }
}

// Ring allgather: every member shares block (index + 1) % n of `out`, the one
// RingReduceScatter left it.
void RingAllgather(runtime::Context& context, const Group& group, const TensorView& out, const LazyText& what) {
  const int n = group.size();
  const int me = group.index;
  const Blocks blocks(out, n);
  const int right = group.peer(1);
  const int left = group.peer(-1);
  char* dst = static_cast<char*>(out.data);
  Exchange ex(context, transport::Channel::kCollective, what);
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = (me + 1 - s + n) % n;
    const int recv_block = (me - s + n) % n;
    ex.SendRaw(right, dst + blocks.begin(send_block), blocks.bytes(send_block),
               WholeMessageChunk(blocks.bytes(send_block)));
    ex.RecvRaw(left, dst + blocks.begin(recv_block), blocks.bytes(recv_block), nullptr,
               WholeMessageChunk(blocks.bytes(recv_block)));
    ex.Wait();
    ex.Clear();
  }
}

// The block RingReduceScatter leaves this member, as a tensor of its own.
TensorView OwnBlock(const TensorView& t, const Group& group) {
  const Blocks blocks(t, group.size());
  const int own = (group.index + 1) % group.size();
  TensorView block;
  block.data = static_cast<char*>(t.data) + blocks.begin(own);
  block.device = t.device;
  block.dtype = t.dtype;
  block.bytes = blocks.bytes(own);
  block.numel = block.bytes / blocks.elem;
  block.shape = {static_cast<int64_t>(block.numel)};
  return block;
}

// Ring reduce-scatter then ring allgather; `divisor` divides the reduced blocks for
// kAverage (the group's size, or the whole context's for the second level).
void Ring(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out, ReduceOp op,
          int divisor, const LazyText& what) {
  RingReduceScatter(context, group, in, out, op, what);
  const TensorView own = OwnBlock(out, group);
  Finish(out, static_cast<char*>(own.data), own.numel, op, divisor);  // before sharing it
  RingAllgather(context, group, out, what);
}

// Two levels (see the top of this file): machines of `local` consecutive ranks each.
void TwoLevelRing(runtime::Context& context, const Group& world, const TensorView& in, const TensorView& out,
                  ReduceOp op, int local, const LazyText& what) {
  const int machines = world.size() / local;
  Group machine, across;
  for (int i = 0; i < local; ++i) machine.ranks.push_back(world.index / local * local + i);
  machine.index = world.index % local;
  for (int m = 0; m < machines; ++m) across.ranks.push_back(m * local + machine.index);
  across.index = world.index / local;
  RingReduceScatter(context, machine, in, out, op, what);
  const TensorView block = OwnBlock(out, machine);
  Ring(context, across, block, block, op, world.size(), what);  // in place
  RingAllgather(context, machine, out, what);
}

class AllreduceOp : public runtime::Op {
 public:
  AllreduceOp(const TensorView& in, const TensorView& out, ReduceOp op, bool local, std::string name)
      : in_(in), out_(out), op_(op), local_(local), name_(std::move(name)) {}

  std::string Describe() const override {
    return DescribeOp(local_ ? "local_allreduce" : "allreduce", name_, Str(ReduceOpName(op_), ", ", in_.Describe()));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = local_ ? OpKind::kLocalAllreduce : OpKind::kAllreduce;
    sig.seq = NextSequence(context, sig.kind);
    RunAllreduce(context, local_ ? MachineGroup(context) : WorldGroup(context), in_, out_, op_, sig, Label());
  }

 private:
  TensorView in_, out_;
  ReduceOp op_;
  bool local_;
  std::string name_;
};

}  // namespace

void RunAllreduce(runtime::Context& context, const Group& group, const TensorView& in, const TensorView& out,
                  ReduceOp op, Signature sig, const LazyText& what) {
  sig.dtype = static_cast<uint8_t>(in.dtype);
  sig.reduce = static_cast<uint8_t>(op);
  sig.count = static_cast<int64_t>(in.numel);
  sig.chunk = static_cast<uint32_t>(context.config().chunk_bytes);
  const int n = group.size();
  if (n == 1) {
    if (out.data != in.data && in.bytes > 0) std::memcpy(out.data, in.data, in.bytes);
    return;
  }
  if (in.bytes <= kAllreduceGatherMaxBytes && in.bytes * static_cast<size_t>(n - 1) <= kAllreduceGatherMaxTotalBytes) {
    GatherAndReduce(context, group, in, out, op, sig, what);
  } else {
    Agree(context, group, sig, what);
    const transport::Layout& layout = context.layout();
    const bool world = n == context.size() && group.index == context.rank();  // not one machine's group
    if (world && layout.homogeneous && layout.local_size >= 2 && layout.machine_size >= 2) {
      TwoLevelRing(context, group, in, out, op, layout.local_size, what);
    } else {
      Ring(context, group, in, out, op, n, what);
    }
  }
}

std::string DescribeOp(const char* kind, const std::string& name, const std::string& details) {
  return name.empty() ? Str(kind, " (", details, ")") : Str(kind, " '", name, "' (", details, ")");
}

void CheckReduceOp(ReduceOp op, DType dtype) {
  STARLING_CHECK_ARG(op == ReduceOp::kSum || op == ReduceOp::kAverage || op == ReduceOp::kMin ||
                         op == ReduceOp::kMax,
                     "reduce op ", static_cast<int>(op), " is not STARLING_SUM, _AVERAGE, _MIN or _MAX");
  STARLING_CHECK(op != ReduceOp::kAverage || IsFloating(dtype), Code::kUnsupported,
                 "STARLING_AVERAGE needs a floating-point tensor, got ", DTypeName(dtype),
                 "; use STARLING_SUM and divide");
}

void CheckReduceArgs(const TensorView& in, const TensorView& out, ReduceOp op) {
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  CheckReduceOp(op, in.dtype);
}

std::unique_ptr<runtime::Op> MakeAllreduce(const runtime::Context&, const TensorView& in, const TensorView& out,
                                           ReduceOp op, std::string name) {
  CheckReduceArgs(in, out, op);
  return std::make_unique<AllreduceOp>(in, out, op, false, std::move(name));
}

std::unique_ptr<runtime::Op> MakeLocalAllreduce(const runtime::Context&, const TensorView& in, const TensorView& out,
                                                ReduceOp op, std::string name) {
  CheckReduceArgs(in, out, op);
  return std::make_unique<AllreduceOp>(in, out, op, true, std::move(name));
}

}  // namespace starling::ops
