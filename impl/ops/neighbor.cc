// neighbor_allreduce and neighbor_allgather: one neighbor exchange (see
// neighbor_exchange.h), then one pass over the output.
#include "impl/ops/neighbor.h"

#include <cstring>

#include "impl/common/checked.h"
#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/neighbor_exchange.h"
#include "impl/ops/reduce.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

// out = self_weight * x + sum_j w_j * d_j * in_j (or the uniform average), skipping
// sources whose weight is 0.
void Combine(const NeighborPlan& plan, const TensorView& in, const TensorView& out,
             const std::vector<const Segment*>& from_sources) {
  std::vector<const void*> inputs;
  std::vector<double> weights;
  for (size_t s = 0; s < from_sources.size(); ++s) {
    const double w = plan.recv_weights[s] * from_sources[s]->info.weight;
    if (plan.uniform || w != 0.0) {
      inputs.push_back(from_sources[s]->data);
      weights.push_back(w);
    }
  }
  const int k = static_cast<int>(inputs.size());
  if (plan.uniform) {
    UniformAverage(out.data, in.data, inputs.data(), k, out.numel, out.dtype);
  } else {
    WeightedSum(out.data, in.data, plan.self_weight, inputs.data(), weights.data(), k, out.numel, out.dtype);
  }
}

std::string MismatchText(int source, const SegmentInfo& got, const SegmentInfo& expected) {
  return Str("rank ", source, " sent ", DescribeSegment(got), " but this rank called ", DescribeSegment(expected));
}

bool SameSegmentShape(const SegmentInfo& a, const SegmentInfo& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.count == b.count && a.shape_hash == b.shape_hash &&
         (a.kind != OpKind::kNeighborAllreduce || a.bytes == b.bytes);
}

class NeighborAllreduceOp : public runtime::Op {
 public:
  NeighborAllreduceOp(const TensorView& in, const TensorView& out, std::shared_ptr<const NeighborPlan> plan,
                      std::string name)
      : in_(in), out_(out), plan_ptr_(std::move(plan)), plan_(*plan_ptr_), name_(std::move(name)) {
    if (!plan_.check) {
      key_.reserve(plan_.key.size() + 1);
      key_ += static_cast<char>(in_.dtype);
      key_ += plan_.key;
    }
  }

  std::string Describe() const override {
    return DescribeOp("neighbor_allreduce", name_, Str(in_.Describe(), plan_.dynamic ? ", dynamic" : ""));
  }
  const std::string& fusion_key() const override { return key_; }
  size_t fusion_bytes() const override { return in_.bytes; }

  void Run(runtime::Context& context) override { RunGroup(context, {this}); }

  void RunGroup(runtime::Context& context, const std::vector<runtime::Op*>& group) override {
    std::vector<NeighborAllreduceOp*> ops;
    for (runtime::Op* op : group) ops.push_back(static_cast<NeighborAllreduceOp*>(op));
    std::vector<uint64_t> seqs;
    std::vector<Outgoing> outgoing;
    for (NeighborAllreduceOp* op : ops) {
      seqs.push_back(NextSequence(context, OpKind::kNeighborAllreduce));
      outgoing.push_back(Outgoing{op->Info(seqs.back()), op->in_.data});
    }
    const size_t fused = ops.size();
    const LazyText what = fused == 1 ? Label() : LazyText([fused] { return Str(fused, " fused neighbor_allreduce calls"); });
    if (plan_.check) CheckSendRecvMatch(context, plan_.send_ranks, plan_.recv_ranks, seqs[0], what);
    const auto received =
        NeighborExchange(context, plan_.send_ranks, plan_.send_weights, outgoing, plan_.recv_ranks, seqs, what);
    for (size_t i = 0; i < ops.size(); ++i) {
      std::vector<const Segment*> from_sources;
      std::string mismatch;
      for (size_t s = 0; s < plan_.recv_ranks.size(); ++s) {
        const Segment& segment = received[s][i];
        if (!SameSegmentShape(segment.info, outgoing[i].info) && mismatch.empty())
          mismatch = MismatchText(plan_.recv_ranks[s], segment.info, outgoing[i].info);
        from_sources.push_back(&segment);
      }
      if (!mismatch.empty()) {
        ops[i]->failure = Error(Code::kMismatch, mismatch);
        continue;
      }
      Combine(plan_, ops[i]->in_, ops[i]->out_, from_sources);
    }
    if (ops.size() == 1 && ops[0]->failure) {
      const Error error = *ops[0]->failure;
      ops[0]->failure.reset();
      throw error;
    }
  }

