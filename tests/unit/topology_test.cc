// Unit tests of impl/topology: graphs, BlueFog's generators and dynamic schedules.
//
// Expectations come from two independent sources: (1) a dense-matrix transcription of
// BlueFog's numpy code (namespace ref below, written like the Python, not like the
// implementation), and (2) literal values from the BlueFog spec and from numpy itself
// (hex floats printed by numpy 2.4 for the Metropolis-Hastings self weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "impl/common/error.h"
#include "impl/topology/graph.h"
#include "impl/topology/schedule.h"

namespace starling::topology {
namespace {

using Matrix = std::vector<std::vector<double>>;

const std::vector<int> kSizes = {1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 16, 24};

// ---- reference: BlueFog's topology_util transcribed over dense matrices --------------
namespace ref {

Matrix Zeros(int n) { return Matrix(n, std::vector<double>(n, 0.0)); }

// topo[i] = np.roll(x, i)
Matrix Roll(const std::vector<double>& x) {
  const int n = static_cast<int>(x.size());
  Matrix topo = Zeros(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) topo[i][(j + i) % n] = x[j];
  }
  return topo;
}

// x /= x.sum() for a 0/1 vector (the sum of ones is exact in any order).
void Normalize(std::vector<double>& x) {
  double sum = 0.0;
  for (double v : x) sum += v;
  for (double& v : x) v /= sum;
}

// Exact isPowerOf, by multiplying up instead of dividing down.
bool IsPowerOf(long long x, long long base) {
  long long p = 1;
  while (p < x) p *= base;
  return p == x;
}

Matrix ExponentialTwo(int size) {
  std::vector<double> x(size);
  for (int i = 0; i < size; ++i) x[i] = (i & (i - 1)) == 0 ? 1.0 : 0.0;
  Normalize(x);
  return Roll(x);
}

Matrix Exponential(int size, int base) {
  std::vector<double> x = {1.0};
  for (int i = 1; i < size; ++i) x.push_back(IsPowerOf(i, base) ? 1.0 : 0.0);
  Normalize(x);
  return Roll(x);
}

Matrix SymmetricExponential(int size, int base) {
  std::vector<double> x = {1.0};
  for (int i = 1; i < size; ++i) {
    const int index = i <= size / 2 ? i : size - i;
    x.push_back(IsPowerOf(index, base) ? 1.0 : 0.0);
  }
  Normalize(x);
  return Roll(x);
}

// numpy's pairwise_sum (numpy/_core/src/umath/loops_utils.h.src) over a dense array.
double PairwiseSum(const double* a, long n) {
  if (n < 8) {
    double res = 0.0;
    for (long i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    long i;
    for (i = 8; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  long n2 = n / 2;
  n2 -= n2 % 8;
  return PairwiseSum(a, n2) + PairwiseSum(a + n2, n - n2);
}

// np.sum(row): reduction from the identity 0.0.
double NumpySum(const std::vector<double>& row) {
  return 0.0 + PairwiseSum(row.data(), static_cast<long>(row.size()));
}

std::pair<int, int> MeshShape(int size) {
  int i = static_cast<int>(std::sqrt(static_cast<double>(size)));
  while (size % i != 0) --i;
  return {i, size / i};
}

Matrix MeshGrid2D(int size, int nrow, int ncol) {
  (void)nrow;
  Matrix topo = Zeros(size);
  for (int i = 0; i < size; ++i) {
    topo[i][i] = 1.0;
    if ((i + 1) % ncol != 0) topo[i][i + 1] = topo[i + 1][i] = 1.0;
    if (i + ncol < size) topo[i][i + ncol] = topo[i + ncol][i] = 1.0;
  }
  std::vector<std::vector<int>> with_self(size);  // np.nonzero(topo[i])
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) {
      if (topo[i][j] != 0.0) with_self[i].push_back(j);
    }
  }
  for (int i = 0; i < size; ++i) {
    for (int j : with_self[i]) {
      if (i != j) {
        topo[i][j] = 1.0 / static_cast<double>(std::max(with_self[i].size(), with_self[j].size()));
      }
    }
    topo[i][i] = 2.0 - NumpySum(topo[i]);
  }
  return topo;
}

Matrix Star(int size, int center) {
  Matrix topo = Zeros(size);
  for (int i = 0; i < size; ++i) {
    topo[i][i] = 1.0 - 1.0 / size;
    topo[center][i] = 1.0 / size;
    topo[i][center] = 1.0 / size;
  }
  return topo;
}

Matrix Ring(int size, int style) {
  if (size == 1) return {{1.0}};
  if (size == 2) return {{0.5, 0.5}, {0.5, 0.5}};
  std::vector<double> x(size, 0.0);
  if (style == 0) {
    x[0] = x[1] = x[size - 1] = 1.0 / 3.0;
  } else if (style == 1) {
    x[0] = x[size - 1] = 0.5;
  } else {
    x[0] = x[1] = 0.5;
  }
  return Roll(x);
}

Matrix FullyConnected(int size) {
  Matrix topo = Zeros(size);
  for (auto& row : topo) {
    for (double& v : row) v = 1.0 / size;
  }
  return topo;
}

// GetDynamicOnePeerSendRecvRanks over a dense matrix, transcribed as written.
class DynamicOnePeer {
 public:
  DynamicOnePeer(const Matrix& topo, int self) : self_(self), size_(static_cast<int>(topo.size())) {
    for (int r = 0; r < size_; ++r) {
      std::vector<int> succ;
      for (int s = 0; s < size_; ++s) {
        if (topo[r][s] != 0.0) succ.push_back(s);
      }
      std::sort(succ.begin(), succ.end(), [&](int a, int b) {
        auto key = [&](int s) { return s >= r ? s - r : s - r + size_; };
        return key(a) < key(b);
      });
      out_degree_.push_back(static_cast<int>(succ.size()));
      if (succ[0] == r) succ.erase(succ.begin());
      sorted_.push_back(succ);
    }
  }
  Step Next() {
    Step step;
    step.send = {sorted_[self_][index_ % (out_degree_[self_] - 1)]};
    for (int o = 0; o < size_; ++o) {
      if (o != self_ && sorted_[o][index_ % (out_degree_[o] - 1)] == self_) step.recv.push_back(o);
    }
    ++index_;
    return step;
  }

 private:
  int self_, size_;
  long index_ = 0;
  std::vector<std::vector<int>> sorted_;
  std::vector<int> out_degree_;
};

int PyMod(int a, int m) { return ((a % m) + m) % m; }
int IntLog2(int n) {
  return static_cast<int>(std::log2(static_cast<double>(n)));
}  // int(np.log2(n))
int Pow2(int k) { return 1 << k; }

// GetExp2DynamicSendRecvMachineRanks, step `index`.
Step Exp2Machine(int world, int local, int rank, int index) {
  const int machine = rank / local, machines = world / local;
  const int exp2 = machines > 1 ? IntLog2(machines - 1) : 0;
  const int d = Pow2(index % (exp2 + 1));
  return {{PyMod(machine + d, machines)}, {PyMod(machine - d, machines)}};
}

// GetInnerOuterRingDynamicSendRecvRanks, step `index`.
Step InnerOuterRing(int world, int local, int rank, int index) {
  const int machines = world / local, m = rank / local, l = rank % local, out = index % local;
  if (l == out) {
    return {{PyMod(m + 1, machines) * local + l}, {PyMod(m - 1, machines) * local + l}};
  }
  int t = (l + 1) % local;
  if (t == out) t = (t + 1) % local;
  int s = PyMod(l - 1, local);
  if (s == out) s = PyMod(s - 1, local);
  return {{t + m * local}, {s + m * local}};
}

// GetInnerOuterExpo2DynamicSendRecvRanks, step `index`.
Step InnerOuterExpo2(int world, int local, int rank, int index) {
  const int machines = world / local, m = rank / local, l = rank % local, out = index % local;
  const int exp_out = IntLog2(machines - 1);
  const int exp_in = local == 2 ? 0 : IntLog2(local - 2);
  if (l == out) {
    const int d = Pow2(index % (exp_out + 1));
    return {{PyMod(m + d, machines) * local + l}, {PyMod(m - d, machines) * local + l}};
  }
  int nd = Pow2(index % (exp_in + 1));
  if (nd >= PyMod(out - l, local)) nd += 1;
  int rd = Pow2(index % (exp_in + 1));
  if (rd >= PyMod(l - out, local)) rd += 1;
  return {{PyMod(l + nd, local) + m * local}, {PyMod(l - rd, local) + m * local}};
}

}  // namespace ref

// ---- helpers ------------------------------------------------------------------------

std::string Hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// Checks every query of g against the dense expectation, weights bit for bit.
void ExpectMatches(const Graph& g, const Matrix& want) {
  const int n = static_cast<int>(want.size());
  ASSERT_EQ(g.size(), n);
  std::vector<Edge> edges;  // row-major non-zeros: nx.from_numpy_array's edges
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (want[i][j] != 0.0) edges.push_back({i, j, want[i][j]});
    }
  }
  ASSERT_EQ(g.edges().size(), edges.size());
  for (size_t k = 0; k < edges.size(); ++k) {
    const Edge& got = g.edges()[k];
    EXPECT_EQ(got.src, edges[k].src) << "edge " << k;
    EXPECT_EQ(got.dst, edges[k].dst) << "edge " << k;
    EXPECT_EQ(got.weight, edges[k].weight)
        << "edge " << k << " " << got.src << "->" << got.dst << ": " << Hex(got.weight)
        << " != " << Hex(edges[k].weight);
  }
  const std::vector<double> dense = g.ToMatrix();
  for (int r = 0; r < n; ++r) {
    NeighborWeights recv, send;
    recv.self_weight = send.self_weight = want[r][r];
    for (int o = 0; o < n; ++o) {
      EXPECT_EQ(g.weight(r, o), want[r][o]) << r << "->" << o;
      EXPECT_EQ(g.has_edge(r, o), want[r][o] != 0.0) << r << "->" << o;
      EXPECT_EQ(dense[static_cast<size_t>(r) * n + o], want[r][o]) << r << "->" << o;
      if (o == r) continue;
      if (want[o][r] != 0.0) {
        recv.ranks.push_back(o);
        recv.weights.push_back(want[o][r]);
      }
      if (want[r][o] != 0.0) {
        send.ranks.push_back(o);
        send.weights.push_back(want[r][o]);
      }
    }
    EXPECT_EQ(g.in_neighbors(r), recv.ranks) << "rank " << r;
    EXPECT_EQ(g.out_neighbors(r), send.ranks) << "rank " << r;
    const NeighborWeights got_recv = g.recv_weights(r), got_send = g.send_weights(r);
    EXPECT_EQ(got_recv.self_weight, recv.self_weight) << "rank " << r;
    EXPECT_EQ(got_recv.ranks, recv.ranks) << "rank " << r;
    EXPECT_EQ(got_recv.weights, recv.weights) << "rank " << r;
    EXPECT_EQ(got_send.self_weight, send.self_weight) << "rank " << r;
    EXPECT_EQ(got_send.ranks, send.ranks) << "rank " << r;
    EXPECT_EQ(got_send.weights, send.weights) << "rank " << r;
  }
  // networkx degree: non-zeros in row + column, so a self-loop counts twice.
  auto degree = [&](int r) {
    int d = 0;
    for (int o = 0; o < n; ++o) d += (want[r][o] != 0.0) + (want[o][r] != 0.0);
    return d;
  };
  bool regular = true;
  for (int r = 1; r < n; ++r) regular = regular && degree(r) == degree(0);
  EXPECT_EQ(g.IsRegular(), regular);
}

