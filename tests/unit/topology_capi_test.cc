// Tests of the C ABI for topologies and dynamic schedules (capi/topology.cc): every
// starling_topology_* and starling_schedule_* function, good and bad input. Only the
// public header is used, so this links against libstarling alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "starling/starling.h"

namespace {

// A handle value that was never issued.
template <typename Handle>
Handle Bogus() {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(0x7fffffffffffULL));
}

// Sentinel written into *out before a call that must clear it on failure.
template <typename Handle>
Handle Stale() {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(0xdead));
}

::testing::AssertionResult Fails(starling_status_t status, starling_status_t expected,
                                 const std::string& message) {
  if (status != expected) {
    return ::testing::AssertionFailure() << "status " << status << ", expected " << expected << " ("
                                         << starling_last_error() << ")";
  }
  const std::string last = starling_last_error();
  if (last.find(message) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "last error \"" << last << "\" lacks \"" << message << "\"";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult InvalidArgument(starling_status_t status, const std::string& message) {
  return Fails(status, STARLING_ERR_INVALID_ARGUMENT, message);
}

::testing::AssertionResult InvalidHandle(starling_status_t status, const std::string& message) {
  return Fails(status, STARLING_ERR_INVALID_HANDLE, message);
}

struct Edges {
  std::vector<int> src, dst;
  std::vector<double> w;
};

Edges GetEdges(starling_topology_t t) {
  int n = -1;
  EXPECT_EQ(starling_topology_num_edges(t, &n), STARLING_SUCCESS);
  Edges e{std::vector<int>(n), std::vector<int>(n), std::vector<double>(n)};
  EXPECT_EQ(starling_topology_edges(t, e.src.data(), e.dst.data(), e.w.data(), n),
            STARLING_SUCCESS);
  return e;
}

// A circulant graph built edge by edge through the C ABI: i -> i + d for each offset.
starling_topology_t Circulant(int size, const std::vector<int>& offsets, double weight) {
  std::vector<int> src, dst;
  std::vector<double> w;
  for (int i = 0; i < size; ++i) {
    for (int d : offsets) {
      src.push_back(i);
      dst.push_back((i + d) % size);
      w.push_back(weight);
    }
  }
  starling_topology_t t = nullptr;
  EXPECT_EQ(starling_topology_create(size, static_cast<int>(src.size()), src.data(), dst.data(),
                                     w.data(), &t),
            STARLING_SUCCESS);
  return t;
}

// Frees both handles after checking that they hold the same weighted edges.
void ExpectEquivalentAndFree(starling_topology_t got, starling_topology_t want) {
  int same = -1;
  EXPECT_EQ(starling_topology_is_equivalent(got, want, &same), STARLING_SUCCESS);
  EXPECT_EQ(same, 1);
  const Edges a = GetEdges(got), b = GetEdges(want);
  EXPECT_EQ(a.src, b.src);
  EXPECT_EQ(a.dst, b.dst);
  EXPECT_EQ(a.w, b.w);
  EXPECT_EQ(starling_topology_free(got), STARLING_SUCCESS);
  EXPECT_EQ(starling_topology_free(want), STARLING_SUCCESS);
}

// ---- creation -----------------------------------------------------------------------

TEST(TopologyCApi, CreateFromEdges) {
  const int src[] = {2, 0, 0, 1};
  const int dst[] = {0, 0, 1, 0};
  const double w[] = {0.5, 0.25, 0.75, 1.5};
  starling_topology_t t = nullptr;
  ASSERT_EQ(starling_topology_create(3, 4, src, dst, w, &t), STARLING_SUCCESS);
  ASSERT_NE(t, nullptr);
  int size = 0, n = 0;
  EXPECT_EQ(starling_topology_size(t, &size), STARLING_SUCCESS);
  EXPECT_EQ(size, 3);
  EXPECT_EQ(starling_topology_num_edges(t, &n), STARLING_SUCCESS);
  EXPECT_EQ(n, 4);
  const Edges e = GetEdges(t);  // sorted by (source, destination)
  EXPECT_EQ(e.src, (std::vector<int>{0, 0, 1, 2}));
  EXPECT_EQ(e.dst, (std::vector<int>{0, 1, 0, 0}));
  EXPECT_EQ(e.w, (std::vector<double>{0.25, 0.75, 1.5, 0.5}));
  EXPECT_EQ(starling_topology_free(t), STARLING_SUCCESS);

  // weights NULL: every weight 1.0.
  ASSERT_EQ(starling_topology_create(3, 4, src, dst, nullptr, &t), STARLING_SUCCESS);
  EXPECT_EQ(GetEdges(t).w, (std::vector<double>{1.0, 1.0, 1.0, 1.0}));
  EXPECT_EQ(starling_topology_free(t), STARLING_SUCCESS);

  // No edges at all: the arrays may be NULL.
  ASSERT_EQ(starling_topology_create(2, 0, nullptr, nullptr, nullptr, &t), STARLING_SUCCESS);
  EXPECT_EQ(starling_topology_num_edges(t, &n), STARLING_SUCCESS);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(starling_topology_edges(t, nullptr, nullptr, nullptr, 0), STARLING_SUCCESS);
  EXPECT_EQ(starling_topology_free(t), STARLING_SUCCESS);
}

TEST(TopologyCApi, CreateBadInput) {
  const int src[] = {0, 1};
  const int dst[] = {1, 0};
  starling_topology_t t = Stale<starling_topology_t>();
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, src, dst, nullptr, nullptr),
                              "out must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_create(0, 0, nullptr, nullptr, nullptr, &t),
                              "topology size must be >= 1, got 0"));
  EXPECT_EQ(t, nullptr);  // cleared on failure
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, -1, src, dst, nullptr, &t),
                              "num_edges must be >= 0, got -1"));
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, nullptr, dst, nullptr, &t),
                              "sources and destinations must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, src, nullptr, nullptr, &t),
                              "sources and destinations must not be NULL"));
  const int far[] = {1, 2};
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, src, far, nullptr, &t),
                              "edge 1 (1 -> 2): destination rank 2 is out of range for size 2"));
  const double nan_w[] = {1.0, NAN};
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, src, dst, nan_w, &t),
                              "edge 1 (1 -> 0) has weight nan"));
  const double neg_w[] = {-1.0, 1.0};
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, src, dst, neg_w, &t),
                              "edge 0 (0 -> 1) has weight -1"));
  const double inf_w[] = {1.0, INFINITY};
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, src, dst, inf_w, &t), "weight inf"));
  const int dup_src[] = {0, 0};
  const int dup_dst[] = {1, 1};
  EXPECT_TRUE(InvalidArgument(starling_topology_create(2, 2, dup_src, dup_dst, nullptr, &t),
                              "edge 1 (0 -> 1) repeats edge 0"));
  EXPECT_EQ(t, nullptr);
}

