// Topology of a context and neighbor collectives: glue only.
#include <cstring>

#include "capi/private/launch.h"
#include "capi/private/topology_handles.h"
#include "impl/device/nccl_ops.h"
#include "impl/ops/collectives.h"
#include "impl/ops/neighbor.h"

using namespace starling;
using namespace starling::capi;

namespace starling::capi {
ops::NeighborArgs ParseNeighborArgs(const starling_neighbor_args_t* args);
}  // namespace starling::capi

namespace {

ops::NeighborArgs ParseArgs(const starling_neighbor_args_t* args) { return ParseNeighborArgs(args); }

}  // namespace

// Shared with compression.cc.
ops::NeighborArgs starling::capi::ParseNeighborArgs(const starling_neighbor_args_t* args) {
  ops::NeighborArgs parsed;
  if (args == nullptr) return parsed;
  const starling_neighbor_args_t a =
      CopyOptions(args, starling_neighbor_args_t STARLING_NEIGHBOR_ARGS_INIT,
                  offsetof(starling_neighbor_args_t, name) + sizeof(const char*), "args", "STARLING_NEIGHBOR_ARGS_INIT");
  STARLING_CHECK_ARG(a.use_weights == 0 || a.use_weights == 1, "args->use_weights must be 0 or 1");
  STARLING_CHECK_ARG(a.dynamic == 0 || a.dynamic == 1, "args->dynamic must be 0 or 1");
  STARLING_CHECK_ARG(a.check_topology == 0 || a.check_topology == 1, "args->check_topology must be 0 or 1");
  parsed.use_weights = a.use_weights == 1;
  parsed.self_weight = a.self_weight;
  parsed.sources = CopyArray(a.source_ranks, a.num_sources, "source_ranks");
  if (a.source_weights != nullptr) parsed.source_weights = CopyArray(a.source_weights, a.num_sources, "source_weights");
  STARLING_CHECK_ARG(!parsed.use_weights || a.num_sources == 0 || a.source_weights != nullptr,
                     "use_weights is 1 but source_weights is NULL");
  if (!parsed.use_weights) parsed.source_weights.assign(parsed.sources.size(), 0.0);
  parsed.dynamic = a.dynamic == 1;
  parsed.destinations = CopyArray(a.destination_ranks, a.num_destinations, "destination_ranks");
  if (a.destination_weights != nullptr)
    parsed.destination_weights = CopyArray(a.destination_weights, a.num_destinations, "destination_weights");
  parsed.check_topology = a.check_topology == 1;
  if (a.name != nullptr) parsed.name = a.name;
  return parsed;
}

namespace {

starling_status_t SetTopology(starling_context_t ctx, starling_topology_t topo, int is_weighted, bool machine) {
  return Launch(ctx, nullptr, false, [&](runtime::Context& c) {
    STARLING_CHECK_ARG(is_weighted == 0 || is_weighted == 1, "is_weighted must be 0 or 1");
    return ops::MakeSetTopology(c, TopologyFromHandle(topo), is_weighted == 1, machine);
  });
}

starling_status_t GetTopology(starling_context_t ctx, starling_topology_t* out, int* is_weighted, bool machine) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = nullptr;
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  std::shared_ptr<const runtime::TopologyState> state = machine ? context->machine_topology() : context->topology();
  if (is_weighted) *is_weighted = state && state->weighted ? 1 : 0;
  if (state) *out = TopologyToHandle(state->graph);
  STARLING_API_END();
}

starling_status_t Neighbors(starling_context_t ctx, int* ranks, int capacity, int* count, bool in) {
  STARLING_API_BEGIN();
  std::shared_ptr<runtime::Context> context = Contexts().Get(ctx);
  CopyNeighbors(*context->topology()->graph, context->rank(), ranks, capacity, count, in);
  STARLING_API_END();
}


// The neighbor operations on host or CUDA tensors (device::Route); element-wise ones
// may be pipelined in chunks on the staged path.
starling_status_t NeighborAllreduce(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                    const starling_neighbor_args_t* args, starling_request_t* req, bool nonblocking,
                                    bool hierarchical) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    const ops::NeighborArgs parsed = ParseArgs(args);
    device::RouteOptions route{true, true, nullptr};
    if (!hierarchical)
      route.nccl = [&](const Views& v) { return device::MakeNcclNeighborAllreduce(c, v[0], v[1], parsed); };
    return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
      return hierarchical ? ops::MakeHierarchicalNeighborAllreduce(c, v[0], v[1], parsed)
                          : ops::MakeNeighborAllreduce(c, v[0], v[1], parsed);
    });
  });
}

starling_status_t NeighborAllgather(starling_context_t ctx, const DLTensor* in, DLTensor* out, int64_t* first_dims,
                                    const starling_neighbor_args_t* args, starling_request_t* req, bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    const ops::NeighborArgs parsed = ParseArgs(args);
    device::RouteOptions route{false, true, [&](const Views& v) {
                                 return device::MakeNcclNeighborAllgather(c, v[0], v[1], first_dims, parsed);
                               }};
    return device::Route(c, {In(in), Out(out)}, route, [&](const Views& v) {
      return ops::MakeNeighborAllgather(c, v[0], &v[1], first_dims, parsed);
    });
  });
}