// Every row and every column sums to 1 (up to rounding).
void ExpectDoublyStochastic(const Graph& g) {
  const int n = g.size();
  std::vector<double> rows(n, 0.0), cols(n, 0.0);
  for (const Edge& e : g.edges()) {
    rows[e.src] += e.weight;
    cols[e.dst] += e.weight;
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_NEAR(rows[r], 1.0, 1e-12) << "row " << r;
    EXPECT_NEAR(cols[r], 1.0, 1e-12) << "column " << r;
  }
}

// Offsets d with an edge 0 -> d, and their common weight (circulant graphs).
std::vector<int> OffsetsFromZero(const Graph& g) {
  std::vector<int> offsets;
  for (const Edge& e : g.edges()) {
    if (e.src == 0) offsets.push_back(e.dst);
  }
  return offsets;
}

void ExpectCirculant(const Graph& g, const std::vector<int>& offsets, double weight) {
  const int n = g.size();
  EXPECT_EQ(OffsetsFromZero(g), offsets);
  ASSERT_EQ(g.edges().size(), static_cast<size_t>(n) * offsets.size());
  for (int i = 0; i < n; ++i) {
    for (int d : offsets) EXPECT_EQ(g.weight(i, (i + d) % n), weight) << i << " +" << d;
  }
}

#define EXPECT_INVALID_ARGUMENT(statement, substring)                          \
  do {                                                                         \
    try {                                                                      \
      (void)(statement);                                                       \
      ADD_FAILURE() << "no error from " #statement;                            \
    } catch (const ::starling::Error& e) {                                     \
      EXPECT_EQ(e.code(), ::starling::Code::kInvalidArgument) << e.what();     \
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos)      \
          << "message \"" << e.what() << "\" lacks \"" << (substring) << "\""; \
    }                                                                          \
  } while (0)

// ---- static generators ---------------------------------------------------------------

TEST(ExponentialTwo, MatchesBlueFogForAllSizes) {
  for (int size : kSizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const Graph g = ExponentialTwo(size);
    ExpectMatches(g, ref::ExponentialTwo(size));
    ExpectDoublyStochastic(g);
    EXPECT_TRUE(g.IsRegular());
    // Uniform weight 1/(1 + ceil(log2(size))); in-degree ceil(log2(size)).
    const int k = static_cast<int>(std::ceil(std::log2(size)));
    EXPECT_EQ(g.weight(0, 0), 1.0 / (1 + k));
    EXPECT_EQ(static_cast<int>(g.in_neighbors(size - 1).size()), k);
  }
}

TEST(ExponentialTwo, SpecExamples) {
  const Graph g4 = ExponentialTwo(4);
  const std::vector<double> m4 = g4.ToMatrix();
  EXPECT_EQ(std::vector<double>(m4.begin(), m4.begin() + 4),
            (std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3, 0.0}));
  ExpectCirculant(ExponentialTwo(8), {0, 1, 2, 4}, 0.25);
  ExpectCirculant(ExponentialTwo(12), {0, 1, 2, 4, 8}, 1.0 / 5);
  ExpectCirculant(ExponentialTwo(1), {0}, 1.0);
  ExpectCirculant(ExponentialTwo(2), {0, 1}, 0.5);
  // Rank 3 of 8 receives from 3 - 2^k.
  EXPECT_EQ(ExponentialTwo(8).in_neighbors(3), (std::vector<int>{1, 2, 7}));
  EXPECT_EQ(ExponentialTwo(8).out_neighbors(3), (std::vector<int>{4, 5, 7}));
}

