// C ABI glue for topologies and dynamic schedules: argument checks and conversions
// around impl/topology, nothing more.
#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "capi/private/api.h"
#include "capi/private/handles.h"
#include "capi/private/topology_handles.h"
#include "impl/topology/graph.h"
#include "impl/topology/schedule.h"

namespace starling::capi {
namespace {

using topology::Graph;

// A schedule plus the step it produced but could not hand out yet: a call whose arrays
// are too small reports the counts and leaves the schedule where it was.
struct ScheduleState {
  std::mutex mutex;
  std::unique_ptr<topology::Schedule> schedule;
  std::optional<topology::Step> pending;
};

HandleTable<const Graph, starling_topology_t>& Topologies() {
  static HandleTable<const Graph, starling_topology_t> table("topology");
  return table;
}

HandleTable<ScheduleState, starling_schedule_t>& Schedules() {
  static HandleTable<ScheduleState, starling_schedule_t> table("schedule");
  return table;
}

// Checks `out` and clears it, so a failed create never leaves a stale handle behind.
template <typename Handle>
Handle* ClearOut(Handle* out) {
  CheckOut(out, "out");
  *out = nullptr;
  return out;
}

void PublishTopology(Graph graph, starling_topology_t* out) {
  *out = Topologies().Add(std::make_shared<const Graph>(std::move(graph)));
}

void PublishSchedule(std::unique_ptr<topology::Schedule> schedule, starling_schedule_t* out) {
  auto state = std::make_shared<ScheduleState>();
  state->schedule = std::move(schedule);
  *out = Schedules().Add(std::move(state));
}

void CopyInts(const std::vector<int>& from, int* to) { std::copy(from.begin(), from.end(), to); }

starling_status_t Neighbors(starling_topology_t topo, int rank, int* ranks, int capacity,
                            int* count, bool in) {
  STARLING_API_BEGIN();
  CopyNeighbors(*TopologyFromHandle(topo), rank, ranks, capacity, count, in);
  STARLING_API_END();
}

starling_status_t Weights(starling_topology_t topo, int rank, double* self_weight, int* ranks,
                          double* weights, int capacity, int* count, bool recv) {
  STARLING_API_BEGIN();
  CheckOut(self_weight, "self_weight");
  CheckOut(count, "count");
  CheckArray(ranks, capacity, "ranks", "capacity");
  CheckArray(weights, capacity, "weights", "capacity");
  const auto graph = TopologyFromHandle(topo);
  const topology::NeighborWeights nw = recv ? graph->recv_weights(rank) : graph->send_weights(rank);
  *self_weight = nw.self_weight;
  SetNeighborCount(rank, nw.ranks.size(), capacity, count, /*in=*/recv);
  CopyInts(nw.ranks, ranks);
  std::copy(nw.weights.begin(), nw.weights.end(), weights);
  STARLING_API_END();
}

}  // namespace

void CopyNeighbors(const Graph& graph, int rank, int* ranks, int capacity, int* count, bool in) {
  CheckOut(count, "count");
  CheckArray(ranks, capacity, "ranks", "capacity");
  const std::vector<int> list = in ? graph.in_neighbors(rank) : graph.out_neighbors(rank);
  SetNeighborCount(rank, list.size(), capacity, count, in);
  CopyInts(list, ranks);
}

starling_topology_t TopologyToHandle(std::shared_ptr<const Graph> graph) {
  return Topologies().Add(std::move(graph));
}

std::shared_ptr<const Graph> TopologyFromHandle(starling_topology_t topo) {
  return Topologies().Get(topo);
}

}  // namespace starling::capi

using starling::capi::CheckArray;
using starling::capi::CheckOut;
using starling::capi::ClearOut;
using starling::capi::PublishSchedule;
using starling::capi::PublishTopology;
using starling::capi::TopologyFromHandle;
namespace topology = starling::topology;