TEST(TopologyCApi, Generators) {
  starling_topology_t t = nullptr;
  ASSERT_EQ(starling_topology_exponential_two(8, &t), STARLING_SUCCESS);
  ExpectEquivalentAndFree(t, Circulant(8, {0, 1, 2, 4}, 0.25));

  ASSERT_EQ(starling_topology_exponential(244, 3, &t), STARLING_SUCCESS);  // exact 3^5
  ExpectEquivalentAndFree(t, Circulant(244, {0, 1, 3, 9, 27, 81, 243}, 1.0 / 7));
  ASSERT_EQ(starling_topology_exponential(12, 2, &t), STARLING_SUCCESS);
  ExpectEquivalentAndFree(t, Circulant(12, {0, 1, 2, 4, 8}, 1.0 / 5));

  ASSERT_EQ(starling_topology_symmetric_exponential(16, 4, &t), STARLING_SUCCESS);
  ExpectEquivalentAndFree(t, Circulant(16, {0, 1, 4, 12, 15}, 1.0 / 5));

  for (starling_ring_style_t style :
       {STARLING_RING_BIDIRECTIONAL, STARLING_RING_LEFT, STARLING_RING_RIGHT}) {
    ASSERT_EQ(starling_topology_ring(7, style, &t), STARLING_SUCCESS);
    if (style == STARLING_RING_BIDIRECTIONAL)
      ExpectEquivalentAndFree(t, Circulant(7, {0, 1, 6}, 1.0 / 3));
    if (style == STARLING_RING_LEFT) ExpectEquivalentAndFree(t, Circulant(7, {0, 6}, 0.5));
    if (style == STARLING_RING_RIGHT) ExpectEquivalentAndFree(t, Circulant(7, {0, 1}, 0.5));
  }

  ASSERT_EQ(starling_topology_fully_connected(3, &t), STARLING_SUCCESS);
  ExpectEquivalentAndFree(t, Circulant(3, {0, 1, 2}, 1.0 / 3));

  // Star, center 2 of 5: the center row is all 1/5; a leaf keeps 4/5 and sends 1/5.
  ASSERT_EQ(starling_topology_star(5, 2, &t), STARLING_SUCCESS);
  const Edges star = GetEdges(t);
  EXPECT_EQ(star.src, (std::vector<int>{0, 0, 1, 1, 2, 2, 2, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(star.dst, (std::vector<int>{0, 2, 1, 2, 0, 1, 2, 3, 4, 2, 3, 2, 4}));
  const double c = 1.0 / 5, l = 1.0 - 1.0 / 5;
  EXPECT_EQ(star.w, (std::vector<double>{l, c, l, c, c, c, c, c, c, c, l, c, l}));
  EXPECT_EQ(starling_topology_free(t), STARLING_SUCCESS);

  // Mesh 24 is 4x6 with Metropolis-Hastings weights; rank 7 is interior.
  ASSERT_EQ(starling_topology_mesh_grid_2d(24, 0, 0, &t), STARLING_SUCCESS);
  int ranks[4], count = 0;
  double weights[4], self = 0;
  EXPECT_EQ(starling_topology_recv_weights(t, 7, &self, ranks, weights, 4, &count),
            STARLING_SUCCESS);
  EXPECT_EQ(count, 4);
  EXPECT_EQ(std::vector<int>(ranks, ranks + 4), (std::vector<int>{1, 6, 8, 13}));
  EXPECT_EQ(std::vector<double>(weights, weights + 4), std::vector<double>(4, 0.2));
  EXPECT_EQ(self, 0x1.99999999999ap-3);  // numpy's 2.0 - sum(row)
  starling_topology_t explicit_shape = nullptr;
  ASSERT_EQ(starling_topology_mesh_grid_2d(24, 4, 6, &explicit_shape), STARLING_SUCCESS);
  ExpectEquivalentAndFree(t, explicit_shape);
  ASSERT_EQ(starling_topology_mesh_grid_2d(4, 2, 2, &t), STARLING_SUCCESS);
  EXPECT_EQ(starling_topology_recv_weights(t, 3, &self, ranks, weights, 4, &count),
            STARLING_SUCCESS);
  EXPECT_EQ(std::vector<int>(ranks, ranks + count), (std::vector<int>{1, 2}));
  EXPECT_EQ(std::vector<double>(weights, weights + count), std::vector<double>(2, 1.0 / 3));
  EXPECT_EQ(starling_topology_free(t), STARLING_SUCCESS);
}

TEST(TopologyCApi, GeneratorsBadInput) {
  starling_topology_t t = Stale<starling_topology_t>();
  EXPECT_TRUE(
      InvalidArgument(starling_topology_exponential_two(0, &t), "size must be >= 1, got 0"));
  EXPECT_EQ(t, nullptr);
  EXPECT_TRUE(
      InvalidArgument(starling_topology_exponential_two(4, nullptr), "out must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_exponential(8, 1, &t), "base must be >= 2, got 1"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_exponential(8, 2, nullptr), "out must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_symmetric_exponential(-1, 4, &t), "got -1"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_symmetric_exponential(8, 0, &t), "base must be >= 2"));
  EXPECT_TRUE(InvalidArgument(starling_topology_mesh_grid_2d(8, 3, 3, &t),
                              "mesh shape 3x3 does not match size 8"));
  EXPECT_TRUE(InvalidArgument(starling_topology_mesh_grid_2d(8, 0, 8, &t), "mesh shape 0x8"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_mesh_grid_2d(4, 2, 2, nullptr), "out must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_star(4, 5, &t),
                              "star center 5 is out of range for size 4"));
  EXPECT_TRUE(InvalidArgument(starling_topology_star(0, 0, &t), "size must be >= 1"));
  EXPECT_TRUE(InvalidArgument(starling_topology_ring(8, static_cast<starling_ring_style_t>(3), &t),
                              "ring style 3 is not 0 (bidirectional), 1 (left) or 2 (right)"));
  EXPECT_TRUE(InvalidArgument(starling_topology_ring(8, STARLING_RING_LEFT, nullptr),
                              "out must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_fully_connected(0, &t), "size must be >= 1"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_fully_connected(1, nullptr), "out must not be NULL"));
  EXPECT_EQ(t, nullptr);
}

// ---- handles ------------------------------------------------------------------------

TEST(TopologyCApi, FreedNullAndUnknownHandles) {
  starling_topology_t t = nullptr;
  ASSERT_EQ(starling_topology_ring(4, STARLING_RING_BIDIRECTIONAL, &t), STARLING_SUCCESS);
  ASSERT_EQ(starling_topology_free(t), STARLING_SUCCESS);
  EXPECT_TRUE(InvalidHandle(starling_topology_free(t), "already freed"));  // double free

  int out = 0, count = 0;
  double self = 0;
  int ranks[8];
  double weights[8];
  EXPECT_TRUE(InvalidHandle(starling_topology_size(t, &out), "already freed"));
  EXPECT_TRUE(InvalidHandle(starling_topology_num_edges(t, &out), "already freed"));
  EXPECT_TRUE(InvalidHandle(starling_topology_edges(t, ranks, ranks, weights, 8), "already freed"));
  EXPECT_TRUE(
      InvalidHandle(starling_topology_in_neighbors(t, 0, ranks, 8, &count), "already freed"));
  EXPECT_TRUE(
      InvalidHandle(starling_topology_out_neighbors(t, 0, ranks, 8, &count), "already freed"));
  EXPECT_TRUE(InvalidHandle(starling_topology_recv_weights(t, 0, &self, ranks, weights, 8, &count),
                            "already freed"));
  EXPECT_TRUE(InvalidHandle(starling_topology_send_weights(t, 0, &self, ranks, weights, 8, &count),
                            "already freed"));
  EXPECT_TRUE(InvalidHandle(starling_topology_is_regular(t, &out), "already freed"));
  EXPECT_TRUE(InvalidHandle(starling_topology_is_equivalent(t, t, &out), "already freed"));

  EXPECT_TRUE(InvalidHandle(starling_topology_free(nullptr), "topology handle is NULL"));
  EXPECT_TRUE(InvalidHandle(starling_topology_size(nullptr, &out), "topology handle is NULL"));
  EXPECT_TRUE(InvalidHandle(starling_topology_size(Bogus<starling_topology_t>(), &out),
                            "is not a valid topology"));
  EXPECT_TRUE(InvalidHandle(starling_topology_free(Bogus<starling_topology_t>()),
                            "is not a valid topology"));
}

TEST(TopologyCApi, ConcurrentCreateQueryFree) {
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([i, &failures] {
      for (int k = 0; k < 200; ++k) {
        starling_topology_t t = nullptr;
        int size = 0;
        failures[i] += starling_topology_exponential_two(1 + (k + i) % 16, &t) != STARLING_SUCCESS;
        failures[i] += starling_topology_size(t, &size) != STARLING_SUCCESS;
        failures[i] += size != 1 + (k + i) % 16;
        failures[i] += starling_topology_free(t) != STARLING_SUCCESS;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

// ---- queries ------------------------------------------------------------------------

class TopologyQueries : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(starling_topology_exponential_two(8, &exp8_), STARLING_SUCCESS);
    ASSERT_EQ(starling_topology_star(4, 0, &star_), STARLING_SUCCESS);
    const int src[] = {0, 1};
    const int dst[] = {1, 2};
    ASSERT_EQ(starling_topology_create(3, 2, src, dst, nullptr, &path_), STARLING_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(starling_topology_free(exp8_), STARLING_SUCCESS);
    EXPECT_EQ(starling_topology_free(star_), STARLING_SUCCESS);
    EXPECT_EQ(starling_topology_free(path_), STARLING_SUCCESS);
  }
  starling_topology_t exp8_ = nullptr, star_ = nullptr, path_ = nullptr;
};

TEST_F(TopologyQueries, SizeAndEdges) {
  int out = 0;
  EXPECT_EQ(starling_topology_size(exp8_, &out), STARLING_SUCCESS);
  EXPECT_EQ(out, 8);
  EXPECT_EQ(starling_topology_num_edges(exp8_, &out), STARLING_SUCCESS);
  EXPECT_EQ(out, 32);
  EXPECT_TRUE(InvalidArgument(starling_topology_size(exp8_, nullptr), "out must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_num_edges(exp8_, nullptr), "out must not be NULL"));

  std::vector<int> s(32), d(32);
  std::vector<double> w(32);
  EXPECT_EQ(starling_topology_edges(exp8_, s.data(), d.data(), w.data(), 40), STARLING_SUCCESS);
  EXPECT_EQ(s[4], 1);
  EXPECT_EQ(d[4], 1);
  EXPECT_EQ(d[7], 5);
  EXPECT_TRUE(InvalidArgument(starling_topology_edges(exp8_, s.data(), d.data(), w.data(), 31),
                              "the topology has 32 edges but capacity is 31"));
  EXPECT_TRUE(InvalidArgument(starling_topology_edges(exp8_, nullptr, nullptr, nullptr, 0),
                              "the topology has 32 edges but capacity is 0"));
  EXPECT_TRUE(InvalidArgument(starling_topology_edges(exp8_, s.data(), nullptr, w.data(), 32),
                              "destinations is NULL but capacity is 32"));
  EXPECT_TRUE(InvalidArgument(starling_topology_edges(exp8_, nullptr, d.data(), w.data(), 32),
                              "sources is NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_edges(exp8_, s.data(), d.data(), nullptr, 32),
                              "weights is NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_edges(exp8_, s.data(), d.data(), w.data(), -1),
                              "capacity must be >= 0, got -1"));
}

TEST_F(TopologyQueries, Neighbors) {
  int ranks[8] = {0};
  int count = -1;
  EXPECT_EQ(starling_topology_in_neighbors(exp8_, 3, ranks, 8, &count), STARLING_SUCCESS);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(std::vector<int>(ranks, ranks + 3), (std::vector<int>{1, 2, 7}));
  EXPECT_EQ(starling_topology_out_neighbors(exp8_, 3, ranks, 3, &count), STARLING_SUCCESS);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(std::vector<int>(ranks, ranks + 3), (std::vector<int>{4, 5, 7}));

  // Capacity too small: INVALID_ARGUMENT, but *count holds the full count.
  count = -1;
  EXPECT_TRUE(InvalidArgument(starling_topology_in_neighbors(exp8_, 3, nullptr, 0, &count),
                              "rank 3 has 3 in-neighbors (self excluded) but capacity is 0"));
  EXPECT_EQ(count, 3);
  count = -1;
  EXPECT_TRUE(InvalidArgument(starling_topology_out_neighbors(exp8_, 3, ranks, 2, &count),
                              "rank 3 has 3 out-neighbors (self excluded) but capacity is 2"));
  EXPECT_EQ(count, 3);

  // Zero neighbors: NULL with capacity 0 succeeds.
  EXPECT_EQ(starling_topology_in_neighbors(path_, 0, nullptr, 0, &count), STARLING_SUCCESS);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(starling_topology_out_neighbors(path_, 2, nullptr, 0, &count), STARLING_SUCCESS);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(starling_topology_in_neighbors(path_, 2, ranks, 1, &count), STARLING_SUCCESS);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ranks[0], 1);

  EXPECT_TRUE(InvalidArgument(starling_topology_in_neighbors(exp8_, 8, ranks, 8, &count),
                              "rank 8 is out of range for a topology of size 8"));
  EXPECT_TRUE(InvalidArgument(starling_topology_out_neighbors(exp8_, -1, ranks, 8, &count),
                              "rank -1 is out of range"));
  EXPECT_TRUE(InvalidArgument(starling_topology_in_neighbors(exp8_, 0, ranks, 8, nullptr),
                              "count must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_topology_out_neighbors(exp8_, 0, nullptr, 4, &count),
                              "ranks is NULL but capacity is 4"));
  EXPECT_TRUE(InvalidArgument(starling_topology_in_neighbors(exp8_, 0, ranks, -2, &count),
                              "capacity must be >= 0, got -2"));
  EXPECT_TRUE(InvalidHandle(starling_topology_in_neighbors(nullptr, 0, ranks, 8, &count),
                            "topology handle is NULL"));
}

TEST_F(TopologyQueries, Weights) {
  int ranks[4] = {0};
  double weights[4] = {0};
  double self = -1;
  int count = -1;
  // Star center 0: receives 1/4 from everyone, keeps 1/4.
  EXPECT_EQ(starling_topology_recv_weights(star_, 0, &self, ranks, weights, 4, &count),
            STARLING_SUCCESS);
  EXPECT_EQ(self, 0.25);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(std::vector<int>(ranks, ranks + 3), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(std::vector<double>(weights, weights + 3), (std::vector<double>{0.25, 0.25, 0.25}));
  // A leaf: keeps 3/4, receives 1/4 from the center and sends 1/4 to it.
  EXPECT_EQ(starling_topology_recv_weights(star_, 2, &self, ranks, weights, 1, &count),
            STARLING_SUCCESS);
  EXPECT_EQ(self, 0.75);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ranks[0], 0);
  EXPECT_EQ(weights[0], 0.25);
  EXPECT_EQ(starling_topology_send_weights(star_, 0, &self, ranks, weights, 4, &count),
            STARLING_SUCCESS);
  EXPECT_EQ(self, 0.25);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(std::vector<int>(ranks, ranks + 3), (std::vector<int>{1, 2, 3}));

  // No self-loop: self weight 0.
  EXPECT_EQ(starling_topology_send_weights(path_, 1, &self, ranks, weights, 4, &count),
            STARLING_SUCCESS);
  EXPECT_EQ(self, 0.0);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(ranks[0], 2);
  EXPECT_EQ(weights[0], 1.0);

  count = -1;
  EXPECT_TRUE(
      InvalidArgument(starling_topology_recv_weights(star_, 0, &self, ranks, weights, 2, &count),
                      "rank 0 has 3 in-neighbors (self excluded) but capacity is 2"));
  EXPECT_EQ(count, 3);
  count = -1;
  EXPECT_TRUE(
      InvalidArgument(starling_topology_send_weights(star_, 0, &self, nullptr, nullptr, 0, &count),
                      "rank 0 has 3 out-neighbors (self excluded) but capacity is 0"));
  EXPECT_EQ(count, 3);
  EXPECT_TRUE(
      InvalidArgument(starling_topology_recv_weights(star_, 0, nullptr, ranks, weights, 4, &count),
                      "self_weight must not be NULL"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_send_weights(star_, 0, &self, ranks, weights, 4, nullptr),
                      "count must not be NULL"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_recv_weights(star_, 0, &self, ranks, nullptr, 4, &count),
                      "weights is NULL but capacity is 4"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_send_weights(star_, 0, &self, nullptr, weights, 4, &count),
                      "ranks is NULL but capacity is 4"));
  EXPECT_TRUE(
      InvalidArgument(starling_topology_recv_weights(star_, 4, &self, ranks, weights, 4, &count),
                      "rank 4 is out of range for a topology of size 4"));
  EXPECT_TRUE(InvalidHandle(
      starling_topology_send_weights(nullptr, 0, &self, ranks, weights, 4, &count), "NULL"));
}

TEST_F(TopologyQueries, RegularAndEquivalent) {
  int out = -1;
  EXPECT_EQ(starling_topology_is_regular(exp8_, &out), STARLING_SUCCESS);
  EXPECT_EQ(out, 1);
  EXPECT_EQ(starling_topology_is_regular(star_, &out), STARLING_SUCCESS);
  EXPECT_EQ(out, 0);
  EXPECT_TRUE(
      InvalidArgument(starling_topology_is_regular(star_, nullptr), "out must not be NULL"));

  starling_topology_t other = nullptr;
  ASSERT_EQ(starling_topology_exponential(8, 2, &other), STARLING_SUCCESS);
  EXPECT_EQ(starling_topology_is_equivalent(exp8_, other, &out), STARLING_SUCCESS);
  EXPECT_EQ(out, 1);
  EXPECT_EQ(starling_topology_is_equivalent(exp8_, star_, &out), STARLING_SUCCESS);
  EXPECT_EQ(out, 0);
  EXPECT_TRUE(InvalidArgument(starling_topology_is_equivalent(exp8_, other, nullptr),
                              "out must not be NULL"));
  ASSERT_EQ(starling_topology_free(other), STARLING_SUCCESS);
  EXPECT_TRUE(InvalidHandle(starling_topology_is_equivalent(exp8_, other, &out), "already freed"));
  EXPECT_TRUE(InvalidHandle(starling_topology_is_equivalent(nullptr, exp8_, &out), "NULL"));
}

// ---- schedules ----------------------------------------------------------------------

struct StepResult {
  starling_status_t status;
  std::vector<int> send, recv;
};

StepResult Next(starling_schedule_t s) {
  int send[16], recv[16], ns = -1, nr = -1;
  StepResult r;
  r.status = starling_schedule_next(s, send, 16, &ns, recv, 16, &nr);
  if (r.status == STARLING_SUCCESS) {
    r.send.assign(send, send + ns);
    r.recv.assign(recv, recv + nr);
  }
  return r;
}

TEST(ScheduleCApi, DynamicOnePeer) {
  starling_topology_t t = nullptr;
  ASSERT_EQ(starling_topology_exponential_two(8, &t), STARLING_SUCCESS);
  starling_schedule_t s = nullptr;
  ASSERT_EQ(starling_schedule_dynamic_one_peer(t, 5, &s), STARLING_SUCCESS);
  ASSERT_EQ(starling_topology_free(t), STARLING_SUCCESS);  // the schedule does not need it
  for (int i = 0; i < 12; ++i) {
    const int d = 1 << (i % 3);
    const StepResult r = Next(s);
    ASSERT_EQ(r.status, STARLING_SUCCESS) << starling_last_error();
    EXPECT_EQ(r.send, std::vector<int>{(5 + d) % 8}) << i;
    EXPECT_EQ(r.recv, std::vector<int>{(5 + 8 - d) % 8}) << i;
  }
  EXPECT_EQ(starling_schedule_free(s), STARLING_SUCCESS);
  EXPECT_TRUE(InvalidHandle(starling_schedule_free(s), "schedule #"));
  EXPECT_TRUE(InvalidHandle(starling_schedule_free(s), "already freed"));
  EXPECT_TRUE(InvalidHandle(Next(s).status, "already freed"));
}

TEST(ScheduleCApi, DynamicOnePeerBadInput) {
  starling_schedule_t s = Stale<starling_schedule_t>();
  starling_topology_t t = nullptr;
  ASSERT_EQ(starling_topology_exponential_two(4, &t), STARLING_SUCCESS);
  EXPECT_TRUE(InvalidArgument(starling_schedule_dynamic_one_peer(t, 4, &s),
                              "rank 4 is out of range for a topology of size 4"));
  EXPECT_EQ(s, nullptr);
  EXPECT_TRUE(
      InvalidArgument(starling_schedule_dynamic_one_peer(t, 0, nullptr), "out must not be NULL"));
  ASSERT_EQ(starling_topology_free(t), STARLING_SUCCESS);
  EXPECT_TRUE(InvalidHandle(starling_schedule_dynamic_one_peer(t, 0, &s), "already freed"));
  EXPECT_TRUE(
      InvalidHandle(starling_schedule_dynamic_one_peer(nullptr, 0, &s), "topology handle is NULL"));

  const int src[] = {0, 1, 2};
  const int dst[] = {1, 2, 0};
  ASSERT_EQ(starling_topology_create(3, 3, src, dst, nullptr, &t), STARLING_SUCCESS);
  EXPECT_TRUE(
      InvalidArgument(starling_schedule_dynamic_one_peer(t, 1, &s), "rank 0 has no self-loop"));
  ASSERT_EQ(starling_topology_free(t), STARLING_SUCCESS);
  ASSERT_EQ(starling_topology_fully_connected(1, &t), STARLING_SUCCESS);
  EXPECT_TRUE(InvalidArgument(starling_schedule_dynamic_one_peer(t, 0, &s),
                              "rank 0 has no out-neighbor besides itself"));
  ASSERT_EQ(starling_topology_free(t), STARLING_SUCCESS);
  EXPECT_EQ(s, nullptr);
}

TEST(ScheduleCApi, NextChecksArgumentsAndDoesNotAdvanceOnShortArrays) {
  starling_topology_t t = nullptr;
  ASSERT_EQ(starling_topology_star(4, 0, &t), STARLING_SUCCESS);
  starling_schedule_t s = nullptr;
  ASSERT_EQ(starling_schedule_dynamic_one_peer(t, 0, &s), STARLING_SUCCESS);
  ASSERT_EQ(starling_topology_free(t), STARLING_SUCCESS);

  // The center sends to 1, 2, 3 in turn and hears from all three leaves every step.
  int send[4], recv[4], ns = -1, nr = -1;
  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, nullptr, 0, &ns, nullptr, 0, &nr),
                              "this step has 1 send rank(s) but send_capacity is 0"));
  EXPECT_EQ(ns, 1);
  EXPECT_EQ(nr, 3);
  ns = nr = -1;
  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, send, 1, &ns, recv, 2, &nr),
                              "this step has 3 recv rank(s) but recv_capacity is 2"));
  EXPECT_EQ(ns, 1);
  EXPECT_EQ(nr, 3);
  // Still step 0.
  EXPECT_EQ(starling_schedule_next(s, send, 1, &ns, recv, 3, &nr), STARLING_SUCCESS);
  EXPECT_EQ(std::vector<int>(send, send + ns), std::vector<int>{1});
  EXPECT_EQ(std::vector<int>(recv, recv + nr), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(Next(s).send, std::vector<int>{2});
  EXPECT_EQ(Next(s).send, std::vector<int>{3});
  EXPECT_EQ(Next(s).send, std::vector<int>{1});

  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, send, 4, nullptr, recv, 4, &nr),
                              "send_count must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, send, 4, &ns, recv, 4, nullptr),
                              "recv_count must not be NULL"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, nullptr, 4, &ns, recv, 4, &nr),
                              "send_ranks is NULL but send_capacity is 4"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, send, 4, &ns, nullptr, 1, &nr),
                              "recv_ranks is NULL but recv_capacity is 1"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, send, -1, &ns, recv, 4, &nr),
                              "send_capacity must be >= 0, got -1"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_next(s, send, 4, &ns, recv, -3, &nr),
                              "recv_capacity must be >= 0, got -3"));
  // None of the rejected calls advanced it: step 4 sends to 2.
  EXPECT_EQ(Next(s).send, std::vector<int>{2});

  EXPECT_TRUE(InvalidHandle(starling_schedule_next(nullptr, send, 4, &ns, recv, 4, &nr),
                            "schedule handle is NULL"));
  EXPECT_TRUE(InvalidHandle(
      starling_schedule_next(Bogus<starling_schedule_t>(), send, 4, &ns, recv, 4, &nr),
      "is not a valid schedule"));
  EXPECT_EQ(starling_schedule_free(s), STARLING_SUCCESS);
  EXPECT_TRUE(InvalidHandle(starling_schedule_free(nullptr), "schedule handle is NULL"));
}