TEST(Exponential, MatchesBlueFogForAllSizesAndBases) {
  for (int base : {2, 3, 4, 5, 7}) {
    for (int size : kSizes) {
      SCOPED_TRACE("size " + std::to_string(size) + " base " + std::to_string(base));
      const Graph g = Exponential(size, base);
      ExpectMatches(g, ref::Exponential(size, base));
      ExpectDoublyStochastic(g);
    }
  }
}

TEST(Exponential, BaseTwoIsExponentialTwo) {
  for (int size : kSizes) EXPECT_TRUE(Exponential(size, 2).Equals(ExponentialTwo(size))) << size;
}

TEST(Exponential, SpecExamples) {
  ExpectCirculant(Exponential(4, 2), {0, 1, 2}, 1.0 / 3);
  ExpectCirculant(Exponential(8, 2), {0, 1, 2, 4}, 1.0 / 4);
  ExpectCirculant(Exponential(12, 2), {0, 1, 2, 4, 8}, 1.0 / 5);
  ExpectCirculant(Exponential(1, 3), {0}, 1.0);
  ExpectCirculant(Exponential(13, 3), {0, 1, 3, 9}, 1.0 / 4);
  ExpectCirculant(Exponential(16, 4), {0, 1, 4}, 1.0 / 3);
}

// The deliberate difference from BlueFog: its float isPowerOf misses 243 = 3^5.
TEST(Exponential, ExactPowerTest) {
  EXPECT_TRUE(IsPowerOf(1, 3));
  EXPECT_TRUE(IsPowerOf(243, 3));
  EXPECT_TRUE(IsPowerOf(59049, 3));
  EXPECT_TRUE(IsPowerOf(1000, 10));
  EXPECT_TRUE(IsPowerOf(1000000, 10));
  EXPECT_TRUE(IsPowerOf(1LL << 62, 2));
  EXPECT_FALSE(IsPowerOf(242, 3));
  EXPECT_FALSE(IsPowerOf(244, 3));
  EXPECT_FALSE(IsPowerOf(0, 3));
  EXPECT_FALSE(IsPowerOf(6, 4));
  EXPECT_FALSE(IsPowerOf(8, 1));

  const Graph g243 = Exponential(243, 3);  // 243 itself is not below the size
  ExpectCirculant(g243, {0, 1, 3, 9, 27, 81}, 1.0 / 6);
  ExpectMatches(g243, ref::Exponential(243, 3));
  const Graph g244 = Exponential(244, 3);
  ExpectCirculant(g244, {0, 1, 3, 9, 27, 81, 243}, 1.0 / 7);
  ExpectMatches(g244, ref::Exponential(244, 3));
  EXPECT_TRUE(g244.has_edge(5, (5 + 243) % 244));
  ExpectCirculant(Exponential(1001, 10), {0, 1, 10, 100, 1000}, 1.0 / 5);
}

TEST(SymmetricExponential, MatchesBlueFogForAllSizesAndBases) {
  for (int base : {2, 3, 4}) {
    for (int size : kSizes) {
      SCOPED_TRACE("size " + std::to_string(size) + " base " + std::to_string(base));
      const Graph g = SymmetricExponential(size, base);
      ExpectMatches(g, ref::SymmetricExponential(size, base));
      ExpectDoublyStochastic(g);
      EXPECT_TRUE(g.IsRegular());
    }
  }
  ExpectMatches(SymmetricExponential(244, 3), ref::SymmetricExponential(244, 3));
}

TEST(SymmetricExponential, SpecExamples) {
  ExpectCirculant(SymmetricExponential(8, 4), {0, 1, 4, 7}, 1.0 / 4);
  ExpectCirculant(SymmetricExponential(16, 4), {0, 1, 4, 12, 15}, 1.0 / 5);
  ExpectCirculant(SymmetricExponential(1, 4), {0}, 1.0);
  ExpectCirculant(SymmetricExponential(2, 4), {0, 1}, 0.5);
  // Offset 243 and its mirror 600 - 243 = 357 (exact power test again).
  ExpectCirculant(SymmetricExponential(600, 3),
                  {0, 1, 3, 9, 27, 81, 243, 357, 519, 573, 591, 597, 599}, 1.0 / 13);
}

TEST(MeshGrid2D, MatchesBlueFogForAllSizes) {
  for (int size : kSizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const auto [rows, cols] = ref::MeshShape(size);
    const Graph g = MeshGrid2D(size, 0, 0);
    ExpectMatches(g, ref::MeshGrid2D(size, rows, cols));
    ExpectDoublyStochastic(g);
    EXPECT_TRUE(g.Equals(MeshGrid2D(size, rows, cols)));
  }
}

TEST(MeshGrid2D, ExplicitShapes) {
  const std::vector<std::pair<int, int>> shapes = {{3, 4}, {4, 3},  {2, 6},
                                                   {6, 2}, {1, 12}, {12, 1}};
  for (auto [rows, cols] : shapes) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const Graph g = MeshGrid2D(12, rows, cols);
    ExpectMatches(g, ref::MeshGrid2D(12, rows, cols));
    ExpectDoublyStochastic(g);
  }
  // Several pairwise-summation blocks (rows longer than 128) and a non-square shape.
  for (auto [rows, cols] :
       std::vector<std::pair<int, int>>{{10, 20}, {13, 20}, {16, 18}, {7, 41}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    ExpectMatches(MeshGrid2D(rows * cols, rows, cols), ref::MeshGrid2D(rows * cols, rows, cols));
  }
}

TEST(MeshGrid2D, SpecExamples) {
  // 2x2: every node has degree 3 with self, so every weight is 1/3; the self weight is
  // 2 - (1 + 1/3 + 1/3), which numpy rounds to 0x1.5555555555558p-2, 2 ulp above 1/3.
  const Graph g4 = MeshGrid2D(4, 0, 0);
  EXPECT_EQ(g4.edges().size(), 12u);
  for (const Edge& e : g4.edges()) {
    EXPECT_EQ(e.weight, e.src == e.dst ? 0x1.5555555555558p-2 : 1.0 / 3) << e.src << "->" << e.dst;
  }
  EXPECT_FALSE(g4.has_edge(0, 3));
  EXPECT_FALSE(g4.has_edge(1, 2));
  EXPECT_TRUE(g4.IsRegular());

  // 24 is 4x6: 5 and 6 are on different rows, 0 and 6 in one column.
  const Graph g24 = MeshGrid2D(24, 0, 0);
  EXPECT_TRUE(g24.Equals(MeshGrid2D(24, 4, 6)));
  EXPECT_TRUE(g24.has_edge(0, 6));
  EXPECT_TRUE(g24.has_edge(0, 1));
  EXPECT_FALSE(g24.has_edge(5, 6));
  EXPECT_EQ(g24.in_neighbors(7), (std::vector<int>{1, 6, 8, 13}));
  EXPECT_EQ(g24.weight(7, 8), 1.0 / 5);
  EXPECT_EQ(g24.weight(0, 1), 1.0 / 4);  // corner (3) to border (4)
  EXPECT_EQ(g24.weight(1, 7), 1.0 / 5);  // border (4) to interior (5)

  // Prime sizes: a 1 x size line; ends have degree 2, inner nodes 3.
  for (int size : {5, 7, 11, 13}) {
    const Graph g = MeshGrid2D(size, 0, 0);
    EXPECT_TRUE(g.Equals(MeshGrid2D(size, 1, size))) << size;
    EXPECT_EQ(g.edges().size(), static_cast<size_t>(size + 2 * (size - 1))) << size;
    EXPECT_EQ(g.weight(0, 1), 1.0 / 3) << size;
    EXPECT_EQ(g.weight(0, 0), 0x1.5555555555556p-1) << size;  // numpy's bits
    EXPECT_EQ(g.weight(2, 2), 0x1.5555555555558p-2) << size;
    EXPECT_EQ(g.weight(size - 1, size - 1), 0x1.5555555555556p-1) << size;
    EXPECT_EQ(g.in_neighbors(2), (std::vector<int>{1, 3})) << size;
  }
  // Size 2: a line of two, degree 2 each.
  ExpectMatches(MeshGrid2D(2, 0, 0), {{0.5, 0.5}, {0.5, 0.5}});
  ExpectMatches(MeshGrid2D(1, 0, 0), {{1.0}});
}

