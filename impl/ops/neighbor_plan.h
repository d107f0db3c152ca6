// Who a neighbor operation sends to and receives from, with which weights. Built and
// validated on the caller's thread from the topology snapshot and the call's args.
#pragma once

#include <string>
#include <vector>

#include "impl/topology/graph.h"

namespace starling::ops {

// The C args, copied (arrays included) so the caller's memory is not needed later.
struct NeighborArgs {
  bool use_weights = false;
  double self_weight = 0.0;
  std::vector<int> sources;
  std::vector<double> source_weights;
  bool dynamic = false;
  std::vector<int> destinations;
  std::vector<double> destination_weights;  // empty: 1.0 each
  bool check_topology = false;
  std::string name;
};

struct NeighborPlan {
  std::vector<int> send_ranks;      // ascending in static mode, as given in dynamic mode
  std::vector<double> send_weights; // scaling the receiver applies to what we send
  std::vector<int> recv_ranks;      // static: all in-neighbors, ascending; dynamic: as given
  std::vector<double> recv_weights; // aligned with recv_ranks (0: received, not used)
  double self_weight = 1.0;
  bool uniform = false;             // out = (x + sum of inputs) / (k + 1)
  bool dynamic = false;
  bool check = false;

  // Equal keys mean the same peers and weights: such operations may be fused. Set by
  // MakeNeighborPlan.
  std::string key;
};

// `me` is this rank's id in `graph` (a rank, or a machine id for hierarchical ops);
// `unit` names ids in messages ("rank" or "machine"). Throws Error(kInvalidArgument)
// naming the bad id or weight.
NeighborPlan MakeNeighborPlan(const topology::Graph& graph, bool weighted, int me, const NeighborArgs& args,
                              const char* unit);

}  // namespace starling::ops