extern "C" {

// ---- topologies ---------------------------------------------------------------------

STARLING_API starling_status_t starling_topology_create(int size, int num_edges, const int* sources,
                                                        const int* destinations,
                                                        const double* weights,
                                                        starling_topology_t* out) {
  STARLING_API_BEGIN();
  ClearOut(out);
  STARLING_CHECK_ARG(num_edges >= 0, "num_edges must be >= 0, got ", num_edges);
  STARLING_CHECK_ARG(num_edges == 0 || (sources != nullptr && destinations != nullptr),
                     "sources and destinations must not be NULL when num_edges is ", num_edges);
  std::vector<topology::Edge> edges(num_edges);
  for (int k = 0; k < num_edges; ++k) {
    edges[k] = {sources[k], destinations[k], weights != nullptr ? weights[k] : 1.0};
  }
  PublishTopology(topology::Graph::FromEdges(size, std::move(edges)), out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_exponential_two(int size,
                                                                 starling_topology_t* out) {
  STARLING_API_BEGIN();
  PublishTopology(topology::ExponentialTwo(size), ClearOut(out));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_exponential(int size, int base,
                                                             starling_topology_t* out) {
  STARLING_API_BEGIN();
  PublishTopology(topology::Exponential(size, base), ClearOut(out));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_symmetric_exponential(int size, int base,
                                                                       starling_topology_t* out) {
  STARLING_API_BEGIN();
  PublishTopology(topology::SymmetricExponential(size, base), ClearOut(out));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_mesh_grid_2d(int size, int rows, int cols,
                                                              starling_topology_t* out) {
  STARLING_API_BEGIN();
  PublishTopology(topology::MeshGrid2D(size, rows, cols), ClearOut(out));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_star(int size, int center,
                                                      starling_topology_t* out) {
  STARLING_API_BEGIN();
  PublishTopology(topology::Star(size, center), ClearOut(out));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_ring(int size, starling_ring_style_t style,
                                                      starling_topology_t* out) {
  STARLING_API_BEGIN();
  PublishTopology(topology::Ring(size, starling::capi::EnumValue(style)), ClearOut(out));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_fully_connected(int size,
                                                                 starling_topology_t* out) {
  STARLING_API_BEGIN();
  PublishTopology(topology::FullyConnected(size), ClearOut(out));
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_free(starling_topology_t topo) {
  STARLING_API_BEGIN();
  starling::capi::Topologies().Take(topo);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_size(starling_topology_t topo, int* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = TopologyFromHandle(topo)->size();
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_num_edges(starling_topology_t topo, int* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = static_cast<int>(TopologyFromHandle(topo)->edges().size());
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_edges(starling_topology_t topo, int* sources,
                                                       int* destinations, double* weights,
                                                       int capacity) {
  STARLING_API_BEGIN();
  CheckArray(sources, capacity, "sources", "capacity");
  CheckArray(destinations, capacity, "destinations", "capacity");
  CheckArray(weights, capacity, "weights", "capacity");
  const auto graph = TopologyFromHandle(topo);
  const std::vector<topology::Edge>& edges = graph->edges();
  STARLING_CHECK_ARG(edges.size() <= static_cast<size_t>(capacity), "the topology has ",
                     edges.size(), " edges but capacity is ", capacity,
                     " (see starling_topology_num_edges)");
  for (size_t k = 0; k < edges.size(); ++k) {
    sources[k] = edges[k].src;
    destinations[k] = edges[k].dst;
    weights[k] = edges[k].weight;
  }
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_in_neighbors(starling_topology_t topo, int rank,
                                                              int* ranks, int capacity,
                                                              int* count) {
  return starling::capi::Neighbors(topo, rank, ranks, capacity, count, /*in=*/true);
}

STARLING_API starling_status_t starling_topology_out_neighbors(starling_topology_t topo, int rank,
                                                               int* ranks, int capacity,
                                                               int* count) {
  return starling::capi::Neighbors(topo, rank, ranks, capacity, count, /*in=*/false);
}

STARLING_API starling_status_t starling_topology_recv_weights(starling_topology_t topo, int rank,
                                                              double* self_weight, int* ranks,
                                                              double* weights, int capacity,
                                                              int* count) {
  return starling::capi::Weights(topo, rank, self_weight, ranks, weights, capacity, count,
                                 /*recv=*/true);
}

STARLING_API starling_status_t starling_topology_send_weights(starling_topology_t topo, int rank,
                                                              double* self_weight, int* ranks,
                                                              double* weights, int capacity,
                                                              int* count) {
  return starling::capi::Weights(topo, rank, self_weight, ranks, weights, capacity, count,
                                 /*recv=*/false);
}

STARLING_API starling_status_t starling_topology_is_regular(starling_topology_t topo, int* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  *out = TopologyFromHandle(topo)->IsRegular() ? 1 : 0;
  STARLING_API_END();
}

STARLING_API starling_status_t starling_topology_is_equivalent(starling_topology_t a,
                                                               starling_topology_t b, int* out) {
  STARLING_API_BEGIN();
  CheckOut(out, "out");
  const auto graph_a = TopologyFromHandle(a);
  const auto graph_b = TopologyFromHandle(b);
  *out = graph_a->Equals(*graph_b) ? 1 : 0;
  STARLING_API_END();
}

// ---- dynamic schedules --------------------------------------------------------------

STARLING_API starling_status_t starling_schedule_dynamic_one_peer(starling_topology_t topo,
                                                                  int rank,
                                                                  starling_schedule_t* out) {
  STARLING_API_BEGIN();
  ClearOut(out);
  PublishSchedule(topology::DynamicOnePeer(*TopologyFromHandle(topo), rank), out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_schedule_exp2_machine(int world_size, int local_size,
                                                              int rank, int local_rank,
                                                              starling_schedule_t* out) {
  STARLING_API_BEGIN();
  ClearOut(out);
  PublishSchedule(topology::Exp2Machine(world_size, local_size, rank, local_rank), out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_schedule_inner_outer_ring(int world_size, int local_size,
                                                                  int rank,
                                                                  starling_schedule_t* out) {
  STARLING_API_BEGIN();
  ClearOut(out);
  PublishSchedule(topology::InnerOuterRing(world_size, local_size, rank), out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_schedule_inner_outer_expo2(int world_size, int local_size,
                                                                   int rank,
                                                                   starling_schedule_t* out) {
  STARLING_API_BEGIN();
  ClearOut(out);
  PublishSchedule(topology::InnerOuterExpo2(world_size, local_size, rank), out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_schedule_fast_pairs(int world_size, int rank, const double* link_seconds,
                                                            int num_link_seconds, double threshold_seconds,
                                                            starling_schedule_t* out) {
  STARLING_API_BEGIN();
  ClearOut(out);
  CheckArray(link_seconds, num_link_seconds, "link_seconds", "num_link_seconds");
  PublishSchedule(topology::FastPairs(world_size, rank,
                                      std::vector<double>(link_seconds, link_seconds + num_link_seconds),
                                      threshold_seconds),
                  out);
  STARLING_API_END();
}

STARLING_API starling_status_t starling_schedule_next(starling_schedule_t sched, int* send_ranks,
                                                      int send_capacity, int* send_count,
                                                      int* recv_ranks, int recv_capacity,
                                                      int* recv_count) {
  STARLING_API_BEGIN();
  CheckOut(send_count, "send_count");
  CheckOut(recv_count, "recv_count");
  CheckArray(send_ranks, send_capacity, "send_ranks", "send_capacity");
  CheckArray(recv_ranks, recv_capacity, "recv_ranks", "recv_capacity");
  const auto state = starling::capi::Schedules().Get(sched);
  std::lock_guard<std::mutex> lock(state->mutex);
  if (!state->pending) state->pending = state->schedule->Next();
  const topology::Step& step = *state->pending;
  *send_count = static_cast<int>(step.send.size());
  *recv_count = static_cast<int>(step.recv.size());
  STARLING_CHECK_ARG(step.send.size() <= static_cast<size_t>(send_capacity), "this step has ",
                     step.send.size(), " send rank(s) but send_capacity is ", send_capacity,
                     "; the schedule did not advance");
  STARLING_CHECK_ARG(step.recv.size() <= static_cast<size_t>(recv_capacity), "this step has ",
                     step.recv.size(), " recv rank(s) but recv_capacity is ", recv_capacity,
                     "; the schedule did not advance");
  std::copy(step.send.begin(), step.send.end(), send_ranks);
  std::copy(step.recv.begin(), step.recv.end(), recv_ranks);
  state->pending.reset();
  STARLING_API_END();
}

STARLING_API starling_status_t starling_schedule_free(starling_schedule_t sched) {
  STARLING_API_BEGIN();
  starling::capi::Schedules().Take(sched);
  STARLING_API_END();
}

}  // extern "C"
