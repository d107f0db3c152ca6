#include "impl/topology/graph.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <utility>

#include "impl/common/bytes.h"
#include "impl/common/error.h"

namespace starling::topology {

// ---- Graph -----------------------------------------------------------------------

Graph Graph::FromEdges(int size, std::vector<Edge> edges) {
  STARLING_CHECK_ARG(size >= 1, "topology size must be >= 1, got ", size);
  STARLING_CHECK_ARG(edges.size() <= static_cast<size_t>(INT_MAX), "a topology has at most ",
                     INT_MAX, " edges, got ", edges.size());
  const int n = static_cast<int>(edges.size());
  for (int k = 0; k < n; ++k) {
    const Edge& e = edges[k];
    STARLING_CHECK_ARG(e.src >= 0 && e.src < size, "edge ", k, " (", e.src, " -> ", e.dst,
                       "): source rank ", e.src, " is out of range for size ", size);
    STARLING_CHECK_ARG(e.dst >= 0 && e.dst < size, "edge ", k, " (", e.src, " -> ", e.dst,
                       "): destination rank ", e.dst, " is out of range for size ", size);
    STARLING_CHECK_ARG(std::isfinite(e.weight) && e.weight >= 0.0, "edge ", k, " (", e.src, " -> ",
                       e.dst, ") has weight ", e.weight, "; weights must be finite and >= 0");
  }
  // Sort a permutation (stable) so a repeated edge is reported by its original indices.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::make_pair(edges[a].src, edges[a].dst) < std::make_pair(edges[b].src, edges[b].dst);
  });
  for (int k = 1; k < n; ++k) {
    const Edge& prev = edges[order[k - 1]];
    const Edge& cur = edges[order[k]];
    STARLING_CHECK_ARG(prev.src != cur.src || prev.dst != cur.dst, "edge ", order[k], " (", cur.src,
                       " -> ", cur.dst, ") repeats edge ", order[k - 1]);
  }

  Graph g;
  g.size_ = size;
  g.edges_.reserve(n);
  for (int k : order) g.edges_.push_back(edges[k]);
  g.in_.resize(size);
  g.out_.resize(size);
  g.self_weight_.assign(size, 0.0);
  g.has_self_.assign(size, 0);
  // Edges are sorted by (src, dst), so every list below comes out ascending.
  for (const Edge& e : g.edges_) {
    if (e.src == e.dst) {
      g.self_weight_[e.src] = e.weight;
      g.has_self_[e.src] = 1;
    } else {
      g.out_[e.src].ranks.push_back(e.dst);
      g.out_[e.src].weights.push_back(e.weight);
      g.in_[e.dst].ranks.push_back(e.src);
      g.in_[e.dst].weights.push_back(e.weight);
    }
  }
  return g;
}

// One edge on the wire: src and dst as int32, the weight as a double.
constexpr size_t kEncodedEdgeBytes = 2 * sizeof(int32_t) + sizeof(double);

void Graph::AppendTo(std::vector<char>* out) const {
  PutBytes<int32_t>(out, size_);
  PutBytes<int64_t>(out, static_cast<int64_t>(edges_.size()));
  for (const Edge& e : edges_) {
    PutBytes<int32_t>(out, e.src);
    PutBytes<int32_t>(out, e.dst);
    PutBytes<double>(out, e.weight);
  }
}

Graph Graph::ReadFrom(const std::vector<char>& in, size_t* at, const char* what) {
  const int size = TakeBytes<int32_t>(in, at, what);
  const int64_t count = TakeBytes<int64_t>(in, at, what);
  STARLING_CHECK(count >= 0 && static_cast<size_t>(count) <= (in.size() - *at) / kEncodedEdgeBytes,
                 Code::kInternal, what, ": bad edge count ", count);
  std::vector<Edge> edges;
  edges.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    Edge e{};
    e.src = TakeBytes<int32_t>(in, at, what);
    e.dst = TakeBytes<int32_t>(in, at, what);
    e.weight = TakeBytes<double>(in, at, what);
    edges.push_back(e);
  }
  return FromEdges(size, std::move(edges));
}