TEST(ScheduleCApi, Exp2Machine) {
  starling_schedule_t s = nullptr;
  ASSERT_EQ(starling_schedule_exp2_machine(8, 2, 5, 1, &s), STARLING_SUCCESS);  // machine 2 of 4
  for (int i = 0; i < 10; ++i) {
    const StepResult r = Next(s);
    EXPECT_EQ(r.send, std::vector<int>{i % 2 == 0 ? 3 : 0}) << i;
    EXPECT_EQ(r.recv, std::vector<int>{i % 2 == 0 ? 1 : 0}) << i;
  }
  EXPECT_EQ(starling_schedule_free(s), STARLING_SUCCESS);

  s = Stale<starling_schedule_t>();
  EXPECT_TRUE(InvalidArgument(starling_schedule_exp2_machine(8, 2, 5, 0, &s),
                              "local_rank 0 does not match rank 5 % local_size 2 = 1"));
  EXPECT_EQ(s, nullptr);
  EXPECT_TRUE(InvalidArgument(starling_schedule_exp2_machine(9, 2, 1, 1, &s), "not a multiple"));
  EXPECT_TRUE(
      InvalidArgument(starling_schedule_exp2_machine(4, 4, 1, 1, &s), "needs at least 2 machines"));
  EXPECT_TRUE(
      InvalidArgument(starling_schedule_exp2_machine(8, 2, 9, 1, &s), "rank 9 is out of range"));
  EXPECT_TRUE(
      InvalidArgument(starling_schedule_exp2_machine(8, 2, 1, 1, nullptr), "out must not be NULL"));
}