 private:
  SegmentInfo Info(uint64_t seq) const {
    SegmentInfo info;
    info.seq = seq;
    info.kind = OpKind::kNeighborAllreduce;
    info.dtype = static_cast<uint8_t>(in_.dtype);
    info.count = static_cast<int64_t>(in_.numel);
    info.bytes = in_.bytes;
    return info;
  }

  TensorView in_, out_;
  std::shared_ptr<const NeighborPlan> plan_ptr_;
  const NeighborPlan& plan_;
  std::string name_;
  std::string key_;
};

class NeighborAllgatherOp : public runtime::Op {
 public:
  NeighborAllgatherOp(const TensorView& in, const TensorView* out, int64_t* first_dims,
                      std::shared_ptr<const NeighborPlan> plan, std::string name)
      : in_(in), gather_(out != nullptr), first_dims_(first_dims), plan_ptr_(std::move(plan)), plan_(*plan_ptr_),
        name_(std::move(name)) {
    if (out) out_ = *out;
  }

  std::string Describe() const override {
    return DescribeOp(gather_ ? "neighbor_allgather" : "neighbor_allgather_first_dims", name_, in_.Describe());
  }

  void Run(runtime::Context& context) override {
    SegmentInfo info;
    info.kind = OpKind::kNeighborAllgather;
    info.seq = NextSequence(context, info.kind);
    info.dtype = static_cast<uint8_t>(in_.dtype);
    info.count = static_cast<int64_t>(in_.row_bytes());
    info.first_dim = in_.first_dim();
    info.bytes = gather_ ? in_.bytes : 0;
    info.shape_hash = TrailingShapeHash(in_) ^ (gather_ ? 0u : 0x80000000u);
    if (plan_.check) CheckSendRecvMatch(context, plan_.send_ranks, plan_.recv_ranks, info.seq, Label());
    const auto received = NeighborExchange(context, plan_.send_ranks, plan_.send_weights, {Outgoing{info, in_.data}},
                                           plan_.recv_ranks, {info.seq}, Label());
    int64_t total = 0;
    for (size_t s = 0; s < plan_.recv_ranks.size(); ++s) {
      const SegmentInfo& got = received[s][0].info;
      STARLING_CHECK(SameSegmentShape(got, info), Code::kMismatch, MismatchText(plan_.recv_ranks[s], got, info));
      // Its rows must be what it sent, and all rows must fit `out` (checked below).
      uint64_t rows_bytes = 0;
      STARLING_CHECK(got.first_dim >= 0 && BytesFit(got.first_dim, got.count, &rows_bytes) &&
                         got.bytes == (gather_ ? rows_bytes : 0) && AddFits(total, got.first_dim, &total),
                     Code::kMismatch, "rank ", plan_.recv_ranks[s], " sent malformed data: ", DescribeSegment(got),
                     " with ", got.bytes, " bytes");
      if (first_dims_) first_dims_[s] = got.first_dim;
    }
    if (!gather_) return;
    STARLING_CHECK(total == out_.first_dim(), Code::kMismatch, "out has first dimension ", out_.first_dim(),
                   " but the sources sent ", total, " rows (use starling_neighbor_allgather_first_dims to size it)");
    char* cursor = static_cast<char*>(out_.data);
    for (size_t s = 0; s < plan_.recv_ranks.size(); ++s) {
      const Segment& segment = received[s][0];
      if (segment.info.bytes > 0) std::memcpy(cursor, segment.data, segment.info.bytes);
      cursor += segment.info.bytes;
    }
  }

 private:
  TensorView in_;
  TensorView out_;
  bool gather_;
  int64_t* first_dims_;
  std::shared_ptr<const NeighborPlan> plan_ptr_;
  const NeighborPlan& plan_;
  std::string name_;
};

bool IsDefault(const NeighborArgs& args) {
  return !args.use_weights && !args.dynamic && !args.check_topology && args.sources.empty() &&
         args.destinations.empty() && args.destination_weights.empty();
}

}  // namespace