Graph Graph::FromMatrix(int size, const std::vector<double>& m) {
  STARLING_CHECK_ARG(size >= 1, "topology size must be >= 1, got ", size);
  const long long expected = static_cast<long long>(size) * size;
  STARLING_CHECK_ARG(static_cast<long long>(m.size()) == expected, "matrix has ", m.size(),
                     " entries, expected size * size = ", expected);
  std::vector<Edge> edges;
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) {
      const double w = m[static_cast<size_t>(i) * size + j];
      if (w == 0.0) continue;
      STARLING_CHECK_ARG(std::isfinite(w) && w > 0.0, "matrix entry [", i, "][", j, "] has weight ",
                         w, "; weights must be finite and >= 0");
      edges.push_back({i, j, w});
    }
  }
  return FromEdges(size, std::move(edges));
}

void Graph::CheckRank(int rank, const char* what) const {
  STARLING_CHECK_ARG(rank >= 0 && rank < size_, what, " ", rank,
                     " is out of range for a topology of size ", size_);
}

double Graph::weight(int src, int dst) const {
  CheckRank(src, "source rank");
  CheckRank(dst, "destination rank");
  if (src == dst) return self_weight_[src];
  const Adjacency& out = out_[src];
  auto it = std::lower_bound(out.ranks.begin(), out.ranks.end(), dst);
  if (it == out.ranks.end() || *it != dst) return 0.0;
  return out.weights[it - out.ranks.begin()];
}

bool Graph::has_edge(int src, int dst) const {
  CheckRank(src, "source rank");
  CheckRank(dst, "destination rank");
  if (src == dst) return has_self_[src] != 0;
  return std::binary_search(out_[src].ranks.begin(), out_[src].ranks.end(), dst);
}

std::vector<int> Graph::in_neighbors(int rank) const {
  CheckRank(rank, "rank");
  return in_[rank].ranks;
}

std::vector<int> Graph::out_neighbors(int rank) const {
  CheckRank(rank, "rank");
  return out_[rank].ranks;
}

bool Graph::has_self_loop(int rank) const {
  CheckRank(rank, "rank");
  return has_self_[rank] != 0;
}

NeighborWeights Graph::recv_weights(int rank) const {
  CheckRank(rank, "rank");
  return {self_weight_[rank], in_[rank].ranks, in_[rank].weights};
}

NeighborWeights Graph::send_weights(int rank) const {
  CheckRank(rank, "rank");
  return {self_weight_[rank], out_[rank].ranks, out_[rank].weights};
}

bool Graph::IsRegular() const {
  auto degree = [&](int r) {
    return in_[r].ranks.size() + out_[r].ranks.size() + 2 * static_cast<size_t>(has_self_[r]);
  };
  for (int r = 1; r < size_; ++r) {
    if (degree(r) != degree(0)) return false;
  }
  return true;
}

bool Graph::Equals(const Graph& other) const {
  if (size_ != other.size_ || edges_.size() != other.edges_.size()) return false;
  for (size_t k = 0; k < edges_.size(); ++k) {
    const Edge& a = edges_[k];
    const Edge& b = other.edges_[k];
    if (a.src != b.src || a.dst != b.dst || a.weight != b.weight) return false;
  }
  return true;
}

std::vector<double> Graph::ToMatrix() const {
  std::vector<double> m(static_cast<size_t>(size_) * size_, 0.0);
  for (const Edge& e : edges_) m[static_cast<size_t>(e.src) * size_ + e.dst] = e.weight;
  return m;
}

// ---- generators --------------------------------------------------------------------

