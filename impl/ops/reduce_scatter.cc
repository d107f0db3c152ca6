// reduce_scatter: each rank gets its block of the reduction over all ranks. Small
// inputs: every rank gathers every input by dissemination (ceil(log2 n) rounds, which
// also agree on the call) and reduces its own block in rank order. Large inputs: an
// agreement round, then a ring of n - 1 steps in which each block travels once around
// the ring, reduced chunk by chunk as it arrives (the first half of allreduce's ring).
#include <cstring>
#include <numeric>
#include <vector>

#include "impl/common/checked.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/exchange.h"
#include "impl/ops/reduce.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

// As allreduce: the gather moves (n - 1) whole inputs to every rank, cheaper than the
// ring's n - 1 steps while inputs are small.
constexpr size_t kReduceScatterGatherMaxBytes = 64 << 10;
constexpr size_t kReduceScatterGatherMaxTotalBytes = 512 << 10;

class ReduceScatterOp : public runtime::Op {
 public:
  ReduceScatterOp(const TensorView& in, const TensorView& out, std::vector<int64_t> counts, ReduceOp op,
                  std::string name)
      : in_(in), out_(out), counts_(std::move(counts)), op_(op), name_(std::move(name)) {
    offsets_.assign(counts_.size() + 1, 0);
    for (size_t i = 0; i < counts_.size(); ++i) offsets_[i + 1] = offsets_[i] + static_cast<size_t>(counts_[i]);
  }

  std::string Describe() const override {
    return DescribeOp("reduce_scatter", name_,
                      Str(ReduceOpName(op_), ", ", in_.Describe(), " -> ", out_.Describe()));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = OpKind::kReduceScatter;
    sig.seq = NextSequence(context, sig.kind);
    sig.dtype = static_cast<uint8_t>(in_.dtype);
    sig.reduce = static_cast<uint8_t>(op_);
    sig.count = static_cast<int64_t>(in_.numel);
    sig.root = static_cast<int32_t>(HashBlockCounts(counts_));
    sig.chunk = static_cast<uint32_t>(context.config().chunk_bytes);
    const Group group = WorldGroup(context);
    const int n = group.size();
    if (n == 1) {
      if (out_.data != in_.data && in_.bytes > 0) std::memcpy(out_.data, in_.data, in_.bytes);
      return;
    }
    if (in_.bytes <= kReduceScatterGatherMaxBytes && in_.bytes * static_cast<size_t>(n - 1) <= kReduceScatterGatherMaxTotalBytes) {
      GatherAndReduce(context, group, sig);
    } else {
      Agree(context, group, sig, Label());
      Ring(context, group);
    }
    if (op_ == ReduceOp::kAverage && out_.numel > 0) Divide(out_.data, out_.numel, out_.dtype, n);
  }

 private:
  size_t elem() const { return DTypeSize(in_.dtype); }
  const char* block(const void* base, int b) const {
    return static_cast<const char*>(base) + offsets_[static_cast<size_t>(b)] * elem();
  }
  size_t block_bytes(int b) const { return static_cast<size_t>(counts_[static_cast<size_t>(b)]) * elem(); }

  void GatherAndReduce(runtime::Context& context, const Group& group, const Signature& sig) {
    Exchange ex(context, transport::Channel::kCollective, Label());
    // In place, out is this rank's block of in: gather from a copy, which the reduction
    // below must still read after it has written out.
    runtime::ScratchPool::Buffer own;
    const void* mine = in_.data;
    if (in_.data <= out_.data && out_.data < static_cast<const char*>(in_.data) + in_.bytes) {
      own = context.scratch().Get(in_.bytes);
      std::memcpy(own.data(), in_.data, in_.bytes);
      mine = own.data();
    }
    const std::vector<const char*> all = DisseminationGather(context, group, sig, mine, in_.bytes, ex);
    const int me = group.index;
    const size_t count = static_cast<size_t>(counts_[static_cast<size_t>(me)]);
    if (count == 0) return;
    Reduce3(out_.data, block(all[0], me), block(all[1], me), count, out_.dtype, op_);
    for (int i = 2; i < group.size(); ++i) Reduce(out_.data, block(all[static_cast<size_t>(i)], me), count, out_.dtype, op_);
  }