// Self weights printed by numpy (np.diag(topo), .hex()) for BlueFog's MeshGrid2DGraph.
// Interior nodes get 2.0 - sum(1, 1/5, 1/5, 1/5, 1/5); where the pairwise summation
// groups the terms differently than a left-to-right loop, the bits differ.
TEST(MeshGrid2D, SelfWeightsBitIdenticalToNumpy) {
  const double half = 0x1.0p-1, third = 0x1.3333333333334p-2;
  const double lo = 0x1.9999999999998p-3, hi = 0x1.99999999999a0p-3;
  const std::vector<double> diag24 = {half, third, third, third, third, half,  third, hi,
                                      hi,   lo,    lo,    third, third, lo,    lo,    hi,
                                      hi,   third, half,  third, third, third, third, half};
  const Graph g24 = MeshGrid2D(24, 0, 0);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(Hex(g24.weight(i, i)), Hex(diag24[i])) << "rank " << i;
  const std::vector<double> diag18 = {half, third, third, third, third, half,  third, hi,    hi,
                                      lo,   hi,    third, half,  third, third, third, third, half};
  const Graph g18 = MeshGrid2D(18, 3, 6);
  for (int i = 0; i < 18; ++i) EXPECT_EQ(Hex(g18.weight(i, i)), Hex(diag18[i])) << "rank " << i;

  // 10x20: rows of 200 entries go through numpy's recursive split.
  const std::set<int> low = {23,  24,  27,  28,  31,  32,  35,  36,  43,  44,  47,  48,  51,
                             52,  55,  56,  63,  64,  67,  68,  71,  72,  75,  76,  83,  84,
                             87,  88,  91,  92,  103, 104, 107, 108, 111, 112, 115, 116, 123,
                             124, 127, 128, 131, 132, 135, 136, 143, 144, 147, 148, 151, 152,
                             155, 156, 163, 164, 167, 168, 171, 172, 175, 176};
  const Graph g200 = MeshGrid2D(200, 10, 20);
  for (int i = 0; i < 200; ++i) {
    const int r = i / 20, c = i % 20;
    if (r == 0 || r == 9 || c == 0 || c == 19) continue;  // only interior nodes
    EXPECT_EQ(Hex(g200.weight(i, i)), Hex(low.count(i) ? lo : hi)) << "rank " << i;
  }
}

TEST(Star, MatchesBlueFogForAllSizesAndCenters) {
  for (int size : kSizes) {
    for (int center : std::set<int>{0, size / 2, size - 1}) {
      SCOPED_TRACE("size " + std::to_string(size) + " center " + std::to_string(center));
      const Graph g = Star(size, center);
      ExpectMatches(g, ref::Star(size, center));
      ExpectDoublyStochastic(g);
      EXPECT_EQ(g.IsRegular(), size <= 2);
    }
  }
}

