#include "impl/topology/regenerate.h"

#include <functional>
#include <optional>
#include <utility>

#include "impl/common/error.h"

namespace starling::topology {

std::optional<Graph> SameGenerator(const Graph& old, int new_size, std::string* how) {
  using Generator = std::function<Graph(int)>;
  std::vector<std::pair<std::string, Generator>> generators = {
      {"exponential-two", [](int n) { return ExponentialTwo(n); }},
      {"mesh grid 2D", [](int n) { return MeshGrid2D(n, 0, 0); }},
      {"star (center 0)", [](int n) { return Star(n, 0); }},
      {"ring (bidirectional)", [](int n) { return Ring(n, 0); }},
      {"ring (left)", [](int n) { return Ring(n, 1); }},
      {"ring (right)", [](int n) { return Ring(n, 2); }},
      {"fully connected", [](int n) { return FullyConnected(n); }},
  };
  for (int base = 2; base <= 4; ++base) {
    generators.push_back({Str("exponential (base ", base, ")"), [base](int n) { return Exponential(n, base); }});
    generators.push_back({Str("symmetric exponential (base ", base, ")"),
                          [base](int n) { return SymmetricExponential(n, base); }});
  }
  for (const auto& [name, make] : generators) {
    bool same = false;
    try {
      same = make(old.size()).Equals(old);
    } catch (const Error&) {
      continue;  // this generator does not take that size
    }
    if (!same) continue;
    try {
      Graph graph = make(new_size);
      if (how) *how = name;
      return graph;
    } catch (const Error&) {
      break;  // not for the new size
    }
  }
  return std::nullopt;
}

Graph Regenerate(const Graph& old, const std::vector<int>& old_to_new, int new_size, std::string* how) {
  if (std::optional<Graph> same = SameGenerator(old, new_size, how)) return std::move(*same);
  std::vector<Edge> edges;
  for (const Edge& e : old.edges()) {
    const int src = old_to_new[static_cast<size_t>(e.src)], dst = old_to_new[static_cast<size_t>(e.dst)];
    if (src >= 0 && dst >= 0) edges.push_back({src, dst, e.weight});
  }
  if (how) *how = "induced subgraph";
  return Graph::FromEdges(new_size, std::move(edges));
}

}  // namespace starling::topology