namespace {

void CheckSize(int size, const char* graph) {
  STARLING_CHECK_ARG(size >= 1, graph, " size must be >= 1, got ", size);
}

void CheckBase(int base, const char* graph) {
  STARLING_CHECK_ARG(base >= 2, graph, " base must be >= 2, got ", base);
}

void CheckEdgeCount(long long edges, const char* graph, int size) {
  STARLING_CHECK_ARG(edges <= INT_MAX, graph, " of size ", size, " would have ", edges,
                     " edges, more than the maximum ", INT_MAX);
}

struct Offset {
  int offset;
  double weight;
};

// BlueFog's circulant construction topo[i] = np.roll(x, i): rank i sends to
// (i + offset) mod size for every non-zero entry of the first row x.
Graph Circulant(const char* graph, int size, const std::vector<Offset>& row) {
  CheckEdgeCount(static_cast<long long>(size) * static_cast<long long>(row.size()), graph, size);
  std::vector<Edge> edges;
  edges.reserve(static_cast<size_t>(size) * row.size());
  for (int i = 0; i < size; ++i) {
    for (const Offset& o : row) {
      edges.push_back(
          {i, static_cast<int>((static_cast<long long>(i) + o.offset) % size), o.weight});
    }
  }
  return Graph::FromEdges(size, std::move(edges));
}

// BlueFog normalizes a 0/1 first row with `x /= x.sum()`; the sum of ones is exact, so
// every weight is 1.0 / count, correctly rounded, as numpy gives it.
Graph UniformCirculant(const char* graph, int size, const std::vector<int>& offsets) {
  const double w = 1.0 / static_cast<double>(offsets.size());
  std::vector<Offset> row;
  for (int d : offsets) row.push_back({d, w});
  return Circulant(graph, size, row);
}

struct Entry {
  long long pos;
  double value;
};

// numpy's pairwise summation (pairwise_sum in numpy's loops_utils.h) over a row of n
// values that are zero except at `entries` (ascending positions in [lo, lo + n)).
// Adding 0.0 never changes a partial sum, so visiting only the non-zero entries gives
// the same bits as np.sum over the dense row.
double PairwiseSum(const Entry* first, const Entry* last, long long lo, long long n) {
  if (first == last) return 0.0;
  if (n < 8) {
    double res = 0.0;
    for (const Entry* p = first; p != last; ++p) res += p->value;
    return res;
  }
  if (n <= 128) {
    double r[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // 8 accumulators, strided by 8
    const long long unrolled_end = lo + n - n % 8;
    const Entry* p = first;
    for (; p != last && p->pos < unrolled_end; ++p) r[(p->pos - lo) % 8] += p->value;
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; p != last; ++p) res += p->value;  // the n % 8 tail, in order
    return res;
  }
  long long n2 = n / 2;
  n2 -= n2 % 8;
  const Entry* mid = std::lower_bound(first, last, lo + n2,
                                      [](const Entry& e, long long pos) { return e.pos < pos; });
  return PairwiseSum(first, mid, lo, n2) + PairwiseSum(mid, last, lo + n2, n - n2);
}

// np.sum of a dense row: the reduction starts from the identity 0.0.
double NumpyRowSum(const std::vector<Entry>& entries, long long n) {
  return 0.0 + PairwiseSum(entries.data(), entries.data() + entries.size(), 0, n);
}

}  // namespace

bool IsPowerOf(long long x, long long base) {
  if (x < 1 || base < 2) return false;
  while (x % base == 0) x /= base;
  return x == 1;
}

Graph ExponentialTwo(int size) {
  CheckSize(size, "exponential-two graph");
  std::vector<int> offsets;
  for (int i = 0; i < size; ++i) {
    if ((i & (i - 1)) == 0) offsets.push_back(i);  // 0 and every power of two
  }
  return UniformCirculant("exponential-two graph", size, offsets);
}

// Deliberate difference from BlueFog: its isPowerOf tests
// `base ** int(math.log(x, base)) == x` in floating point, which misses exact powers
// such as 243 = 3^5 or 1000 = 10^3, so ExponentialGraph(size > 243, 3) lacks offset
// 243. IsPowerOf is exact; the graphs agree wherever BlueFog's float test is right.
Graph Exponential(int size, int base) {
  CheckSize(size, "exponential graph");
  CheckBase(base, "exponential graph");
  std::vector<int> offsets = {0};
  for (int i = 1; i < size; ++i) {
    if (IsPowerOf(i, base)) offsets.push_back(i);
  }
  return UniformCirculant("exponential graph", size, offsets);
}

Graph SymmetricExponential(int size, int base) {
  CheckSize(size, "symmetric exponential graph");
  CheckBase(base, "symmetric exponential graph");
  std::vector<int> offsets = {0};
  for (int i = 1; i < size; ++i) {
    const int distance = i <= size / 2 ? i : size - i;  // ring distance to offset i
    if (IsPowerOf(distance, base)) offsets.push_back(i);
  }
  return UniformCirculant("symmetric exponential graph", size, offsets);
}