// The plan for `args` over the current topology. The default plan (static mode,
// topology weights: what most calls use) is computed once per topology snapshot.
std::shared_ptr<const NeighborPlan> PlanFor(const runtime::Context& context, const NeighborArgs& args) {
  std::shared_ptr<const runtime::TopologyState> topology = context.topology();
  if (!IsDefault(args))
    return std::make_shared<const NeighborPlan>(
        MakeNeighborPlan(*topology->graph, topology->weighted, context.rank(), args, "rank"));
  std::lock_guard<std::mutex> lock(topology->cache_mutex);
  if (!topology->default_neighbor_plan) {
    topology->default_neighbor_plan = std::make_shared<const NeighborPlan>(
        MakeNeighborPlan(*topology->graph, topology->weighted, context.rank(), args, "rank"));
  }
  return std::static_pointer_cast<const NeighborPlan>(topology->default_neighbor_plan);
}

void CheckSendRecvMatch(runtime::Context& context, const std::vector<int>& sends, const std::vector<int>& recvs,
                        uint64_t seq, const LazyText& what) {
  const int p = context.size();
  std::vector<char> mine(2 * static_cast<size_t>(p), 0);
  for (int r : sends) mine[static_cast<size_t>(r)] = 1;
  for (int r : recvs) mine[static_cast<size_t>(p + r)] = 1;
  Signature sig;
  sig.seq = seq;
  sig.kind = OpKind::kNeighborAllreduce;
  sig.count = 2 * p;
  sig.extra = 1;  // the topology check
  Exchange ex(context, transport::Channel::kCollective, what);
  const std::vector<const char*> all = DisseminationGather(context, WorldGroup(context), sig, mine.data(), mine.size(), ex);
  std::string problems;
  int shown = 0, found = 0;
  for (int i = 0; i < p; ++i) {
    for (int j = 0; j < p; ++j) {
      const bool sends_to = all[i][j] != 0, received = all[j][p + i] != 0;
      if (sends_to == received) continue;
      ++found;
      if (shown++ < 6)
        problems += sends_to ? Str("; rank ", i, " sends to rank ", j, " but rank ", j, " does not receive from it")
                             : Str("; rank ", j, " receives from rank ", i, " but rank ", i, " does not send to it");
    }
  }
  STARLING_CHECK(found == 0, Code::kMismatch, "the dynamic send and receive sets disagree (", found,
                 " mismatched pair(s))", problems);
}

std::unique_ptr<runtime::Op> MakeNeighborAllreduce(const runtime::Context& context, const TensorView& in,
                                                   const TensorView& out, const NeighborArgs& args) {
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  return std::make_unique<NeighborAllreduceOp>(in, out, PlanFor(context, args), args.name);
}

NeighborArgs AllgatherArgs(const NeighborArgs& args) {
  NeighborArgs plain = args;
  plain.use_weights = args.dynamic;  // weights are ignored; dynamic mode still validates its sets
  if (!args.dynamic) {
    plain.sources.clear();
    plain.source_weights.clear();
  } else {
    plain.source_weights.assign(plain.sources.size(), 1.0);
    plain.destination_weights.clear();
    plain.self_weight = 1.0;
  }
  return plain;
}

std::unique_ptr<runtime::Op> MakeNeighborAllgather(const runtime::Context& context, const TensorView& in,
                                                   const TensorView* out, int64_t* first_dims,
                                                   const NeighborArgs& args) {
  STARLING_CHECK_ARG(in.ndim() >= 1, "neighbor_allgather needs a tensor with at least one dimension, got ",
                     in.Describe());
  std::shared_ptr<const NeighborPlan> plan = PlanFor(context, AllgatherArgs(args));
  if (out != nullptr) {
    bool trailing_equal = in.ndim() == out->ndim();
    for (int i = 1; trailing_equal && i < in.ndim(); ++i) trailing_equal = in.shape[i] == out->shape[i];
    STARLING_CHECK_ARG(in.dtype == out->dtype && trailing_equal, "neighbor_allgather: out is ", out->Describe(),
                       " but in is ", in.Describe(), "; out must have in's dtype and all dimensions but the first");
    CheckInOut(in, *out, "in", "out");
  } else {
    STARLING_CHECK_ARG(first_dims != nullptr || plan->recv_ranks.empty(), "first_dims must not be NULL (",
                       plan->recv_ranks.size(), " sources)");
  }
  return std::make_unique<NeighborAllgatherOp>(in, out, first_dims, std::move(plan), args.name);
}

}  // namespace starling::ops
