// The topology a repair installs: the same generator over the survivors, or the
// subgraph they induce.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "impl/common/error.h"
#include "impl/topology/regenerate.h"

namespace starling::topology {
namespace {

std::vector<int> Drop(int size, int dead) {
  std::vector<int> map(static_cast<size_t>(size));
  for (int r = 0, n = 0; r < size; ++r) map[static_cast<size_t>(r)] = r == dead ? -1 : n++;
  return map;
}

TEST(Regenerate, SameGeneratorOverTheNewSize) {
  struct Case {
    Graph old_graph;
    Graph expected;
    std::string name;
  };
  const std::vector<Case> cases = {
      {Exponential(8, 2), Exponential(7, 2), "exponential"},
      {ExponentialTwo(4), ExponentialTwo(3), "exponential-two"},
      {SymmetricExponential(6, 3), SymmetricExponential(5, 3), "symmetric exponential (base 3)"},
      {Ring(5, 0), Ring(4, 0), "ring (bidirectional)"},
      {Ring(5, 2), Ring(4, 2), "ring (right)"},
      {FullyConnected(4), FullyConnected(3), "fully connected"},
      {Star(4, 0), Star(3, 0), "star (center 0)"},
  };
  for (const Case& c : cases) {
    std::string how;
    const Graph got = Regenerate(c.old_graph, Drop(c.old_graph.size(), 1), c.old_graph.size() - 1, &how);
    EXPECT_TRUE(got.Equals(c.expected)) << c.name << " became " << how;
    EXPECT_NE(how.find(c.name.substr(0, 6)), std::string::npos) << how;
  }
}

TEST(Regenerate, OtherGraphsBecomeTheInducedSubgraph) {
  // 0 -> 1 (0.5), 1 -> 2 (0.25), 2 -> 0 (1), 0 -> 2 (0.75), 3 -> 0 (2): no generator.
  const Graph g = Graph::FromEdges(4, {{0, 1, 0.5}, {1, 2, 0.25}, {2, 0, 1.0}, {0, 2, 0.75}, {3, 0, 2.0}});
  std::string how;
  const Graph got = Regenerate(g, Drop(4, 1), 3, &how);  // 0 -> 0, 2 -> 1, 3 -> 2
  EXPECT_EQ(how, "induced subgraph");
  EXPECT_TRUE(got.Equals(Graph::FromEdges(3, {{1, 0, 1.0}, {0, 1, 0.75}, {2, 0, 2.0}})));
}

TEST(Regenerate, DownToOneRank) {
  std::string how;
  EXPECT_EQ(Regenerate(Exponential(2, 2), Drop(2, 0), 1, &how).size(), 1);
}

}  // namespace
}  // namespace starling::topology