Graph MeshGrid2D(int size, int rows, int cols) {
  CheckSize(size, "mesh grid");
  if (rows == 0 && cols == 0) {
    // BlueFog: i = int(sqrt(size)), decremented until it divides size; rows <= cols.
    long long i = static_cast<long long>(std::sqrt(static_cast<double>(size)));
    while (i * i > size) --i;
    while ((i + 1) * (i + 1) <= size) ++i;
    while (size % i != 0) --i;
    rows = static_cast<int>(i);
    cols = size / rows;
  }
  STARLING_CHECK_ARG(rows >= 1 && cols >= 1, "mesh shape ", rows, "x", cols,
                     " needs rows >= 1 and cols >= 1 (or rows = cols = 0 for an automatic shape)");
  STARLING_CHECK_ARG(static_cast<long long>(rows) * cols == size, "mesh shape ", rows, "x", cols,
                     " does not match size ", size);
  const int c = cols;
  auto degree = [&](int i) {  // grid neighbors plus self, as BlueFog counts them
    return 1 + (i >= c) + (i % c != 0) + ((i + 1) % c != 0) + (i + c < size);
  };
  std::vector<Edge> edges;
  std::vector<Entry> row;
  for (int i = 0; i < size; ++i) {
    int nbrs[5];
    int k = 0;
    if (i >= c) nbrs[k++] = i - c;
    if (i % c != 0) nbrs[k++] = i - 1;
    nbrs[k++] = i;
    if ((i + 1) % c != 0) nbrs[k++] = i + 1;
    if (i + c < size) nbrs[k++] = i + c;
    // Metropolis-Hastings: 1/max(deg_i, deg_j) off the diagonal. BlueFog then sets
    // topo[i][i] = 2.0 - topo[i].sum() while the diagonal still holds 1.0; numpy's
    // pairwise summation order is reproduced so the self weight has the same bits.
    row.clear();
    for (int t = 0; t < k; ++t) {
      const int j = nbrs[t];
      const double w = j == i ? 1.0 : 1.0 / static_cast<double>(std::max(degree(i), degree(j)));
      row.push_back({j, w});
    }
    const double self = 2.0 - NumpyRowSum(row, size);
    for (const Entry& e : row) {
      edges.push_back({i, static_cast<int>(e.pos), e.pos == i ? self : e.value});
    }
  }
  return Graph::FromEdges(size, std::move(edges));
}

Graph Star(int size, int center) {
  CheckSize(size, "star graph");
  STARLING_CHECK_ARG(center >= 0 && center < size, "star center ", center,
                     " is out of range for size ", size);
  // BlueFog's final matrix: the center row is all 1/size (its diagonal included); a
  // leaf keeps 1 - 1/size for itself and sends 1/size to the center.
  const double spoke = 1.0 / size;
  const double leaf_self = 1.0 - 1.0 / size;
  std::vector<Edge> edges;
  for (int i = 0; i < size; ++i) {
    if (i == center) {
      for (int j = 0; j < size; ++j) edges.push_back({center, j, spoke});
    } else {
      edges.push_back({i, i, leaf_self});
      edges.push_back({i, center, spoke});
    }
  }
  return Graph::FromEdges(size, std::move(edges));
}

Graph Ring(int size, int style) {
  CheckSize(size, "ring graph");
  STARLING_CHECK_ARG(style >= 0 && style <= 2, "ring style ", style,
                     " is not 0 (bidirectional), 1 (left) or 2 (right)");
  const char* graph = "ring graph";
  if (size == 1) return Circulant(graph, size, {{0, 1.0}});
  if (size == 2) return Circulant(graph, size, {{0, 0.5}, {1, 0.5}});  // any style
  switch (style) {
    case 0:
      return Circulant(graph, size, {{0, 1.0 / 3.0}, {1, 1.0 / 3.0}, {size - 1, 1.0 / 3.0}});
    case 1:
      return Circulant(graph, size, {{0, 0.5}, {size - 1, 0.5}});  // i sends to i - 1
    default:
      return Circulant(graph, size, {{0, 0.5}, {1, 0.5}});  // i sends to i + 1
  }
}

Graph FullyConnected(int size) {
  CheckSize(size, "fully connected graph");
  CheckEdgeCount(static_cast<long long>(size) * size, "fully connected graph", size);
  const double w = 1.0 / size;
  std::vector<Edge> edges;
  edges.reserve(static_cast<size_t>(size) * size);
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) edges.push_back({i, j, w});
  }
  return Graph::FromEdges(size, std::move(edges));
}

}  // namespace starling::topology