TEST(ScheduleCApi, InnerOuterRing) {
  starling_schedule_t s = nullptr;
  ASSERT_EQ(starling_schedule_inner_outer_ring(8, 4, 1, &s), STARLING_SUCCESS);
  const std::vector<std::vector<int>> send = {{2}, {5}, {3}, {2}}, recv = {{3}, {5}, {0}, {0}};
  for (int i = 0; i < 12; ++i) {
    const StepResult r = Next(s);
    EXPECT_EQ(r.send, send[i % 4]) << i;
    EXPECT_EQ(r.recv, recv[i % 4]) << i;
  }
  EXPECT_EQ(starling_schedule_free(s), STARLING_SUCCESS);

  // One machine: the rank whose turn it is to go outside has nobody (self excluded).
  ASSERT_EQ(starling_schedule_inner_outer_ring(4, 4, 0, &s), STARLING_SUCCESS);
  int ns = -1, nr = -1;
  EXPECT_EQ(starling_schedule_next(s, nullptr, 0, &ns, nullptr, 0, &nr), STARLING_SUCCESS);
  EXPECT_EQ(ns, 0);
  EXPECT_EQ(nr, 0);
  EXPECT_EQ(Next(s).send, std::vector<int>{2});  // step 1: rank 1 is out, skip it
  EXPECT_EQ(starling_schedule_free(s), STARLING_SUCCESS);

  s = Stale<starling_schedule_t>();
  EXPECT_TRUE(InvalidArgument(starling_schedule_inner_outer_ring(8, 2, 0, &s),
                              "local_size must be > 2, got 2"));
  EXPECT_EQ(s, nullptr);
  EXPECT_TRUE(InvalidArgument(starling_schedule_inner_outer_ring(10, 4, 0, &s), "not a multiple"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_inner_outer_ring(8, 4, -1, &s), "rank -1"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_inner_outer_ring(8, 4, 0, nullptr),
                              "out must not be NULL"));
}

