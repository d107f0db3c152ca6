// The topology after ranks failed (starling_context_repair): the same generator over
// the survivors, or, for a graph no generator makes, the subgraph they induce.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "impl/topology/graph.h"

namespace starling::topology {

// old_to_new[r] is rank r's new number or -1 (failed); new_size survivors. If `old` is
// exactly what one of the generators makes for its size (tried: exponential-two,
// exponential and symmetric exponential with bases 2-4, automatic mesh grid, star
// around 0, the three rings, fully connected), that generator over new_size;
// otherwise the survivors' induced subgraph, renumbered, weights unchanged.
// *how says which ("exponential(base 2)", "induced subgraph").
Graph Regenerate(const Graph& old, const std::vector<int>& old_to_new, int new_size, std::string* how);

// The generator that makes `old` (the list above), over new_size ranks; nullopt when
// no generator makes `old` or the generator does not take new_size (starling_context_grow).
std::optional<Graph> SameGenerator(const Graph& old, int new_size, std::string* how);

}  // namespace starling::topology