TEST(Star, SpecExamples) {
  const Graph g = Star(4, 1);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(g.weight(1, j), 0.25) << j;  // center row all 1/size
  for (int leaf : {0, 2, 3}) {
    EXPECT_EQ(g.weight(leaf, leaf), 0.75);
    EXPECT_EQ(g.weight(leaf, 1), 0.25);
    EXPECT_EQ(g.out_neighbors(leaf), std::vector<int>{1});
    const NeighborWeights recv = g.recv_weights(leaf);  // (1 - 1/size) x_i + x_c / size
    EXPECT_EQ(recv.self_weight, 0.75);
    EXPECT_EQ(recv.ranks, std::vector<int>{1});
    EXPECT_EQ(recv.weights, std::vector<double>{0.25});
  }
  const NeighborWeights center = g.recv_weights(1);  // (1/size) * sum of all
  EXPECT_EQ(center.self_weight, 0.25);
  EXPECT_EQ(center.ranks, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(center.weights, (std::vector<double>{0.25, 0.25, 0.25}));
  EXPECT_EQ(g.edges().size(), 4u + 2u * 3u);
  ExpectMatches(Star(1, 0), {{1.0}});
  EXPECT_EQ(Star(3, 0).weight(1, 1), 1.0 - 1.0 / 3);
}

TEST(Ring, MatchesBlueFogForAllSizesAndStyles) {
  for (int style : {0, 1, 2}) {
    for (int size : kSizes) {
      SCOPED_TRACE("size " + std::to_string(size) + " style " + std::to_string(style));
      const Graph g = Ring(size, style);
      ExpectMatches(g, ref::Ring(size, style));
      ExpectDoublyStochastic(g);
      EXPECT_TRUE(g.IsRegular());
    }
  }
}

TEST(Ring, SpecExamples) {
  for (int size : {3, 5, 8}) {
    const Graph bi = Ring(size, 0), left = Ring(size, 1), right = Ring(size, 2);
    for (int r = 0; r < size; ++r) {
      const int next = (r + 1) % size, prev = (r + size - 1) % size;
      EXPECT_EQ(left.in_neighbors(r), std::vector<int>{next}) << size << " " << r;  // style 1
      EXPECT_EQ(left.out_neighbors(r), std::vector<int>{prev}) << size << " " << r;
      EXPECT_EQ(right.in_neighbors(r), std::vector<int>{prev}) << size << " " << r;  // style 2
      EXPECT_EQ(right.out_neighbors(r), std::vector<int>{next}) << size << " " << r;
      EXPECT_EQ(left.weight(r, prev), 0.5);
      EXPECT_EQ(left.weight(r, r), 0.5);
      EXPECT_EQ(bi.weight(r, next), 1.0 / 3);
      EXPECT_EQ(bi.weight(r, prev), 1.0 / 3);
      EXPECT_EQ(bi.weight(r, r), 1.0 / 3);
    }
  }
  EXPECT_TRUE(Ring(3, 0).Equals(FullyConnected(3)));
  for (int style : {0, 1, 2}) {
    ExpectMatches(Ring(2, style), {{0.5, 0.5}, {0.5, 0.5}});
    ExpectMatches(Ring(1, style), {{1.0}});
  }
}

TEST(FullyConnected, MatchesBlueFogForAllSizes) {
  for (int size : kSizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const Graph g = FullyConnected(size);
    ExpectMatches(g, ref::FullyConnected(size));
    ExpectDoublyStochastic(g);
    EXPECT_EQ(g.edges().size(), static_cast<size_t>(size) * size);
    EXPECT_EQ(g.weight(size - 1, 0), 1.0 / size);
  }
}

TEST(Generators, BadParameters) {
  EXPECT_INVALID_ARGUMENT(ExponentialTwo(0), "size must be >= 1, got 0");
  EXPECT_INVALID_ARGUMENT(Exponential(-3, 2), "got -3");
  EXPECT_INVALID_ARGUMENT(Exponential(8, 1), "base must be >= 2, got 1");
  EXPECT_INVALID_ARGUMENT(Exponential(1, 0), "base must be >= 2, got 0");
  EXPECT_INVALID_ARGUMENT(SymmetricExponential(0, 4), "size must be >= 1");
  EXPECT_INVALID_ARGUMENT(SymmetricExponential(8, 1), "base must be >= 2, got 1");
  EXPECT_INVALID_ARGUMENT(MeshGrid2D(0, 0, 0), "size must be >= 1");
  EXPECT_INVALID_ARGUMENT(MeshGrid2D(8, 3, 3), "mesh shape 3x3 does not match size 8");
  EXPECT_INVALID_ARGUMENT(MeshGrid2D(8, 0, 8), "mesh shape 0x8");
  EXPECT_INVALID_ARGUMENT(MeshGrid2D(4, -2, -2), "mesh shape -2x-2");
  EXPECT_INVALID_ARGUMENT(Star(0, 0), "size must be >= 1");
  EXPECT_INVALID_ARGUMENT(Star(4, 5), "star center 5 is out of range for size 4");
  EXPECT_INVALID_ARGUMENT(Star(4, -1), "star center -1");
  EXPECT_INVALID_ARGUMENT(Ring(0, 0), "size must be >= 1");
  EXPECT_INVALID_ARGUMENT(Ring(8, 3),
                          "ring style 3 is not 0 (bidirectional), 1 (left) or 2 (right)");
  EXPECT_INVALID_ARGUMENT(Ring(1, -1), "ring style -1");  // checked for every size
  EXPECT_INVALID_ARGUMENT(FullyConnected(0), "size must be >= 1");
  EXPECT_INVALID_ARGUMENT(FullyConnected(50000), "more than the maximum");
}

// ---- explicit graphs -----------------------------------------------------------------

TEST(Graph, FromEdgesSortsAndIndexes) {
  // Unsorted input, a missing self-loop on rank 2, an isolated rank 3.
  const Graph g = Graph::FromEdges(
      4, {{2, 0, 0.5}, {0, 0, 0.25}, {0, 2, 0.75}, {1, 0, 1.0}, {0, 1, 2.0}, {2, 1, 0.0}});
  std::vector<std::tuple<int, int, double>> edges;
  for (const Edge& e : g.edges()) edges.emplace_back(e.src, e.dst, e.weight);
  EXPECT_EQ(edges,
            (std::vector<std::tuple<int, int, double>>{
                {0, 0, 0.25}, {0, 1, 2.0}, {0, 2, 0.75}, {1, 0, 1.0}, {2, 0, 0.5}, {2, 1, 0.0}}));
  EXPECT_EQ(g.in_neighbors(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(g.out_neighbors(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(g.in_neighbors(1), (std::vector<int>{0, 2}));  // a zero-weight edge is an edge
  EXPECT_TRUE(g.has_edge(2, 1));
  EXPECT_EQ(g.weight(2, 1), 0.0);
  EXPECT_EQ(g.in_neighbors(3), std::vector<int>{});
  EXPECT_EQ(g.out_neighbors(3), std::vector<int>{});
  EXPECT_FALSE(g.has_edge(3, 3));
  EXPECT_FALSE(g.has_edge(1, 2));
  EXPECT_EQ(g.weight(1, 2), 0.0);
  EXPECT_TRUE(g.has_self_loop(0));
  EXPECT_FALSE(g.has_self_loop(2));

  const NeighborWeights recv0 = g.recv_weights(0);
  EXPECT_EQ(recv0.self_weight, 0.25);
  EXPECT_EQ(recv0.ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(recv0.weights, (std::vector<double>{1.0, 0.5}));
  const NeighborWeights send0 = g.send_weights(0);
  EXPECT_EQ(send0.self_weight, 0.25);
  EXPECT_EQ(send0.ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(send0.weights, (std::vector<double>{2.0, 0.75}));
  const NeighborWeights recv2 = g.recv_weights(2);
  EXPECT_EQ(recv2.self_weight, 0.0);  // no self-loop
  EXPECT_EQ(recv2.ranks, std::vector<int>{0});
  EXPECT_EQ(recv2.weights, std::vector<double>{0.75});
  EXPECT_EQ(g.ToMatrix(),
            (std::vector<double>{0.25, 2.0, 0.75, 0, 1.0, 0, 0, 0, 0.5, 0.0, 0, 0, 0, 0, 0, 0}));
  const Graph empty = Graph::FromEdges(3, {});
  EXPECT_TRUE(empty.edges().empty());
  EXPECT_TRUE(empty.IsRegular());
  EXPECT_EQ(empty.recv_weights(1).self_weight, 0.0);
}

TEST(Graph, FromMatrixRoundTrip) {
  const std::vector<double> m = {0.5, 0.5, 0.0, 0.0, 1.0, 0.0, 0.25, 0.0, 0.75};
  const Graph g = Graph::FromMatrix(3, m);
  EXPECT_EQ(g.ToMatrix(), m);
  EXPECT_EQ(g.edges().size(), 5u);
  EXPECT_FALSE(g.has_edge(0, 2));
  EXPECT_EQ(g.in_neighbors(0), std::vector<int>{2});
  for (int size : kSizes) {
    const Graph mesh = MeshGrid2D(size, 0, 0);
    EXPECT_TRUE(Graph::FromMatrix(size, mesh.ToMatrix()).Equals(mesh)) << size;
  }
  EXPECT_INVALID_ARGUMENT(Graph::FromMatrix(3, std::vector<double>(8, 1.0)),
                          "matrix has 8 entries, expected size * size = 9");
  EXPECT_INVALID_ARGUMENT(Graph::FromMatrix(2, {1.0, -0.5, 0.0, 1.0}),
                          "matrix entry [0][1] has weight -0.5");
  EXPECT_INVALID_ARGUMENT(Graph::FromMatrix(2, {1.0, 0.0, NAN, 1.0}),
                          "matrix entry [1][0] has weight nan");
  EXPECT_INVALID_ARGUMENT(Graph::FromMatrix(0, {}), "size must be >= 1");
}

// The encoding grow's join message and a resize's agreement carry: the same graph back,
// bit for bit, after other bytes; a message cut short is refused, never read past.
TEST(Graph, BytesRoundTrip) {
  const Graph mesh = MeshGrid2D(6, 0, 0);
  std::vector<char> bytes = {'x'};
  mesh.AppendTo(&bytes);
  size_t at = 1;
  EXPECT_TRUE(Graph::ReadFrom(bytes, &at, "test message").Equals(mesh));
  EXPECT_EQ(at, bytes.size());
  for (size_t cut : {size_t{1}, size_t{5}, size_t{13}, bytes.size() - 1}) {
    const std::vector<char> short_bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    size_t from = 1;
    try {
      Graph::ReadFrom(short_bytes, &from, "test message");
      ADD_FAILURE() << "a message cut at " << cut << " bytes was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInternal) << cut;
      EXPECT_NE(std::string(e.what()).find("test message"), std::string::npos) << e.what();
    }
  }
}

TEST(Graph, IsRegularCountsSelfLoopsTwice) {
  // 0 has only a self-loop (degree 2); 1 <-> 2 gives degree 2 each.
  EXPECT_TRUE(Graph::FromEdges(3, {{0, 0, 1.0}, {1, 2, 1.0}, {2, 1, 1.0}}).IsRegular());
  // Without the self-loop, rank 0 has degree 0.
  EXPECT_FALSE(Graph::FromEdges(3, {{1, 2, 1.0}, {2, 1, 1.0}}).IsRegular());
  // 0 -> 1 only: degrees 1 and 1.
  EXPECT_TRUE(Graph::FromEdges(2, {{0, 1, 1.0}}).IsRegular());
  // Self-loop on 0 and 0 <-> 1: 4 vs 2.
  EXPECT_FALSE(Graph::FromEdges(2, {{0, 0, 1.0}, {0, 1, 1.0}, {1, 0, 1.0}}).IsRegular());
  EXPECT_TRUE(
      Graph::FromEdges(2, {{0, 0, 1.0}, {0, 1, 1.0}, {1, 0, 1.0}, {1, 1, 1.0}}).IsRegular());
  EXPECT_FALSE(MeshGrid2D(9, 0, 0).IsRegular());
  EXPECT_TRUE(Graph::FromEdges(1, {}).IsRegular());
}

TEST(Graph, EqualsComparesWeightedEdgesExactly) {
  const Graph a = ExponentialTwo(8);
  EXPECT_TRUE(a.Equals(a));
  EXPECT_TRUE(a.Equals(ExponentialTwo(8)));
  EXPECT_TRUE(a.Equals(Graph::FromMatrix(8, a.ToMatrix())));
  std::vector<Edge> edges = a.edges();
  std::reverse(edges.begin(), edges.end());
  EXPECT_TRUE(a.Equals(Graph::FromEdges(8, edges)));  // input order does not matter
  edges[3].weight = std::nextafter(edges[3].weight, 1.0);
  EXPECT_FALSE(a.Equals(Graph::FromEdges(8, edges)));  // one ulp apart
  EXPECT_FALSE(a.Equals(ExponentialTwo(9)));
  EXPECT_FALSE(a.Equals(Graph::FromEdges(8, {a.edges().begin(), a.edges().end() - 1})));
  // Same matrix, but an explicit zero-weight edge is an extra edge (networkx too).
  const Graph with_zero = Graph::FromEdges(2, {{0, 0, 1.0}, {0, 1, 0.0}});
  EXPECT_FALSE(with_zero.Equals(Graph::FromEdges(2, {{0, 0, 1.0}})));
  EXPECT_TRUE(with_zero.Equals(Graph::FromEdges(2, {{0, 1, 0.0}, {0, 0, 1.0}})));
  // Not an isomorphism test: a relabelled ring differs.
  EXPECT_FALSE(Ring(5, 1).Equals(Ring(5, 2)));
  EXPECT_FALSE(Ring(4, 0).Equals(SymmetricExponential(4, 2)));  // 1/3 ring vs 1/4 complete
}

TEST(Graph, BadEdges) {
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(0, {}), "topology size must be >= 1, got 0");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{0, 1, 1.0}, {1, 3, 1.0}}),
                          "edge 1 (1 -> 3): destination rank 3 is out of range for size 3");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{-1, 1, 1.0}}),
                          "edge 0 (-1 -> 1): source rank -1 is out of range for size 3");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{0, 1, 1.0}, {1, 2, NAN}}),
                          "edge 1 (1 -> 2) has weight nan");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{0, 1, -0.25}}), "edge 0 (0 -> 1) has weight -0.25");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{0, 1, INFINITY}}), "has weight inf");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{0, 1, -INFINITY}}), "has weight -inf");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{0, 1, 1.0}, {2, 2, 1.0}, {0, 1, 0.5}}),
                          "edge 2 (0 -> 1) repeats edge 0");
  EXPECT_INVALID_ARGUMENT(Graph::FromEdges(3, {{1, 1, 1.0}, {1, 1, 1.0}}),
                          "edge 1 (1 -> 1) repeats edge 0");
}