TEST(ScheduleCApi, InnerOuterExpo2) {
  starling_schedule_t s = nullptr;
  ASSERT_EQ(starling_schedule_inner_outer_expo2(8, 4, 0, &s), STARLING_SUCCESS);
  const std::vector<std::vector<int>> send = {{4}, {3}, {1}, {2}}, recv = {{4}, {2}, {3}, {1}};
  for (int i = 0; i < 12; ++i) {
    const StepResult r = Next(s);
    EXPECT_EQ(r.send, send[i % 4]) << i;
    EXPECT_EQ(r.recv, recv[i % 4]) << i;
  }
  EXPECT_EQ(starling_schedule_free(s), STARLING_SUCCESS);

  s = Stale<starling_schedule_t>();
  EXPECT_TRUE(InvalidArgument(starling_schedule_inner_outer_expo2(4, 4, 0, &s),
                              "inner-outer expo2 schedule: needs at least 2 machines"));
  EXPECT_EQ(s, nullptr);
  EXPECT_TRUE(
      InvalidArgument(starling_schedule_inner_outer_expo2(8, 2, 0, &s), "local_size must be > 2"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_inner_outer_expo2(8, 4, 8, &s), "rank 8"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_inner_outer_expo2(8, 4, 0, nullptr),
                              "out must not be NULL"));
}

