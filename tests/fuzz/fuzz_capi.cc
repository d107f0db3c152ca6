// Fuzz target "capi": argument validation of the C entry points on a real one-rank
// context (a singleton MPI world: no mpirun). Tensors come from descriptor.h with its
// oracle, option structs with fuzzed struct_size and fields, rank lists and weights
// with fuzzed counts (never beyond the harness's arrays, whose length the ABI cannot
// know). A call is made only when nothing it may touch lies outside harness memory.
// Every status must be a documented one, a descriptor that breaks a rule must be
// refused, and after every input the context must still work.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <starling/starling.h>

#include "capi_recipe.h"

namespace {

using namespace starling_fuzz;

constexpr size_t kArenaBytes = 4096;

struct Harness {
  starling_context_t ctx = nullptr;
  char* arena = new char[kArenaBytes]();  // on the heap: ASan poisons both ends
  int64_t first_dims[kMaxList] = {};
};

Harness& H() {
  static Harness harness;
  return harness;
}

void Require(bool condition) {
  if (!condition) __builtin_trap();
}

// Bad input may only give these; TIMEOUT, SHUTDOWN, TRANSPORT or INTERNAL would be bugs.
void CheckStatus(starling_status_t s) {
  Require(s == STARLING_SUCCESS || (s <= STARLING_ERR_INVALID_ARGUMENT && s >= STARLING_ERR_MISMATCH) ||
          s == STARLING_ERR_OUT_OF_MEMORY);
  if (s < 0) Require(starling_last_error()[0] != '\0');
}

int Count(int8_t n) { return std::min<int>(n, kMaxList); }

starling_neighbor_args_t NeighborArgs(const ArgsRecipe& r) {
  starling_neighbor_args_t a = STARLING_NEIGHBOR_ARGS_INIT;
  a.struct_size = r.struct_size % 256;  // below, at and beyond the real size
  a.use_weights = r.use_weights;
  a.self_weight = r.self_weight;
  a.num_sources = Count(r.num_sources);
  a.source_ranks = (r.flags & kNullSources) ? nullptr : r.sources;
  a.source_weights = (r.flags & kNullSourceWeights) ? nullptr : r.source_weights;
  a.dynamic = r.dynamic;
  a.num_destinations = Count(r.num_destinations);
  a.destination_ranks = (r.flags & kNullDestinations) ? nullptr : r.destinations;
  a.destination_weights = (r.flags & kNullDestinationWeights) ? nullptr : r.destination_weights;
  a.check_topology = r.check_topology;
  a.name = (r.flags & kNullName) ? nullptr : "fuzz";
  return a;
}

// topology_create from the recipe's lists, its queries, and set_topology.
starling_status_t Topology(const CallRecipe& r) {
  const ArgsRecipe& a = r.args;
  starling_topology_t topo = nullptr;
  starling_status_t s = starling_topology_create(r.small, Count(a.num_sources), (a.flags & kNullSources) ? nullptr : a.sources,
                                                 (a.flags & kNullDestinations) ? nullptr : a.destinations,
                                                 (a.flags & kNullSourceWeights) ? nullptr : a.source_weights, &topo);
  if (s != STARLING_SUCCESS) {
    Require(topo == nullptr);
    return s;
  }
  int ranks[kMaxList], count = 0;
  double weights[kMaxList], self_weight = 0;
  const int capacity = Count(a.num_destinations);
  CheckStatus(starling_topology_in_neighbors(topo, r.value, ranks, capacity, &count));
  CheckStatus(starling_topology_out_neighbors(topo, r.value, ranks, capacity, &count));
  CheckStatus(starling_topology_recv_weights(topo, r.value, &self_weight, ranks, weights, capacity, &count));
  CheckStatus(starling_topology_edges(topo, ranks, ranks, weights, capacity));
  s = starling_set_topology(H().ctx, topo, r.value & 3);
  Require(starling_topology_free(topo) == STARLING_SUCCESS);
  if (s == STARLING_SUCCESS) {  // back to the default graph for the next input
    Require(starling_topology_exponential_two(1, &topo) == STARLING_SUCCESS);
    Require(starling_set_topology(H().ctx, topo, 0) == STARLING_SUCCESS);
    Require(starling_topology_free(topo) == STARLING_SUCCESS);
  }
  return s;
}

starling_status_t CreateContext(const CallRecipe& r) {
  starling_context_options_t o = STARLING_CONTEXT_OPTIONS_INIT;
  o.struct_size = r.args.struct_size % 64;
  o.use_host_comm = r.args.use_weights;
  o.host_comm = r.value;
  o.nodes_per_machine = r.args.dynamic;
  starling_context_t other = nullptr;
  const starling_status_t s = starling_context_create(&o, &other);
  if (s == STARLING_SUCCESS) Require(starling_context_destroy(other) == STARLING_SUCCESS);
  return s;
}

// The entry point of the recipe. `req` receives the request of a nonblocking form.
starling_status_t Call(Entry entry, const CallRecipe& r, DLTensor* in, DLTensor* out, int64_t* dims,
                       const starling_neighbor_args_t* args, starling_request_t* req) {
  starling_context_t ctx = H().ctx;
  const bool nb = r.flags & kNonblocking;
  starling_reduce_op_t op;  // any int, beyond the last op too, as a C caller may pass
  const int op_value = r.value & 7;
  std::memcpy(&op, &op_value, sizeof op);
  switch (entry) {
    case kAllreduce:
      return nb ? starling_allreduce_nonblocking(ctx, in, out, op, "fuzz", req)
                : starling_allreduce(ctx, in, out, op, "fuzz");
    case kLocalAllreduce:
      return nb ? starling_local_allreduce_nonblocking(ctx, in, out, op, "fuzz", req)
                : starling_local_allreduce(ctx, in, out, op, "fuzz");
    case kBroadcast:
      return nb ? starling_broadcast_nonblocking(ctx, in, out, r.value, "fuzz", req)
                : starling_broadcast(ctx, in, out, r.value, "fuzz");
    case kAllgather:
      return nb ? starling_allgather_nonblocking(ctx, in, out, dims, "fuzz", req)
                : starling_allgather(ctx, in, out, dims, "fuzz");
    case kAllgatherFirstDims:
      return nb ? starling_allgather_first_dims_nonblocking(ctx, in, dims, "fuzz", req)
                : starling_allgather_first_dims(ctx, in, dims, "fuzz");
    case kNeighborAllreduce:
      return nb ? starling_neighbor_allreduce_nonblocking(ctx, in, out, args, req)
                : starling_neighbor_allreduce(ctx, in, out, args);
    case kNeighborAllgather:
      return nb ? starling_neighbor_allgather_nonblocking(ctx, in, out, dims, args, req)
                : starling_neighbor_allgather(ctx, in, out, dims, args);
    case kNeighborAllgatherFirstDims:
      return starling_neighbor_allgather_first_dims(ctx, in, dims, args);
    case kHierarchicalNeighborAllreduce:
      return nb ? starling_hierarchical_neighbor_allreduce_nonblocking(ctx, in, out, args, req)
                : starling_hierarchical_neighbor_allreduce(ctx, in, out, args);
    case kPairGossip:
      return nb ? starling_pair_gossip_nonblocking(ctx, in, out, r.value, r.weights[0], r.weights[1], "fuzz", req)
                : starling_pair_gossip(ctx, in, out, r.value, r.weights[0], r.weights[1], "fuzz");
    case kCompressedAllreduce:
    case kCompressedNeighborAllreduce: {
      // Any compressor (invalid ones too), k, ratio, gamma and struct size.
      starling_compression_t c = STARLING_COMPRESSION_INIT;
      c.struct_size = static_cast<size_t>(static_cast<uint16_t>(r.small)) % 64;
      c.compressor = (r.value >> 3) % 8 - 1;
      c.k = r.value >> 6;
      c.ratio = r.weights[0];
      c.gamma = r.weights[1];
      c.error_feedback = r.flags & kNullFirstDims ? 1 : 0;
      c.seed = static_cast<uint64_t>(r.value);
      if (entry == kCompressedAllreduce)
        return nb ? starling_allreduce_compressed_nonblocking(ctx, in, out, op, "fuzz", &c, req)
                  : starling_allreduce_compressed(ctx, in, out, op, "fuzz", &c);
      return nb ? starling_neighbor_allreduce_compressed_nonblocking(ctx, in, out, args, &c, req)
                : starling_neighbor_allreduce_compressed(ctx, in, out, args, &c);
    }
    case kTopology:
      return Topology(r);
    case kContextCreate:
      return CreateContext(r);
    case kStats: {
      starling_stats_t stats = STARLING_STATS_INIT;
      stats.struct_size = r.args.struct_size % 128;
      return starling_get_stats(ctx, &stats);
    }
    case kReduceScatter:
      return nb ? starling_reduce_scatter_nonblocking(ctx, in, out, dims, op, "fuzz", req)
                : starling_reduce_scatter(ctx, in, out, dims, op, "fuzz");
    case kAlltoall: {
      const int64_t* recv = dims && (r.flags & kNullArgs) == 0 ? dims + 1 : nullptr;  // one NULL: refused
      return nb ? starling_alltoall_nonblocking(ctx, in, out, dims, recv, "fuzz", req)
                : starling_alltoall(ctx, in, out, dims, recv, "fuzz");
    }
    case kPeerStats: {
      starling_peer_stats_t stats = STARLING_PEER_STATS_INIT;
      stats.struct_size = r.args.struct_size % 128;
      return starling_get_peer_stats(ctx, r.value, &stats);
    }
    case kProbePeers: {
      starling_probe_args_t a = STARLING_PROBE_ARGS_INIT;
      a.struct_size = r.args.struct_size % 64;
      a.repetitions = r.value;
      a.bulk_bytes = static_cast<uint64_t>(static_cast<int64_t>(r.small)) << 20;  // negative: huge
      // The outputs are harness memory: room for kArenaBytes / 8 values, far more than
      // the context's one rank needs, whatever count claims.
      double* out = (r.flags & kNullOut) ? nullptr : reinterpret_cast<double*>(H().arena);
      return starling_probe_peers(ctx, (r.flags & kNullArgs) ? nullptr : &a, out, out, r.args.num_sources);
    }
    case kNumEntries:
      break;
  }
  return STARLING_ERR_INVALID_ARGUMENT;
}

bool TakesOut(Entry e) {
  return (e != kAllgatherFirstDims && e != kNeighborAllgatherFirstDims && e < kTopology) || e == kReduceScatter ||
         e == kAlltoall;
}

// A real collective on harness data: the context must work after any input.
void CheckContextWorks() {
  double values[2] = {1.5, -2.0};
  int64_t shape[1] = {2};
  DLTensor t = {values, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, nullptr, 0};
  Require(starling_barrier(H().ctx) == STARLING_SUCCESS);
  Require(starling_allreduce(H().ctx, &t, &t, STARLING_SUM, "check") == STARLING_SUCCESS);
  Require(values[0] == 1.5 && values[1] == -2.0);  // one rank: the sum is the input
}

}  // namespace

