// A group of ranks an algorithm runs over: the whole context, or one machine. Members
// are global ranks; algorithms address them by position, so the same dissemination,
// ring and chain code serves both.
#pragma once

#include <vector>

#include "impl/runtime/context.h"

namespace starling::ops {

struct Group {
  std::vector<int> ranks;  // members in group order
  int index = 0;           // this rank's position in `ranks`

  int size() const { return static_cast<int>(ranks.size()); }
  // The member `offset` positions after this rank (negative: before), cyclically.
  int peer(int offset) const {
    const int n = size();
    return ranks[static_cast<size_t>(((index + offset) % n + n) % n)];
  }
};

inline Group WorldGroup(const runtime::Context& context) {
  Group g;
  g.ranks.resize(static_cast<size_t>(context.size()));
  for (int r = 0; r < context.size(); ++r) g.ranks[static_cast<size_t>(r)] = r;
  g.index = context.rank();
  return g;
}

inline Group MachineGroup(const runtime::Context& context) {
  Group g;
  g.ranks = context.layout().machine_ranks;
  for (int i = 0; i < g.size(); ++i)
    if (g.ranks[static_cast<size_t>(i)] == context.rank()) g.index = i;
  return g;
}

}  // namespace starling::ops