TEST(Graph, BadRanksInQueries) {
  const Graph g = Ring(4, 0);
  EXPECT_INVALID_ARGUMENT(g.in_neighbors(4), "rank 4 is out of range for a topology of size 4");
  EXPECT_INVALID_ARGUMENT(g.out_neighbors(-1), "rank -1 is out of range");
  EXPECT_INVALID_ARGUMENT(g.recv_weights(7), "rank 7");
  EXPECT_INVALID_ARGUMENT(g.send_weights(4), "rank 4");
  EXPECT_INVALID_ARGUMENT(g.weight(0, 4), "destination rank 4");
  EXPECT_INVALID_ARGUMENT(g.has_edge(9, 0), "source rank 9");
}

// ---- dynamic schedules ---------------------------------------------------------------

// Steps every rank's schedule `steps` times: result[step][rank].
std::vector<std::vector<Step>> RunAll(std::vector<std::unique_ptr<Schedule>>& schedules,
                                      int steps) {
  std::vector<std::vector<Step>> result(steps);
  for (int i = 0; i < steps; ++i) {
    for (auto& s : schedules) result[i].push_back(s->Next());
  }
  return result;
}

// In every step, r sends to s exactly when s receives from r (ids are ranks, or
// machine ids with one schedule per machine).
void ExpectTransposed(const std::vector<std::vector<Step>>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    std::set<std::pair<int, int>> sends, recvs;
    for (int r = 0; r < static_cast<int>(steps[i].size()); ++r) {
      const Step& s = steps[i][r];
      EXPECT_TRUE(std::is_sorted(s.send.begin(), s.send.end()));
      EXPECT_TRUE(std::is_sorted(s.recv.begin(), s.recv.end()));
      for (int to : s.send) {
        EXPECT_NE(to, r) << "step " << i;
        sends.insert({r, to});
      }
      for (int from : s.recv) {
        EXPECT_NE(from, r) << "step " << i;
        recvs.insert({from, r});
      }
    }
    EXPECT_EQ(sends, recvs) << "step " << i;
  }
}

std::vector<std::unique_ptr<Schedule>> OnePeerAll(const Graph& g) {
  std::vector<std::unique_ptr<Schedule>> all;
  for (int r = 0; r < g.size(); ++r) all.push_back(DynamicOnePeer(g, r));
  return all;
}

TEST(DynamicOnePeer, ExponentialTwoOfEight) {
  auto all = OnePeerAll(ExponentialTwo(8));
  const auto steps = RunAll(all, 12);
  for (int i = 0; i < 12; ++i) {
    const int d = 1 << (i % 3);
    for (int r = 0; r < 8; ++r) {
      EXPECT_EQ(steps[i][r].send, std::vector<int>{(r + d) % 8}) << "step " << i << " rank " << r;
      EXPECT_EQ(steps[i][r].recv, std::vector<int>{(r + 8 - d) % 8})
          << "step " << i << " rank " << r;
    }
  }
  ExpectTransposed(steps);
}