  // Step s sends block me - s - 1 to the right (this rank's own input at step 0, later
  // the partial result it reduced at step s - 1) and receives block me - s - 2 from the
  // left, reducing it with its own input as it arrives. The last block received is
  // this rank's, finished straight into out.
  void Ring(runtime::Context& context, const Group& group) {
    const int n = group.size();
    const int me = group.index;
    size_t largest = 0;
    for (int b = 0; b < n; ++b) largest = std::max(largest, block_bytes(b));
    runtime::ScratchPool::Buffer partial[2] = {context.scratch().Get(largest), context.scratch().Get(largest)};
    Exchange ex(context, transport::Channel::kCollective, Label());
    const size_t size_of = elem();
    for (int s = 0; s < n - 1; ++s) {
      const int send_block = ((me - s - 1) % n + n) % n;
      const int recv_block = ((me - s - 2) % n + n) % n;
      const char* source = s == 0 ? block(in_.data, send_block) : partial[(s + 1) % 2].data();
      if (block_bytes(send_block) > 0) ex.SendRaw(group.peer(1), source, block_bytes(send_block));
      char* target = s == n - 2 ? static_cast<char*>(out_.data) : partial[s % 2].data();
      const char* own = block(in_.data, recv_block);
      if (block_bytes(recv_block) > 0) {
        ex.RecvStream(group.peer(-1), block_bytes(recv_block),
                      [&, target, own](const char* data, size_t offset, size_t length) {
                        Reduce3(target + offset, own + offset, data, length / size_of, out_.dtype, op_);
                      });
      }
      ex.Wait();
      ex.Clear();
    }
  }

  TensorView in_, out_;
  std::vector<int64_t> counts_;
  std::vector<size_t> offsets_;  // in elements
  ReduceOp op_;
  std::string name_;
};

}  // namespace

uint32_t HashBlockCounts(const std::vector<int64_t>& counts) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the counts' bytes
  for (int64_t c : counts) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(c >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return static_cast<uint32_t>(h ^ (h >> 32)) & 0x7fffffff;
}

std::unique_ptr<runtime::Op> MakeReduceScatter(const runtime::Context& context, const TensorView& in,
                                               const TensorView& out, const int64_t* counts, ReduceOp op,
                                               std::string name) {
  const int n = context.size();
  STARLING_CHECK_ARG(in.dtype == out.dtype, "reduce_scatter: in is ", in.Describe(), " but out is ", out.Describe(),
                     "; they must have the same dtype");
  CheckReduceOp(op, in.dtype);
  std::vector<int64_t> blocks(static_cast<size_t>(n));
  if (counts == nullptr) {
    STARLING_CHECK_ARG(in.numel == out.numel * static_cast<size_t>(n), "reduce_scatter: in has ", in.numel,
                       " elements and out ", out.numel, "; with equal blocks (counts NULL) in needs size() = ", n,
                       " times out's elements");
    std::fill(blocks.begin(), blocks.end(), static_cast<int64_t>(out.numel));
  } else {
    int64_t total = 0;
    for (int r = 0; r < n; ++r) {
      blocks[static_cast<size_t>(r)] = counts[r];
      STARLING_CHECK_ARG(counts[r] >= 0, "reduce_scatter: counts[", r, "] is negative (", counts[r], ")");
      STARLING_CHECK_ARG(AddFits(total, counts[r], &total), "reduce_scatter: the counts overflow");
    }
    STARLING_CHECK_ARG(static_cast<uint64_t>(total) == in.numel, "reduce_scatter: the counts sum to ", total,
                       " but in has ", in.numel, " elements");
    STARLING_CHECK_ARG(static_cast<uint64_t>(blocks[static_cast<size_t>(context.rank())]) == out.numel,
                       "reduce_scatter: out has ", out.numel, " elements but counts[", context.rank(), "] is ",
                       blocks[static_cast<size_t>(context.rank())]);
  }
  // Disjoint, or exactly this rank's block of in (in place).
  size_t before = 0;
  for (int r = 0; r < context.rank(); ++r) before += static_cast<size_t>(blocks[static_cast<size_t>(r)]);
  const bool in_place = in.bytes > 0 && out.data == static_cast<const char*>(in.data) + before * DTypeSize(in.dtype);
  if (!in_place && in.bytes > 0 && out.bytes > 0) {
    const auto a = reinterpret_cast<uintptr_t>(in.data);
    const auto b = reinterpret_cast<uintptr_t>(out.data);
    STARLING_CHECK_ARG(a + in.bytes <= b || b + out.bytes <= a, "reduce_scatter: in and out overlap; pass "
                       "separate memory, or (in place) out as exactly this rank's block of in");
  }
  return std::make_unique<ReduceScatterOp>(in, out, std::move(blocks), op, std::move(name));
}

}  // namespace starling::ops