// Open MPI keeps some of its start-up allocations unreachable until exit, which leak
// checking would report after every input; the pure targets keep it.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Require(starling_context_create(nullptr, &H().ctx) == STARLING_SUCCESS);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CallRecipe r = {};
  std::memcpy(&r, data, std::min(size, sizeof r));
  const Entry entry = static_cast<Entry>(r.entry % kNumEntries);
  Harness& h = H();
  Descriptor in, out;
  Build(r.in, h.arena, kArenaBytes, &in);
  Build(r.out, h.arena, kArenaBytes, &out);
  DLTensor* pin = (r.flags & kNullIn) ? nullptr : &in.tensor;
  DLTensor* pout = (r.flags & kInPlace) ? pin : (r.flags & kNullOut) ? nullptr : &out.tensor;
  const Verdict vin = pin ? Judge(*pin) : Verdict{true};
  const Verdict vout = pout ? Judge(*pout) : Verdict{true};
  const bool takes_in = entry < kTopology || entry == kReduceScatter || entry == kAlltoall;
  const bool takes_out = TakesOut(entry);
  if ((takes_in && !SafeToCall(vin, h.arena, kArenaBytes)) || (takes_out && !SafeToCall(vout, h.arena, kArenaBytes)))
    return 0;  // a valid descriptor beyond the arena: the library would rightly use that memory
  // Fortran handles from 3 up may name a live communicator, even a context's own.
  if (entry == kContextCreate && r.args.use_weights == 1 && r.value >= 3) return 0;

  const starling_neighbor_args_t args = NeighborArgs(r.args);
  starling_request_t req = nullptr;
  const starling_status_t s = Call(entry, r, pin, pout, (r.flags & kNullFirstDims) ? nullptr : h.first_dims,
                                   (r.flags & kNullArgs) ? nullptr : &args, &req);
  CheckStatus(s);
  if ((takes_in && vin.must_reject) || (takes_out && vout.must_reject)) Require(s < 0);
  if (s == STARLING_SUCCESS && req != nullptr) {
    CheckStatus(starling_request_wait(req));
    Require(starling_request_free(req) == STARLING_SUCCESS);
  } else {
    Require(req == nullptr);  // a refused call leaves no request behind
  }
  CheckContextWorks();
  return 0;
}
