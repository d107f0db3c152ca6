// hierarchical_neighbor_allreduce: (1) sum inside each machine, (2) the machines'
// first local ranks run a neighbor exchange over the machine topology, (3) the result
// is broadcast inside each machine. The result is the weighted average of per-machine
// means: weighted (self_weight * sum + sum_j w_j d_j sum_j) / local_size, uniform
// (sum + sum_j sum_j) / (local_size * (k + 1)).
#include "impl/ops/collectives.h"
#include "impl/ops/neighbor.h"
#include "impl/ops/neighbor_exchange.h"
#include "impl/ops/reduce.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

class HierarchicalOp : public runtime::Op {
 public:
  HierarchicalOp(const TensorView& in, const TensorView& out, NeighborPlan plan, std::string name,
                 std::vector<int> leaders)
      : in_(in), out_(out), plan_(std::move(plan)), name_(std::move(name)), leaders_(std::move(leaders)) {}

  std::string Describe() const override {
    return DescribeOp("hierarchical_neighbor_allreduce", name_, Str(in_.Describe(), plan_.dynamic ? ", dynamic" : ""));
  }

  void Run(runtime::Context& context) override {
    Signature sig;
    sig.kind = OpKind::kHierarchicalNeighborAllreduce;
    sig.seq = NextSequence(context, sig.kind);
    const Group machine = MachineGroup(context);
    const LazyText what = Label();
    sig.extra = 1;
    RunAllreduce(context, machine, in_, out_, ReduceOp::kSum, sig, what);  // out = machine sum
    if (machine.index == 0) {
      // Leaders: machine ids -> their first ranks.
      auto to_ranks = [this](const std::vector<int>& machines) {
        std::vector<int> ranks;
        for (int m : machines) ranks.push_back(leaders_[static_cast<size_t>(m)]);
        return ranks;
      };
      const std::vector<int> sources = to_ranks(plan_.recv_ranks);
      SegmentInfo info;
      info.seq = sig.seq;
      info.kind = OpKind::kHierarchicalNeighborAllreduce;
      info.dtype = static_cast<uint8_t>(out_.dtype);
      info.count = static_cast<int64_t>(out_.numel);
      info.bytes = out_.bytes;
      const auto received = NeighborExchange(context, to_ranks(plan_.send_ranks), plan_.send_weights,
                                             {Outgoing{info, out_.data}}, sources, {info.seq}, what);
      const double local = static_cast<double>(machine.size());
      const double k = static_cast<double>(sources.size());
      std::vector<const void*> inputs;
      std::vector<double> weights;
      for (size_t s = 0; s < sources.size(); ++s) {
        const Segment& segment = received[s][0];
        STARLING_CHECK(segment.info.kind == info.kind && segment.info.dtype == info.dtype &&
                           segment.info.count == info.count && segment.info.bytes == info.bytes,
                       Code::kMismatch, "rank ", sources[s], " sent ", DescribeSegment(segment.info),
                       " but this rank called ", DescribeSegment(info));
        const double w = plan_.uniform ? 1.0 / (local * (k + 1)) : plan_.recv_weights[s] * segment.info.weight / local;
        if (w == 0.0) continue;
        inputs.push_back(segment.data);
        weights.push_back(w);
      }
      const double self = plan_.uniform ? 1.0 / (local * (k + 1)) : plan_.self_weight / local;
      WeightedSum(out_.data, out_.data, self, inputs.data(), weights.data(), static_cast<int>(inputs.size()),
                  out_.numel, out_.dtype);
    }
    sig.extra = 3;
    RunBroadcast(context, machine, out_, out_, 0, sig, what);
  }

 private:
  TensorView in_, out_;
  NeighborPlan plan_;
  std::string name_;
  std::vector<int> leaders_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakeHierarchicalNeighborAllreduce(const runtime::Context& context, const TensorView& in,
                                                               const TensorView& out, const NeighborArgs& args) {
  CheckSameLayout(in, out, "in", "out");
  CheckInOut(in, out, "in", "out");
  const transport::Layout& layout = context.layout();
  STARLING_CHECK(layout.homogeneous, Code::kUnsupported,
                 "hierarchical_neighbor_allreduce needs a homogeneous layout (every machine with the same number "
                 "of consecutive ranks)");
  STARLING_CHECK(layout.local_size >= 2, Code::kInvalidUsage,
                 "hierarchical_neighbor_allreduce with one rank per machine is neighbor_allreduce: use that");
  std::shared_ptr<const runtime::TopologyState> machine = context.machine_topology();
  if (!args.dynamic) {
    STARLING_CHECK(machine != nullptr, Code::kInvalidUsage,
                   "set a machine topology (starling_set_machine_topology) before a static "
                   "hierarchical_neighbor_allreduce");
  }
  // Dynamic mode only needs the machine count: an edgeless stand-in validates the ids.
  const topology::Graph edgeless = topology::Graph::FromEdges(layout.machine_size, {});
  const topology::Graph& graph = machine && !args.dynamic ? *machine->graph : edgeless;
  NeighborPlan plan = MakeNeighborPlan(graph, machine && machine->weighted, layout.machine_rank, args, "machine");
  STARLING_CHECK_ARG(!plan.check, "check_topology is not supported by hierarchical_neighbor_allreduce");
  return std::make_unique<HierarchicalOp>(in, out, std::move(plan), args.name, layout.machine_leaders);
}

}  // namespace starling::ops
