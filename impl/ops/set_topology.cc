// set_topology / set_machine_topology: a collective agreement on the graph's
// fingerprint (every rank must pass the same graph), then the context switches to the
// new snapshot. Operations submitted earlier keep the snapshot they were built with.
#include <cstring>

#include "impl/ops/agree.h"
#include "impl/ops/collectives.h"
#include "impl/ops/neighbor.h"
#include "impl/ops/sequence.h"

namespace starling::ops {
namespace {

// FNV-1a over the size, the weighted flag and every edge (weights bit for bit).
int64_t Fingerprint(const topology::Graph& graph, bool weighted) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  };
  const int size = graph.size();
  mix(&size, sizeof size);
  mix(&weighted, sizeof weighted);
  for (const topology::Edge& e : graph.edges()) {
    mix(&e.src, sizeof e.src);
    mix(&e.dst, sizeof e.dst);
    mix(&e.weight, sizeof e.weight);
  }
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

class SetTopologyOp : public runtime::Op {
 public:
  SetTopologyOp(std::shared_ptr<const topology::Graph> graph, bool weighted, bool machine)
      : graph_(std::move(graph)), weighted_(weighted), machine_(machine) {}

  std::string Describe() const override {
    return Str(machine_ ? "set_machine_topology" : "set_topology", " (", graph_->size(), " nodes, ",
               graph_->edges().size(), " edges", weighted_ ? ", weighted" : "", ")");
  }

  void Run(runtime::Context& context) override {
    STARLING_CHECK(context.live_windows().load() == 0, Code::kInvalidUsage,
                   "windows exist; free them before changing the topology");
    Signature sig;
    sig.kind = OpKind::kSetTopology;
    sig.seq = NextSequence(context, sig.kind);
    sig.count = Fingerprint(*graph_, weighted_);
    sig.extra = machine_ ? 1 : 0;
    Agree(context, WorldGroup(context), sig, Label());
    auto state = std::make_shared<runtime::TopologyState>();
    state->graph = graph_;
    state->weighted = weighted_;
    if (machine_) {
      context.set_machine_topology(std::move(state));
    } else {
      context.set_topology(std::move(state));
    }
  }

 private:
  std::shared_ptr<const topology::Graph> graph_;
  bool weighted_;
  bool machine_;
};

}  // namespace

std::unique_ptr<runtime::Op> MakeSetTopology(const runtime::Context& context,
                                             std::shared_ptr<const topology::Graph> graph, bool weighted,
                                             bool machine) {
  STARLING_CHECK_ARG(graph != nullptr, "topology must not be NULL");
  if (machine) {
    STARLING_CHECK(context.layout().homogeneous, Code::kUnsupported,
                   "a machine topology needs a homogeneous layout (every machine with the same number of "
                   "consecutive ranks); this layout is not");
    STARLING_CHECK_ARG(graph->size() == context.layout().machine_size, "the machine topology has ", graph->size(),
                       " nodes but there are ", context.layout().machine_size, " machines");
  } else {
    STARLING_CHECK_ARG(graph->size() == context.size(), "the topology has ", graph->size(),
                       " nodes but the context has ", context.size(), " ranks");
  }
  STARLING_CHECK(context.live_windows().load() == 0, Code::kInvalidUsage,
                 "windows exist; free them before changing the topology");
  return std::make_unique<SetTopologyOp>(std::move(graph), weighted, machine);
}

}  // namespace starling::ops