// ---- fast-link pairs (issue 25: straggler-aware topology) ----------------------------

// Every rank's schedule over `steps` steps: peer[step][rank], -1 for none.
std::vector<std::vector<int>> FastPairSteps(int n, const std::vector<double>& links, double threshold, int steps) {
  std::vector<std::vector<int>> peer(steps, std::vector<int>(n, -1));
  for (int r = 0; r < n; ++r) {
    starling_schedule_t s = nullptr;
    EXPECT_EQ(starling_schedule_fast_pairs(n, r, links.data(), static_cast<int>(links.size()), threshold, &s),
              STARLING_SUCCESS)
        << starling_last_error();
    if (s == nullptr) return {};
    for (int t = 0; t < steps; ++t) {
      const StepResult step = Next(s);
      EXPECT_EQ(step.send, step.recv) << "rank " << r << " step " << t;
      EXPECT_LE(step.send.size(), 1u);
      if (!step.send.empty()) peer[t][r] = step.send[0];
    }
    EXPECT_EQ(starling_schedule_free(s), STARLING_SUCCESS);
  }
  return peer;
}

// Checks what makes the schedule usable: pairs agree on both sides (so W with weights
// 1/2 is symmetric, hence doubly stochastic), no slow link is used, and every fast
// pair meets exactly once per `period` steps. Returns the number of pairs per period.
int CheckFastPairs(int n, const std::vector<double>& links, double threshold, int period) {
  auto fast = [&](int i, int j) { return std::max(links[i * n + j], links[j * n + i]) <= threshold; };
  const auto peer = FastPairSteps(n, links, threshold, 3 * period);
  if (peer.empty()) return -1;
  std::map<std::pair<int, int>, int> met;
  for (size_t t = 0; t < peer.size(); ++t) {
    std::vector<std::vector<double>> w(n, std::vector<double>(n, 0.0));
    for (int r = 0; r < n; ++r) {
      const int p = peer[t][r];
      if (p < 0) {
        w[r][r] = 1.0;
        continue;
      }
      EXPECT_NE(p, r);
      EXPECT_EQ(peer[t][p], r) << "step " << t << ": rank " << r << " pairs with " << p << " but not back";
      EXPECT_TRUE(fast(r, p)) << "step " << t << " uses the slow link " << r << "-" << p;
      w[r][r] = w[r][p] = 0.5;
      if (r < p && t < static_cast<size_t>(period)) ++met[{r, p}];
      if (t >= static_cast<size_t>(period)) EXPECT_EQ(peer[t][r], peer[t - period][r]) << "not periodic";
    }
    for (int i = 0; i < n; ++i) {
      double row = 0, column = 0;
      for (int j = 0; j < n; ++j) {
        row += w[i][j];
        column += w[j][i];
      }
      EXPECT_EQ(row, 1.0);
      EXPECT_EQ(column, 1.0);
    }
  }
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const int times = met.count({i, j}) ? met[{i, j}] : 0;
      EXPECT_EQ(times, fast(i, j) ? 1 : 0) << "pair " << i << "-" << j << " in one period";
    }
  return static_cast<int>(met.size());
}

