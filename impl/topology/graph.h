// Weighted directed graphs over ranks and BlueFog's static graph generators
// (bluefog.common.topology_util). Edge src -> dst with weight w means rank dst
// receives rank src's tensor scaled by w; an edge r -> r is r's self weight.
// Graphs are immutable values, so one Graph may be shared freely between threads.
#pragma once

#include <cstddef>
#include <vector>

namespace starling::topology {

struct Edge {
  int src;
  int dst;
  double weight;
};

// The weights one rank combines with: its self weight (0 without a self-loop) and
// one weight per neighbor, neighbors in ascending rank order.
struct NeighborWeights {
  double self_weight = 0.0;
  std::vector<int> ranks;
  std::vector<double> weights;
};

class Graph {
 public:
  // Validates: size >= 1; ranks in [0, size); weights finite and >= 0; no repeated
  // (src, dst) edge. Throws Error(kInvalidArgument) naming the bad edge.
  static Graph FromEdges(int size, std::vector<Edge> edges);
  // From a dense row-major size*size matrix: edge i -> j iff m[i*size+j] != 0
  // (BlueFog's convention: row = sender, column = receiver).
  static Graph FromMatrix(int size, const std::vector<double>& m);

  int size() const { return size_; }
  // Sorted by (src, dst), self-loops included.
  const std::vector<Edge>& edges() const { return edges_; }
  double weight(int src, int dst) const;  // 0 if there is no such edge
  bool has_edge(int src, int dst) const;
  // Ascending, self excluded. Every rank argument must be in [0, size).
  std::vector<int> in_neighbors(int rank) const;
  std::vector<int> out_neighbors(int rank) const;
  bool has_self_loop(int rank) const;
  // BlueFog's GetRecvWeights: weight of neighbor -> rank per in-neighbor.
  NeighborWeights recv_weights(int rank) const;
  // BlueFog's GetSendWeights: weight of rank -> neighbor per out-neighbor.
  NeighborWeights send_weights(int rank) const;
  // BlueFog's IsRegularGraph: networkx DiGraph degree (in + out, a self-loop counts
  // twice) is the same for every rank.
  bool IsRegular() const;
  // BlueFog's IsTopologyEquivalent: same size and exactly the same weighted edges.
  bool Equals(const Graph& other) const;
  std::vector<double> ToMatrix() const;  // dense row-major size*size

  // Appends the size and edges to a message between ranks (impl/common/bytes.h), and
  // reads them back (validated as by FromEdges; `what` names the message).
  void AppendTo(std::vector<char>* out) const;
  static Graph ReadFrom(const std::vector<char>& in, size_t* at, const char* what);

 private:
  // Per-rank adjacency, self excluded, ascending, so queries cost O(degree).
  struct Adjacency {
    std::vector<int> ranks;
    std::vector<double> weights;
  };

  Graph() = default;
  void CheckRank(int rank, const char* what) const;

  int size_ = 0;
  std::vector<Edge> edges_;
  std::vector<Adjacency> in_;
  std::vector<Adjacency> out_;
  std::vector<double> self_weight_;
  std::vector<char> has_self_;
};

// Static generators, same edges and weights (bit for bit) as BlueFog's. Bad
// parameters throw Error(kInvalidArgument).
Graph ExponentialTwo(int size);
Graph Exponential(int size, int base);           // base >= 2
Graph SymmetricExponential(int size, int base);  // base >= 2
Graph MeshGrid2D(int size, int rows, int cols);  // rows = cols = 0: automatic shape
Graph Star(int size, int center);
Graph Ring(int size, int style);  // 0 bidirectional, 1 left, 2 right
Graph FullyConnected(int size);

// True iff x == base^k for some k >= 0 (x >= 1, base >= 2), tested exactly.
bool IsPowerOf(long long x, long long base);

}  // namespace starling::topology
