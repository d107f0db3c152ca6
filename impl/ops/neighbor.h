// Neighbor collectives, hierarchical averaging, pair gossip and topology changes as
// engine operations. Make* validate on the caller's thread and throw Error.
#pragma once

#include <memory>
#include <string>

#include "impl/common/tensor.h"
#include "impl/ops/neighbor_plan.h"
#include "impl/runtime/context.h"
#include "impl/runtime/op.h"

namespace starling::ops {

std::unique_ptr<runtime::Op> MakeNeighborAllreduce(const runtime::Context& context, const TensorView& in,
                                                   const TensorView& out, const NeighborArgs& args);
// out == nullptr: only the sources' first dimensions (into first_dims).
std::unique_ptr<runtime::Op> MakeNeighborAllgather(const runtime::Context& context, const TensorView& in,
                                                   const TensorView* out, int64_t* first_dims,
                                                   const NeighborArgs& args);
std::unique_ptr<runtime::Op> MakeHierarchicalNeighborAllreduce(const runtime::Context& context, const TensorView& in,
                                                               const TensorView& out, const NeighborArgs& args);
std::unique_ptr<runtime::Op> MakePairGossip(const runtime::Context& context, const TensorView& in,
                                            const TensorView& out, int peer, double self_weight,
                                            double pair_weight, std::string name);
std::unique_ptr<runtime::Op> MakeSetTopology(const runtime::Context& context,
                                             std::shared_ptr<const topology::Graph> graph, bool weighted,
                                             bool machine);

// The plan for `args` over the context's current topology (the default plan is cached
// per topology snapshot). Throws Error(kInvalidArgument) naming a bad rank or weight.
std::shared_ptr<const NeighborPlan> PlanFor(const runtime::Context& context, const NeighborArgs& args);

// neighbor_allgather's view of args: weights are ignored (dynamic mode still validates
// its sets), so its plan moves the tensor unscaled.
NeighborArgs AllgatherArgs(const NeighborArgs& args);

// The collective check of dynamic mode: every rank contributes its send and receive
// sets; throws Error(kMismatch) on every rank, naming pairs, if they do not match.
void CheckSendRecvMatch(runtime::Context& context, const std::vector<int>& sends, const std::vector<int>& recvs,
                        uint64_t seq, const LazyText& what);

}  // namespace starling::ops