TEST(DynamicOnePeer, ExponentialTwoOfFourAlternates) {
  auto all = OnePeerAll(ExponentialTwo(4));
  const auto steps = RunAll(all, 10);
  for (int i = 0; i < 10; ++i) {
    const int d = i % 2 == 0 ? 1 : 2;
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(steps[i][r].send, std::vector<int>{(r + d) % 4});
      EXPECT_EQ(steps[i][r].recv, std::vector<int>{(r + 4 - d) % 4});
    }
  }
}

TEST(DynamicOnePeer, StarGathersAtTheCenter) {
  // Center 0 of 4 cycles 1, 2, 3; every leaf always sends to 0.
  auto all = OnePeerAll(Star(4, 0));
  const auto steps = RunAll(all, 10);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(steps[i][0].send, std::vector<int>{1 + i % 3});
    EXPECT_EQ(steps[i][0].recv, (std::vector<int>{1, 2, 3}));
    for (int leaf = 1; leaf < 4; ++leaf) {
      EXPECT_EQ(steps[i][leaf].send, std::vector<int>{0});
      EXPECT_EQ(steps[i][leaf].recv,
                (leaf == 1 + i % 3 ? std::vector<int>{0} : std::vector<int>{}));
    }
  }
}

TEST(DynamicOnePeer, MatchesBlueFogTranscription) {
  std::vector<std::pair<std::string, Graph>> graphs;
  for (int size : {2, 3, 4, 5, 7, 8, 11, 12, 13, 16, 24}) {
    graphs.emplace_back("exp2", ExponentialTwo(size));
    graphs.emplace_back("exp3", Exponential(size, 3));
    graphs.emplace_back("symexp4", SymmetricExponential(size, 4));
    graphs.emplace_back("mesh", MeshGrid2D(size, 0, 0));
    graphs.emplace_back("star", Star(size, size / 2));
    graphs.emplace_back("ring0", Ring(size, 0));
    graphs.emplace_back("ring1", Ring(size, 1));
    graphs.emplace_back("ring2", Ring(size, 2));
    graphs.emplace_back("full", FullyConnected(size));
  }
  // Irregular, with wrap-around and different degrees: several senders per step.
  std::vector<Edge> custom;
  for (int r = 0; r < 5; ++r) custom.push_back({r, r, 1.0});
  const std::vector<std::pair<int, int>> arcs = {{0, 3}, {0, 1}, {1, 0}, {2, 0}, {2, 4},
                                                 {2, 1}, {3, 0}, {4, 2}, {4, 3}, {4, 0}};
  for (auto [src, dst] : arcs) custom.push_back({src, dst, 1.0});
  graphs.emplace_back("custom", Graph::FromEdges(5, custom));
  for (const auto& [name, g] : graphs) {
    SCOPED_TRACE(name + " size " + std::to_string(g.size()));
    Matrix m(g.size(), std::vector<double>(g.size()));
    const std::vector<double> dense = g.ToMatrix();
    for (int i = 0; i < g.size(); ++i) {
      for (int j = 0; j < g.size(); ++j) m[i][j] = dense[static_cast<size_t>(i) * g.size() + j];
    }
    auto all = OnePeerAll(g);
    const auto steps = RunAll(all, 16);
    for (int r = 0; r < g.size(); ++r) {
      ref::DynamicOnePeer want(m, r);
      for (int i = 0; i < 16; ++i) {
        const Step w = want.Next();
        EXPECT_EQ(steps[i][r].send, w.send) << "step " << i << " rank " << r;
        EXPECT_EQ(steps[i][r].recv, w.recv) << "step " << i << " rank " << r;
      }
    }
    ExpectTransposed(steps);
  }
}

TEST(DynamicOnePeer, BadTopologies) {
  // A ring without self-loops: BlueFog would silently use the wrong degree.
  const Graph no_self = Graph::FromEdges(3, {{0, 1, 1}, {1, 2, 1}, {2, 0, 1}});
  EXPECT_INVALID_ARGUMENT(DynamicOnePeer(no_self, 0), "rank 0 has no self-loop");
  const Graph one_missing = Graph::FromEdges(2, {{0, 0, 1}, {0, 1, 1}, {1, 0, 1}});
  EXPECT_INVALID_ARGUMENT(DynamicOnePeer(one_missing, 0), "rank 1 has no self-loop");
  EXPECT_INVALID_ARGUMENT(DynamicOnePeer(ExponentialTwo(1), 0),
                          "rank 0 has no out-neighbor besides itself");
  const Graph isolated =
      Graph::FromEdges(3, {{0, 0, 1}, {1, 1, 1}, {2, 2, 1}, {0, 1, 1}, {1, 0, 1}});
  EXPECT_INVALID_ARGUMENT(DynamicOnePeer(isolated, 0), "rank 2 has no out-neighbor");
  EXPECT_INVALID_ARGUMENT(DynamicOnePeer(ExponentialTwo(4), 4), "rank 4 is out of range");
  EXPECT_INVALID_ARGUMENT(DynamicOnePeer(ExponentialTwo(4), -1), "rank -1 is out of range");
}

TEST(Exp2Machine, SpecExamples) {
  // 4 machines of 2: int(log2(3)) = 1, so distances 1, 2, 1, 2, ...
  for (int rank = 0; rank < 8; ++rank) {
    auto s = Exp2Machine(8, 2, rank, rank % 2);
    const int m = rank / 2;
    for (int i = 0; i < 12; ++i) {
      const int d = i % 2 == 0 ? 1 : 2;
      const Step step = s->Next();
      EXPECT_EQ(step.send, std::vector<int>{(m + d) % 4}) << "rank " << rank << " step " << i;
      EXPECT_EQ(step.recv, std::vector<int>{(m + 4 - d) % 4}) << "rank " << rank << " step " << i;
    }
  }
  // 5 machines: int(log2(4)) = 2, distances 1, 2, 4.
  auto s5 = Exp2Machine(15, 3, 7, 1);  // machine 2
  const int want_send[] = {3, 4, 1, 3, 4, 1, 3, 4, 1, 3};
  const int want_recv[] = {1, 0, 3, 1, 0, 3, 1, 0, 3, 1};
  for (int i = 0; i < 10; ++i) {
    const Step step = s5->Next();
    EXPECT_EQ(step.send, std::vector<int>{want_send[i]}) << i;
    EXPECT_EQ(step.recv, std::vector<int>{want_recv[i]}) << i;
  }
  // 2 machines: always the other one.
  auto s2 = Exp2Machine(4, 2, 1, 1);
  for (int i = 0; i < 10; ++i) {
    const Step step = s2->Next();
    EXPECT_EQ(step.send, std::vector<int>{1});
    EXPECT_EQ(step.recv, std::vector<int>{1});
  }
}

TEST(Exp2Machine, MatchesBlueFogTranscription) {
  for (int machines : {2, 3, 4, 5, 7, 8, 9, 12, 16, 17}) {
    for (int local : {1, 2, 3}) {
      const int world = machines * local;
      std::vector<std::unique_ptr<Schedule>> per_machine;
      for (int rank = 0; rank < world; ++rank) {
        auto s = Exp2Machine(world, local, rank, rank % local);
        for (int i = 0; i < 20; ++i) {
          const Step got = s->Next(), want = ref::Exp2Machine(world, local, rank, i);
          EXPECT_EQ(got.send, want.send)
              << world << "/" << local << " rank " << rank << " step " << i;
          EXPECT_EQ(got.recv, want.recv)
              << world << "/" << local << " rank " << rank << " step " << i;
        }
        if (rank % local == 0) per_machine.push_back(Exp2Machine(world, local, rank, 0));
      }
      ExpectTransposed(RunAll(per_machine, 20));
    }
  }
}