TEST(ScheduleCApi, FastPairsWithEveryLinkFastIsARoundRobin) {
  for (int n = 1; n <= 9; ++n) {
    const std::vector<double> links(static_cast<size_t>(n) * n, 1e-5);
    const int period = n == 1 ? 1 : (n % 2 == 0 ? n - 1 : n);
    EXPECT_EQ(CheckFastPairs(n, links, 1e-4, period), n * (n - 1) / 2) << "n " << n;
  }
}

TEST(ScheduleCApi, FastPairsAvoidSlowLinksAndSkipEmptyRounds) {
  // 4 ranks, the link 0-1 slow in one direction only: its round keeps 2-3, 0 and 1 idle.
  std::vector<double> links(16, 1e-5);
  links[1 * 4 + 0] = 0.5;
  EXPECT_EQ(CheckFastPairs(4, links, 1e-3, 3), 5);
  auto peer = FastPairSteps(4, links, 1e-3, 3);
  int idle = 0;
  for (const auto& step : peer) idle += step[0] < 0 && step[1] < 0 && step[2] >= 0 ? 1 : 0;
  EXPECT_EQ(idle, 1);
  // A straggler (rank 3) slow to everyone but rank 2.
  links.assign(16, 1e-5);
  for (int r : {0, 1}) links[3 * 4 + r] = links[r * 4 + 3] = 2e-3;
  EXPECT_EQ(CheckFastPairs(4, links, 1e-3, 3), 4);
  // A chain 0-1-2-3: the round {0,2},{1,3} has no fast pair and is left out.
  links.assign(16, 1.0);
  for (int r = 0; r < 3; ++r) links[r * 4 + r + 1] = links[(r + 1) * 4 + r] = 1e-5;
  EXPECT_EQ(CheckFastPairs(4, links, 1e-3, 2), 3);
  // The diagonal is not looked at.
  links.assign(9, 1e-5);
  links[0] = links[4] = std::nan("");
  EXPECT_EQ(CheckFastPairs(3, links, 1e-3, 3), 3);
}