starling_status_t LocalAllreduce(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                 const starling_reduce_op_t& op, const char* name, starling_request_t* req,
                                 bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    const ReduceOp reduce = ToReduceOp(op);
    return device::Route(c, {In(in), Out(out)}, device::RouteOptions{true, true, nullptr}, [&](const Views& v) {
      return ops::MakeLocalAllreduce(c, v[0], v[1], reduce, NameOf(name));
    });
  });
}

starling_status_t PairGossip(starling_context_t ctx, const DLTensor* in, DLTensor* out, int peer, double self_weight,
                             double pair_weight, const char* name, starling_request_t* req, bool nonblocking) {
  return Launch(ctx, req, nonblocking, [&](runtime::Context& c) {
    // Pair gossip involves two ranks at a time: it never chooses the path.
    return device::Route(c, {In(in), Out(out)}, device::RouteOptions{true, false, nullptr}, [&](const Views& v) {
      return ops::MakePairGossip(c, v[0], v[1], peer, self_weight, pair_weight, NameOf(name));
    });
  });
}

}  // namespace

extern "C" {

STARLING_API starling_status_t starling_set_topology(starling_context_t ctx, starling_topology_t topo,
                                                     int is_weighted) {
  return SetTopology(ctx, topo, is_weighted, false);
}
STARLING_API starling_status_t starling_get_topology(starling_context_t ctx, starling_topology_t* out,
                                                     int* is_weighted) {
  return GetTopology(ctx, out, is_weighted, false);
}
STARLING_API starling_status_t starling_set_machine_topology(starling_context_t ctx, starling_topology_t topo,
                                                             int is_weighted) {
  return SetTopology(ctx, topo, is_weighted, true);
}
STARLING_API starling_status_t starling_get_machine_topology(starling_context_t ctx, starling_topology_t* out,
                                                             int* is_weighted) {
  return GetTopology(ctx, out, is_weighted, true);
}
STARLING_API starling_status_t starling_in_neighbors(starling_context_t ctx, int* ranks, int capacity, int* count) {
  return Neighbors(ctx, ranks, capacity, count, true);
}
STARLING_API starling_status_t starling_out_neighbors(starling_context_t ctx, int* ranks, int capacity, int* count) {
  return Neighbors(ctx, ranks, capacity, count, false);
}

STARLING_API starling_status_t starling_neighbor_allreduce(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                           const starling_neighbor_args_t* args) {
  return NeighborAllreduce(ctx, in, out, args, nullptr, false, false);
}
STARLING_API starling_status_t starling_neighbor_allreduce_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                                       DLTensor* out,
                                                                       const starling_neighbor_args_t* args,
                                                                       starling_request_t* req) {
  return NeighborAllreduce(ctx, in, out, args, req, true, false);
}

STARLING_API starling_status_t starling_neighbor_allgather(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                           int64_t* first_dims,
                                                           const starling_neighbor_args_t* args) {
  return NeighborAllgather(ctx, in, out, first_dims, args, nullptr, false);
}
STARLING_API starling_status_t starling_neighbor_allgather_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                                       DLTensor* out, int64_t* first_dims,
                                                                       const starling_neighbor_args_t* args,
                                                                       starling_request_t* req) {
  return NeighborAllgather(ctx, in, out, first_dims, args, req, true);
}
STARLING_API starling_status_t starling_neighbor_allgather_first_dims(starling_context_t ctx, const DLTensor* in,
                                                                      int64_t* first_dims,
                                                                      const starling_neighbor_args_t* args) {
  return Launch(ctx, nullptr, false, [&](runtime::Context& c) {
    const ops::NeighborArgs parsed = ParseArgs(args);
    return device::Route(c, {Shape(in)}, device::RouteOptions{false, true, nullptr}, [&](const Views& v) {
      return ops::MakeNeighborAllgather(c, v[0], nullptr, first_dims, parsed);
    });
  });
}

STARLING_API starling_status_t starling_hierarchical_neighbor_allreduce(starling_context_t ctx, const DLTensor* in,
                                                                        DLTensor* out,
                                                                        const starling_neighbor_args_t* args) {
  return NeighborAllreduce(ctx, in, out, args, nullptr, false, true);
}
STARLING_API starling_status_t starling_hierarchical_neighbor_allreduce_nonblocking(
    starling_context_t ctx, const DLTensor* in, DLTensor* out, const starling_neighbor_args_t* args,
    starling_request_t* req) {
  return NeighborAllreduce(ctx, in, out, args, req, true, true);
}

STARLING_API starling_status_t starling_local_allreduce(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                        starling_reduce_op_t op, const char* name) {
  return LocalAllreduce(ctx, in, out, op, name, nullptr, false);
}
STARLING_API starling_status_t starling_local_allreduce_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                                    DLTensor* out, starling_reduce_op_t op,
                                                                    const char* name, starling_request_t* req) {
  return LocalAllreduce(ctx, in, out, op, name, req, true);
}

STARLING_API starling_status_t starling_pair_gossip(starling_context_t ctx, const DLTensor* in, DLTensor* out,
                                                    int peer, double self_weight, double pair_weight,
                                                    const char* name) {
  return PairGossip(ctx, in, out, peer, self_weight, pair_weight, name, nullptr, false);
}
STARLING_API starling_status_t starling_pair_gossip_nonblocking(starling_context_t ctx, const DLTensor* in,
                                                                DLTensor* out, int peer, double self_weight,
                                                                double pair_weight, const char* name,
                                                                starling_request_t* req) {
  return PairGossip(ctx, in, out, peer, self_weight, pair_weight, name, req, true);
}

}  // extern "C"