TEST(Exp2Machine, BadLayouts) {
  EXPECT_INVALID_ARGUMENT(Exp2Machine(8, 2, 3, 0),
                          "local_rank 0 does not match rank 3 % local_size 2 = 1");
  EXPECT_INVALID_ARGUMENT(Exp2Machine(9, 2, 0, 0),
                          "world_size 9 is not a multiple of local_size 2");
  EXPECT_INVALID_ARGUMENT(Exp2Machine(4, 4, 1, 1), "needs at least 2 machines");
  EXPECT_INVALID_ARGUMENT(Exp2Machine(8, 0, 0, 0), "local_size must be >= 1, got 0");
  EXPECT_INVALID_ARGUMENT(Exp2Machine(0, 1, 0, 0), "world_size must be >= 1, got 0");
  EXPECT_INVALID_ARGUMENT(Exp2Machine(8, 2, 8, 0), "rank 8 is out of range for world_size 8");
  EXPECT_INVALID_ARGUMENT(Exp2Machine(8, 2, -1, 1), "rank -1 is out of range");
}

// Hand-derived steps 0..3 for 2 machines of 4 ranks (period 4): {send, recv} per rank.
const int kRing8x4[4][8][2] = {
    {{4, 4}, {2, 3}, {3, 1}, {1, 2}, {0, 0}, {6, 7}, {7, 5}, {5, 6}},
    {{2, 3}, {5, 5}, {3, 0}, {0, 2}, {6, 7}, {1, 1}, {7, 4}, {4, 6}},
    {{1, 3}, {3, 0}, {6, 6}, {0, 1}, {5, 7}, {7, 4}, {2, 2}, {4, 5}},
    {{1, 2}, {2, 0}, {0, 1}, {7, 7}, {5, 6}, {6, 4}, {4, 5}, {3, 3}},
};
const int kExpo8x4[4][8][2] = {
    {{4, 4}, {2, 3}, {3, 1}, {1, 2}, {0, 0}, {6, 7}, {7, 5}, {5, 6}},
    {{3, 2}, {5, 5}, {0, 3}, {2, 0}, {7, 6}, {1, 1}, {4, 7}, {6, 4}},
    {{1, 3}, {3, 0}, {6, 6}, {0, 1}, {5, 7}, {7, 4}, {2, 2}, {4, 5}},
    {{2, 1}, {0, 2}, {1, 0}, {7, 7}, {6, 5}, {4, 6}, {5, 4}, {3, 3}},
};

void ExpectTable(std::unique_ptr<Schedule> (*make)(int, int, int), const int (&table)[4][8][2]) {
  for (int rank = 0; rank < 8; ++rank) {
    auto s = make(8, 4, rank);
    for (int i = 0; i < 12; ++i) {
      const Step step = s->Next();
      EXPECT_EQ(step.send, std::vector<int>{table[i % 4][rank][0]})
          << "rank " << rank << " step " << i;
      EXPECT_EQ(step.recv, std::vector<int>{table[i % 4][rank][1]})
          << "rank " << rank << " step " << i;
    }
  }
}

TEST(InnerOuterRing, SpecExample) { ExpectTable(InnerOuterRing, kRing8x4); }
TEST(InnerOuterExpo2, SpecExample) { ExpectTable(InnerOuterExpo2, kExpo8x4); }

void ExpectInnerOuterMatches(bool expo2) {
  const std::vector<std::pair<int, int>> layouts = {{6, 3},   {9, 3},   {8, 4},   {12, 4}, {20, 4},
                                                    {15, 5},  {12, 6},  {16, 8},  {24, 8}, {30, 3},
                                                    {33, 11}, {36, 12}, {26, 13}, {48, 16}};
  for (auto [world, local] : layouts) {
    SCOPED_TRACE(std::to_string(world) + "/" + std::to_string(local));
    std::vector<std::unique_ptr<Schedule>> all;
    for (int rank = 0; rank < world; ++rank) {
      all.push_back(expo2 ? InnerOuterExpo2(world, local, rank)
                          : InnerOuterRing(world, local, rank));
    }
    const auto steps = RunAll(all, 3 * local + 5);
    for (size_t i = 0; i < steps.size(); ++i) {
      for (int rank = 0; rank < world; ++rank) {
        const Step want = expo2 ? ref::InnerOuterExpo2(world, local, rank, static_cast<int>(i))
                                : ref::InnerOuterRing(world, local, rank, static_cast<int>(i));
        EXPECT_EQ(steps[i][rank].send, want.send) << "rank " << rank << " step " << i;
        EXPECT_EQ(steps[i][rank].recv, want.recv) << "rank " << rank << " step " << i;
      }
    }
    ExpectTransposed(steps);
  }
}

TEST(InnerOuterRing, MatchesBlueFogTranscription) { ExpectInnerOuterMatches(false); }
TEST(InnerOuterExpo2, MatchesBlueFogTranscription) { ExpectInnerOuterMatches(true); }

// One machine: BlueFog makes the outside rank its own peer; self is excluded here, so
// it idles while the others ring around it.
TEST(InnerOuterRing, SingleMachineOutsideRankIdles) {
  std::vector<std::unique_ptr<Schedule>> all;
  for (int rank = 0; rank < 4; ++rank) all.push_back(InnerOuterRing(4, 4, rank));
  const auto steps = RunAll(all, 10);
  for (int i = 0; i < 10; ++i) {
    for (int rank = 0; rank < 4; ++rank) {
      const Step want = ref::InnerOuterRing(4, 4, rank, i);
      if (rank == i % 4) {
        EXPECT_EQ(want.send, std::vector<int>{rank});  // BlueFog's self-send
        EXPECT_TRUE(steps[i][rank].send.empty());
        EXPECT_TRUE(steps[i][rank].recv.empty());
      } else {
        EXPECT_EQ(steps[i][rank].send, want.send);
        EXPECT_EQ(steps[i][rank].recv, want.recv);
      }
    }
  }
  ExpectTransposed(steps);
}

TEST(InnerOuter, BadLayouts) {
  EXPECT_INVALID_ARGUMENT(InnerOuterRing(8, 2, 0), "local_size must be > 2, got 2");
  EXPECT_INVALID_ARGUMENT(InnerOuterExpo2(8, 2, 0), "local_size must be > 2, got 2");
  EXPECT_INVALID_ARGUMENT(InnerOuterRing(10, 4, 0),
                          "world_size 10 is not a multiple of local_size 4");
  EXPECT_INVALID_ARGUMENT(InnerOuterExpo2(10, 4, 0), "not a multiple");
  EXPECT_INVALID_ARGUMENT(InnerOuterRing(8, 4, 8), "rank 8 is out of range for world_size 8");
  EXPECT_INVALID_ARGUMENT(InnerOuterExpo2(8, 4, -2), "rank -2 is out of range");
  EXPECT_INVALID_ARGUMENT(InnerOuterRing(8, 0, 0), "local_size must be >= 1");
  EXPECT_INVALID_ARGUMENT(InnerOuterExpo2(4, 4, 0),
                          "inner-outer expo2 schedule: needs at least 2 machines, got world_size 4 "
                          "/ local_size 4 = 1");
}

}  // namespace
}  // namespace starling::topology
