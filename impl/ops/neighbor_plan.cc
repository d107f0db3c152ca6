#include "impl/ops/neighbor_plan.h"

#include <cmath>
#include <cstring>
#include <set>

#include "impl/common/error.h"

namespace starling::ops {
namespace {

std::string List(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += Str(s.empty() ? "" : ", ", r);
  return s.empty() ? "none" : s;
}

void CheckWeight(double w, const char* what, int id, const char* unit) {
  STARLING_CHECK_ARG(std::isfinite(w) && w >= 0, what, " for ", unit, " ", id, " is ", w,
                     "; weights must be finite and >= 0");
}

// Ranks in [0, n), never `me`, no repeats.
void CheckPeers(const std::vector<int>& ids, int n, int me, const char* what, const char* unit) {
  std::set<int> seen;
  for (int id : ids) {
    STARLING_CHECK_ARG(id >= 0 && id < n, what, " contains ", unit, " ", id, ", out of range [0, ", n, ")");
    STARLING_CHECK_ARG(id != me, what, " contains this ", unit, " (", me, "); self is weighted by self_weight");
    STARLING_CHECK_ARG(seen.insert(id).second, what, " contains ", unit, " ", id, " twice");
  }
}

std::string KeyOf(const NeighborPlan& plan) {
  const auto& send_ranks = plan.send_ranks;
  const auto& send_weights = plan.send_weights;
  const auto& recv_ranks = plan.recv_ranks;
  const auto& recv_weights = plan.recv_weights;
  const double self_weight = plan.self_weight;
  const bool uniform = plan.uniform, dynamic = plan.dynamic, check = plan.check;
  std::string key;
  auto put = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  auto put_ints = [&](const std::vector<int>& v) {
    const size_t n = v.size();
    put(&n, sizeof n);
    put(v.data(), n * sizeof(int));
  };
  auto put_doubles = [&](const std::vector<double>& v) {
    const size_t n = v.size();
    put(&n, sizeof n);
    put(v.data(), n * sizeof(double));
  };
  put_ints(send_ranks);
  put_doubles(send_weights);
  put_ints(recv_ranks);
  put_doubles(recv_weights);
  put(&self_weight, sizeof self_weight);
  const char flags[3] = {uniform, dynamic, check};
  put(flags, sizeof flags);
  return key;
}


// The plan itself (MakeNeighborPlan adds the key).
NeighborPlan BuildPlan(const topology::Graph& graph, bool weighted, int me, const NeighborArgs& args,
                       const char* unit) {
  const int n = graph.size();
  NeighborPlan plan;
  plan.dynamic = args.dynamic;
  STARLING_CHECK_ARG(args.source_weights.size() == args.sources.size(), "source_weights has ",
                     args.source_weights.size(), " entries for ", args.sources.size(), " sources");
  if (args.use_weights) {
    CheckWeight(args.self_weight, "self_weight", me, unit);
    for (size_t i = 0; i < args.sources.size(); ++i) CheckWeight(args.source_weights[i], "source weight", args.sources[i], unit);
  }

  if (!args.dynamic) {
    STARLING_CHECK_ARG(args.destinations.empty() && args.destination_weights.empty(),
                       "destination_ranks are only used in dynamic mode (set dynamic = 1)");
    plan.send_ranks = graph.out_neighbors(me);
    plan.send_weights.assign(plan.send_ranks.size(), 1.0);
    plan.recv_ranks = graph.in_neighbors(me);
    if (!args.use_weights) {
      STARLING_CHECK_ARG(args.sources.empty(), "source_ranks are given but use_weights is 0");
      if (weighted) {
        const topology::NeighborWeights w = graph.recv_weights(me);
        plan.self_weight = w.self_weight;
        plan.recv_weights = w.weights;
      } else {
        plan.uniform = true;
        plan.recv_weights.assign(plan.recv_ranks.size(), 1.0);
      }
      return plan;
    }
    // Explicit weights: listed in-neighbors get theirs, the others 0 (they still send).
    CheckPeers(args.sources, n, me, "source_ranks", unit);
    plan.self_weight = args.self_weight;
    plan.recv_weights.assign(plan.recv_ranks.size(), 0.0);
    for (size_t i = 0; i < args.sources.size(); ++i) {
      const int id = args.sources[i];
      size_t j = 0;
      while (j < plan.recv_ranks.size() && plan.recv_ranks[j] != id) ++j;
      STARLING_CHECK_ARG(j < plan.recv_ranks.size(), unit, " ", id, " is not an in-neighbor of ", unit, " ", me,
                         " (in-neighbors: ", List(plan.recv_ranks),
                         "); in static mode weights name in-neighbors only (use dynamic mode for other ", unit, "s)");
      plan.recv_weights[j] = args.source_weights[i];
    }
    return plan;
  }

  STARLING_CHECK_ARG(args.use_weights, "dynamic mode needs self_weight and source_weights (set use_weights = 1)");
  CheckPeers(args.sources, n, me, "source_ranks", unit);
  CheckPeers(args.destinations, n, me, "destination_ranks", unit);
  STARLING_CHECK_ARG(args.destination_weights.empty() || args.destination_weights.size() == args.destinations.size(),
                     "destination_weights has ", args.destination_weights.size(), " entries for ",
                     args.destinations.size(), " destinations");
  plan.self_weight = args.self_weight;
  plan.recv_ranks = args.sources;
  plan.recv_weights = args.source_weights;
  plan.send_ranks = args.destinations;
  plan.send_weights = args.destination_weights.empty() ? std::vector<double>(args.destinations.size(), 1.0)
                                                       : args.destination_weights;
  for (size_t i = 0; i < plan.send_ranks.size(); ++i) CheckWeight(plan.send_weights[i], "destination weight", plan.send_ranks[i], unit);
  plan.check = args.check_topology;
  return plan;
}

}  // namespace

NeighborPlan MakeNeighborPlan(const topology::Graph& graph, bool weighted, int me, const NeighborArgs& args,
                              const char* unit) {
  NeighborPlan plan = BuildPlan(graph, weighted, me, args, unit);
  plan.key = KeyOf(plan);
  return plan;
}

}  // namespace starling::ops
