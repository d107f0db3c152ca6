// Access to the topologies behind starling_topology_t handles, for other parts of the
// C ABI glue (contexts take topologies as arguments).
#pragma once

#include <memory>

#include "impl/topology/graph.h"
#include "starling/starling.h"

namespace starling::capi {

// The graph behind a handle; it stays alive while the pointer is held, even if the
// handle is freed meanwhile. Throws Error(kInvalidHandle) for a NULL, freed or unknown
// handle.
std::shared_ptr<const topology::Graph> TopologyFromHandle(starling_topology_t topo);
// rank's in- (or out-) neighbors into ranks, following the list convention.
void CopyNeighbors(const topology::Graph& graph, int rank, int* ranks, int capacity, int* count, bool in);
// A new handle sharing `graph` (immutable, so sharing is safe).
starling_topology_t TopologyToHandle(std::shared_ptr<const topology::Graph> graph);

}  // namespace starling::capi