TEST(ScheduleCApi, FastPairsBadInput) {
  const std::vector<double> fast(16, 1e-5);
  starling_schedule_t s = Stale<starling_schedule_t>();
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, fast.data(), 16, -1.0, &s),
                              "threshold_seconds is -1; give a positive number of seconds"));
  EXPECT_EQ(s, nullptr);
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, fast.data(), 16, 0.0, &s), "threshold_seconds is 0"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, fast.data(), 16, std::nan(""), &s),
                              "threshold_seconds is nan"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, fast.data(), 15, 1e-3, &s),
                              "link_seconds has 15 figures; a job of 4 ranks needs 16"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, nullptr, 16, 1e-3, &s), "link_seconds is NULL"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, fast.data(), -1, 1e-3, &s),
                              "num_link_seconds must be >= 0"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 4, fast.data(), 16, 1e-3, &s), "rank 4 is out of range"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(0, 0, nullptr, 0, 1e-3, &s), "world_size must be >= 1"));
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, fast.data(), 16, 1e-3, nullptr),
                              "out must not be NULL"));
  std::vector<double> links = fast;
  links[1 * 4 + 2] = -1e-5;
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, links.data(), 16, 1e-3, &s),
                              "link_seconds[1][2] is -1e-05"));
  links[1 * 4 + 2] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, links.data(), 16, 1e-3, &s),
                              "link_seconds[1][2] is inf"));
  // Two groups that would never mix: named.
  links.assign(16, 1.0);
  links[0 * 4 + 1] = links[1 * 4 + 0] = links[2 * 4 + 3] = links[3 * 4 + 2] = 1e-5;
  EXPECT_TRUE(InvalidArgument(starling_schedule_fast_pairs(4, 0, links.data(), 16, 1e-3, &s),
                              "split the job into 2 groups that would never mix: {0, 1} {2, 3}"));
  EXPECT_EQ(s, nullptr);
}

}  // namespace
