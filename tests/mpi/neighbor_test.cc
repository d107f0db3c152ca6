// Neighbor collectives against independent float64 references: the full weight
// matrix of the topology (read back edge by edge), or the per-rank dynamic sets every
// rank recomputes for all ranks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include <mpi.h>

#include "test_util.h"

namespace starling_test {
namespace {

using Neighbor = ContextTest;

using Maker = std::function<starling_status_t(int, starling_topology_t*)>;
struct TopoCase {
  const char* name;
  Maker make;
};

std::vector<TopoCase> Cases() {
  return {
      {"exponential2", [](int p, starling_topology_t* o) { return starling_topology_exponential_two(p, o); }},
      {"exponential3", [](int p, starling_topology_t* o) { return starling_topology_exponential(p, 3, o); }},
      {"symmetric_exp", [](int p, starling_topology_t* o) { return starling_topology_symmetric_exponential(p, 2, o); }},
      {"ring_bi", [](int p, starling_topology_t* o) { return starling_topology_ring(p, STARLING_RING_BIDIRECTIONAL, o); }},
      {"ring_left", [](int p, starling_topology_t* o) { return starling_topology_ring(p, STARLING_RING_LEFT, o); }},
      {"ring_right", [](int p, starling_topology_t* o) { return starling_topology_ring(p, STARLING_RING_RIGHT, o); }},
      {"star", [](int p, starling_topology_t* o) { return starling_topology_star(p, p - 1, o); }},
      {"mesh", [](int p, starling_topology_t* o) { return starling_topology_mesh_grid_2d(p, 0, 0, o); }},
      {"full", [](int p, starling_topology_t* o) { return starling_topology_fully_connected(p, o); }},
  };
}

// Integers are computed in float64 and rounded to nearest, ties away from zero.
double Expected(Kind k, double exact) { return IsFloat(k) ? exact : static_cast<double>(std::llround(exact)); }

void Compare(const Buffer& out, const std::vector<double>& expected, double scale, double int_slack,
             const std::string& what) {
  for (size_t i = 0; i < out.numel(); ++i) {
    const double e = Expected(out.kind, expected[i]);
    const double tol = IsFloat(out.kind) ? Tolerance(out.kind, scale) : int_slack;
    ASSERT_NEAR(out.get(i), e, tol) << what << " element " << i;
  }
}

TEST_F(Neighbor, StaticTopologiesDefaultWeightsEveryGenerator) {
  int salt = 0;
  for (const TopoCase& c : Cases()) {
    Topo topo;
    ASSERT_OK(c.make(size, &topo.t));
    const auto w = topo.Matrix(size);
    for (int weighted = 0; weighted < 2; ++weighted) {
      ASSERT_OK(starling_set_topology(ctx, topo.t, weighted));
      const bool all_dtypes = std::string(c.name) == "exponential2";
      for (Kind k : kAllKinds) {
        if (!all_dtypes && k != Kind::kF32 && k != Kind::kF64) continue;
        for (size_t n : {size_t{5}, size_t{70000}}) {
          if (n > 5 && KindSize(k) < 4) continue;
          ++salt;
          Buffer x(k, {static_cast<int64_t>(n)}), out(k, {static_cast<int64_t>(n)});
          for (size_t i = 0; i < n; ++i) x.set(i, Value(k, rank, i, salt));
          ASSERT_OK(starling_neighbor_allreduce(ctx, &x.t, &out.t, nullptr));
          std::vector<double> expected(n);
          int indegree = 0;
          for (int r = 0; r < size; ++r) indegree += (r != rank && w[r][rank] != 0) ? 1 : 0;
          for (size_t i = 0; i < n; ++i) {
            double acc = 0;
            if (weighted) {
              for (int r = 0; r < size; ++r) acc += w[r][rank] * Value(k, r, i, salt);
            } else {
              acc = Value(k, rank, i, salt);
              for (int r = 0; r < size; ++r)
                if (r != rank && w[r][rank] != 0) acc += Value(k, r, i, salt);
              acc /= indegree + 1;
            }
            expected[i] = acc;
          }
          Compare(out, expected, 4.0, weighted ? 1.0 : 0.0,
                  std::string(c.name) + (weighted ? " weighted " : " uniform ") + KindName(k) + " n " +
                      std::to_string(n));
        }
      }
    }
  }
}

TEST_F(Neighbor, InPlaceAndExplicitWeightsOnASubsetOfInNeighbors) {
  Topo topo;
  ASSERT_OK(starling_topology_fully_connected(size, &topo.t));
  ASSERT_OK(starling_set_topology(ctx, topo.t, 0));
  // Weight only the next rank (if any): out = 0.25 x + 0.75 x_{r+1}; others get 0.
  const int next = (rank + 1) % size;
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.use_weights = 1;
  args.self_weight = size == 1 ? 1.0 : 0.25;
  const double w = 0.75;
  args.num_sources = size == 1 ? 0 : 1;
  args.source_ranks = &next;
  args.source_weights = &w;
  Buffer x(Kind::kF64, {9});
  for (size_t i = 0; i < 9; ++i) x.set(i, Value(Kind::kF64, rank, i, 3));
  ASSERT_OK(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args));
  for (size_t i = 0; i < 9; ++i) {
    const double expected = size == 1 ? Value(Kind::kF64, rank, i, 3)
                                      : 0.25 * Value(Kind::kF64, rank, i, 3) + 0.75 * Value(Kind::kF64, next, i, 3);
    ASSERT_NEAR(x.get(i), expected, 1e-12);
  }
}

TEST_F(Neighbor, DynamicOnePeerScheduleWithDestinationWeights) {
  Topo exp2;
  ASSERT_OK(starling_topology_exponential_two(size, &exp2.t));
  if (size == 1) GTEST_SKIP() << "one-peer schedules need at least one neighbor";
  std::vector<starling_schedule_t> schedules(size);
  for (int r = 0; r < size; ++r) ASSERT_OK(starling_schedule_dynamic_one_peer(exp2.t, r, &schedules[r]));
  for (int step = 0; step < 6; ++step) {
    std::vector<std::vector<int>> sends(size, std::vector<int>(size)), recvs(size, std::vector<int>(size));
    std::vector<int> ns(size), nr(size);
    for (int r = 0; r < size; ++r)
      ASSERT_OK(starling_schedule_next(schedules[r], sends[r].data(), size, &ns[r], recvs[r].data(), size, &nr[r]));
    for (int r = 0; r < size; ++r) {
      sends[r].resize(ns[r]);
      recvs[r].resize(nr[r]);
    }
    auto dst_weight = [](int from, int to) { return 1.0 + 0.25 * from + 0.125 * to; };
    auto self_weight = [&](int r) { return 1.0 / (recvs[r].size() + 1); };
    std::vector<double> dst_w, src_w(recvs[rank].size(), self_weight(rank));
    for (int d : sends[rank]) dst_w.push_back(dst_weight(rank, d));
    starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
    args.dynamic = 1;
    args.use_weights = 1;
    args.self_weight = self_weight(rank);
    args.num_sources = static_cast<int>(recvs[rank].size());
    args.source_ranks = recvs[rank].data();
    args.source_weights = src_w.data();
    args.num_destinations = static_cast<int>(sends[rank].size());
    args.destination_ranks = sends[rank].data();
    args.destination_weights = dst_w.data();
    args.check_topology = step % 2;
    Buffer x(Kind::kF32, {static_cast<int64_t>(step % 3 == 2 ? 50000 : 33)});
    for (size_t i = 0; i < x.numel(); ++i) x.set(i, Value(Kind::kF32, rank, i, 40 + step));
    Buffer out(Kind::kF32, {static_cast<int64_t>(x.numel())});
    ASSERT_OK(starling_neighbor_allreduce(ctx, &x.t, &out.t, &args));
    std::vector<double> expected(x.numel());
    for (size_t i = 0; i < x.numel(); ++i) {
      double acc = self_weight(rank) * Value(Kind::kF32, rank, i, 40 + step);
      for (int src : recvs[rank]) acc += self_weight(rank) * dst_weight(src, rank) * Value(Kind::kF32, src, i, 40 + step);
      expected[i] = acc;
    }
    Compare(out, expected, 16.0, 0, "step " + std::to_string(step));
  }
  for (auto s : schedules) starling_schedule_free(s);
}

TEST_F(Neighbor, TopologyCheckNamesTheDisagreeingRanks) {
  if (size < 2) GTEST_SKIP();
  // Rank 0 sends to rank 1, which does not expect it.
  const int one = 1;
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.dynamic = 1;
  args.use_weights = 1;
  args.self_weight = 1.0;
  args.check_topology = 1;
  if (rank == 0) {
    args.num_destinations = 1;
    args.destination_ranks = &one;
  }
  Buffer x(Kind::kF32, {4});
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_MISMATCH,
               "rank 0 sends to rank 1 but rank 1 does not receive from it");
  // Nothing moved: the context still works.
  ASSERT_OK(starling_barrier(ctx));
}

TEST_F(Neighbor, UncheckedDisagreementIsCaughtByTheReceiver) {
  if (size < 2) GTEST_SKIP();
  // Call A: rank 0 sends to rank 1, which receives nothing. Call B: rank 1 expects
  // data from rank 0, which sends nothing: rank 1 finds call A's data instead.
  const int zero = 0, one = 1;
  const double w = 0.5;
  Buffer x(Kind::kF64, {3});
  starling_neighbor_args_t a = STARLING_NEIGHBOR_ARGS_INIT;
  a.dynamic = 1;
  a.use_weights = 1;
  a.self_weight = 1.0;
  if (rank == 0) {
    a.num_destinations = 1;
    a.destination_ranks = &one;
  }
  ASSERT_OK(starling_neighbor_allreduce(ctx, &x.t, &x.t, &a));
  starling_neighbor_args_t b = STARLING_NEIGHBOR_ARGS_INIT;
  b.dynamic = 1;
  b.use_weights = 1;
  b.self_weight = 0.5;
  if (rank == 1) {
    b.num_sources = 1;
    b.source_ranks = &zero;
    b.source_weights = &w;
  }
  const starling_status_t s = starling_neighbor_allreduce(ctx, &x.t, &x.t, &b);
  if (rank == 1) {
    EXPECT_EQ(s, STARLING_ERR_MISMATCH);
    EXPECT_NE(std::string(starling_last_error()).find("never asked for"), std::string::npos) << starling_last_error();
  } else {
    EXPECT_EQ(s, STARLING_SUCCESS) << starling_last_error();
  }
  ASSERT_OK(starling_barrier(ctx));
}

TEST_F(Neighbor, FusedCallsMatchUnfusedCallsBitForBit) {
  Topo topo;
  ASSERT_OK(starling_topology_exponential_two(size, &topo.t));
  ASSERT_OK(starling_set_topology(ctx, topo.t, 1));
  const int kTensors = 100;
  std::vector<std::unique_ptr<Buffer>> inputs, fused, unfused;
  for (int j = 0; j < kTensors; ++j) {
    const int64_t n = 1024 + 37 * (j % 5);
    inputs.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{n}));
    fused.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{n}));
    unfused.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{n}));
    for (int64_t i = 0; i < n; ++i) inputs[j]->set(i, std::sin(0.001 * i + j + 0.37 * rank));
  }
  for (int j = 0; j < kTensors; ++j) ASSERT_OK(starling_neighbor_allreduce(ctx, &inputs[j]->t, &unfused[j]->t, nullptr));
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &before));
  // Keep every engine but rank 0's busy in a barrier while the calls queue up.
  if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  starling_request_t barrier;
  ASSERT_OK(starling_barrier_nonblocking(ctx, &barrier));
  std::vector<starling_request_t> reqs(kTensors);
  for (int j = 0; j < kTensors; ++j)
    ASSERT_OK(starling_neighbor_allreduce_nonblocking(ctx, &inputs[j]->t, &fused[j]->t, nullptr, &reqs[j]));
  ASSERT_OK(starling_request_wait(barrier));
  ASSERT_OK(starling_request_free(barrier));
  for (int j = 0; j < kTensors; ++j) {
    ASSERT_OK(starling_request_wait(reqs[j]));
    ASSERT_OK(starling_request_free(reqs[j]));
    ASSERT_EQ(std::memcmp(fused[j]->bytes(), unfused[j]->bytes(), fused[j]->numel() * 4), 0) << "tensor " << j;
  }
  ASSERT_OK(starling_get_stats(ctx, &after));
  EXPECT_EQ(after.operations - before.operations, static_cast<uint64_t>(kTensors) + 1);
  if (size > 1 && rank != 0 && std::getenv("STARLING_FUSION_THRESHOLD") == nullptr) {
    EXPECT_GE(after.fused_operations - before.fused_operations, 50u) << "queued calls were not fused";
  }
}

// Ranks that fuse the same calls differently, around a frame too large for MPI to
// deliver before its receive is posted (run by mpi.neighbor_uneven_fusion.np3, which
// gives each rank its STARLING_FUSION_THRESHOLD). Rank 1 fuses all five calls, rank 0
// the first four, the others none. So rank 1 waits for rank 0's fifth call; rank 0
// first needs rank 2's fourth; rank 2 is still sending its third (1.2 MB) to rank 1.
// A receiver that waited for one frame from every source before taking the next from
// any (until 2026-11-27) hung here every time: rank 1 held back rank 2's third frame
// until rank 0's fifth came.
TEST_F(Neighbor, RanksThatFuseDifferentlyAroundALargeFrame) {
  const std::vector<int64_t> counts = {100, 100, 300000, 100, 100};  // float32
  // Rank 0 fuses calls 0-3, rank 1 all five, rank 2 none, rank 3 (at 4 ranks) 0-1 and 3-4.
  const char* roles[] = {"1201200", "8388608", "0", "800"};
  const uint64_t fused_by_role[] = {4, 5, 0, 4}, groups_by_role[] = {1, 1, 0, 2};
  const char* threshold = std::getenv("STARLING_FUSION_THRESHOLD");
  if (size < 3 || size > 4 || threshold == nullptr || std::string(roles[rank]) != threshold)
    GTEST_SKIP() << "run by mpi.neighbor_uneven_fusion_shm*.np3/np4 (a fusion threshold per rank)";
  Topo topo;
  ASSERT_OK(starling_topology_fully_connected(size, &topo.t));
  ASSERT_OK(starling_set_topology(ctx, topo.t, 0));
  std::vector<std::unique_ptr<Buffer>> in, out;
  for (size_t c = 0; c < counts.size(); ++c) {
    in.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{counts[c]}));
    out.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{counts[c]}));
    for (int64_t i = 0; i < counts[c]; ++i) in[c]->set(i, Value(Kind::kF32, rank, i, static_cast<int>(c)));
  }
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &before));
  // Ranks 0 and 1 queue all five calls while their engines wait in the barrier.
  if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  starling_request_t barrier;
  ASSERT_OK(starling_barrier_nonblocking(ctx, &barrier));
  std::vector<starling_request_t> reqs(counts.size());
  for (size_t c = 0; c < counts.size(); ++c)
    ASSERT_OK(starling_neighbor_allreduce_nonblocking(ctx, &in[c]->t, &out[c]->t, nullptr, &reqs[c]));
  ASSERT_OK(starling_request_wait(barrier));
  ASSERT_OK(starling_request_free(barrier));
  for (auto& req : reqs) {
    ASSERT_OK(starling_request_wait(req));
    ASSERT_OK(starling_request_free(req));
  }
  ASSERT_OK(starling_get_stats(ctx, &after));
  // The fusion this test is about really happened.
  EXPECT_EQ(after.fused_operations - before.fused_operations, fused_by_role[rank]);
  EXPECT_EQ(after.fusion_groups - before.fusion_groups, groups_by_role[rank]);
  for (size_t c = 0; c < counts.size(); ++c) {
    std::vector<double> expected(static_cast<size_t>(counts[c]), 0.0);
    for (int64_t i = 0; i < counts[c]; ++i) {
      for (int r = 0; r < size; ++r) expected[i] += Value(Kind::kF32, r, i, static_cast<int>(c));
      expected[i] /= size;
    }
    Compare(*out[c], expected, 4.0, 0, "call " + std::to_string(c));
  }
}

TEST_F(Neighbor, AllgatherStaticAndDynamicOrder) {
  Topo topo;
  ASSERT_OK(starling_topology_exponential_two(size, &topo.t));
  ASSERT_OK(starling_set_topology(ctx, topo.t, 0));
  auto rows = [](int r) { return static_cast<int64_t>(r % 3); };  // some ranks send no rows
  Buffer in(Kind::kI16, {rows(rank), 2});
  for (size_t i = 0; i < in.numel(); ++i) in.set(i, Value(Kind::kI16, rank, i, 77));
  int count = 0;
  starling_in_neighbors(ctx, nullptr, 0, &count);  // count is set even when capacity 0 is too small
  std::vector<int> in_neighbors(count);
  if (count > 0) ASSERT_OK(starling_in_neighbors(ctx, in_neighbors.data(), count, &count));
  std::vector<int64_t> dims(count, -1);
  ASSERT_OK(starling_neighbor_allgather_first_dims(ctx, &in.t, dims.data(), nullptr));
  int64_t total = 0;
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(dims[i], rows(in_neighbors[i]));
    total += dims[i];
  }
  Buffer out(Kind::kI16, {total, 2});
  ASSERT_OK(starling_neighbor_allgather(ctx, &in.t, &out.t, nullptr, nullptr));
  size_t at = 0;
  for (int src : in_neighbors)  // ascending in-neighbor order
    for (size_t i = 0; i < static_cast<size_t>(rows(src)) * 2; ++i, ++at)
      ASSERT_EQ(out.get(at), Value(Kind::kI16, src, i, 77));

  // Dynamic: receive from every other rank in descending order, send to every other rank.
  std::vector<int> sources, destinations;
  for (int r = size - 1; r >= 0; --r)
    if (r != rank) {
      sources.push_back(r);
      destinations.push_back(r);
    }
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.dynamic = 1;
  args.num_sources = static_cast<int>(sources.size());
  args.source_ranks = sources.data();
  args.num_destinations = static_cast<int>(destinations.size());
  args.destination_ranks = destinations.data();
  int64_t dynamic_total = 0;
  for (int r : sources) dynamic_total += rows(r);
  Buffer dyn(Kind::kI16, {dynamic_total, 2});
  std::vector<int64_t> dyn_dims(sources.size() + 1, -1);
  starling_request_t req;
  ASSERT_OK(starling_neighbor_allgather_nonblocking(ctx, &in.t, &dyn.t, dyn_dims.data(), &args, &req));
  ASSERT_OK(starling_request_wait(req));
  ASSERT_OK(starling_request_free(req));
  at = 0;
  for (size_t s = 0; s < sources.size(); ++s) {
    EXPECT_EQ(dyn_dims[s], rows(sources[s]));
    for (size_t i = 0; i < static_cast<size_t>(rows(sources[s])) * 2; ++i, ++at)
      ASSERT_EQ(dyn.get(at), Value(Kind::kI16, sources[s], i, 77));
  }
}

TEST_F(Neighbor, PairGossip) {
  const int peer = rank ^ 1;
  if (peer >= size) GTEST_SKIP() << "no partner for the last rank";
  Buffer x(Kind::kF64, {100}), out(Kind::kF64, {100});
  for (size_t i = 0; i < 100; ++i) x.set(i, Value(Kind::kF64, rank, i, 5));
  ASSERT_OK(starling_pair_gossip(ctx, &x.t, &out.t, peer, 0.3, 0.7, "pg"));
  for (size_t i = 0; i < 100; ++i)
    ASSERT_NEAR(out.get(i), 0.3 * Value(Kind::kF64, rank, i, 5) + 0.7 * Value(Kind::kF64, peer, i, 5), 1e-12);
  starling_request_t req;
  ASSERT_OK(starling_pair_gossip_nonblocking(ctx, &x.t, &x.t, peer, 0.5, 0.5, nullptr, &req));
  ASSERT_OK(starling_request_wait(req));
  ASSERT_OK(starling_request_free(req));
  for (size_t i = 0; i < 100; ++i)
    ASSERT_NEAR(x.get(i), 0.5 * (Value(Kind::kF64, rank, i, 5) + Value(Kind::kF64, peer, i, 5)), 1e-12);
}

TEST_F(Neighbor, SetTopologyIsVerifiedAcrossRanks) {
  if (size < 2) GTEST_SKIP();
  Topo full;
  ASSERT_OK(starling_topology_fully_connected(size, &full.t));
  EXPECT_ERROR(starling_set_topology(ctx, full.t, rank == 0 ? 1 : 0), STARLING_ERR_MISMATCH, "set_topology");
  starling_topology_t current;
  int weighted = -1;
  ASSERT_OK(starling_get_topology(ctx, &current, &weighted));
  Topo expected;
  ASSERT_OK(starling_topology_exponential_two(size, &expected.t));
  int same = 0;
  ASSERT_OK(starling_topology_is_equivalent(current, expected.t, &same));
  EXPECT_EQ(same, 1) << "a failed set_topology must keep the old topology";
  EXPECT_EQ(weighted, 0);
  starling_topology_free(current);
  if (size >= 3) {
    Topo ring;
    ASSERT_OK(starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, &ring.t));
    Topo star;
    ASSERT_OK(starling_topology_star(size, 0, &star.t));
    EXPECT_ERROR(starling_set_topology(ctx, rank == size - 1 ? star.t : ring.t, 0), STARLING_ERR_MISMATCH,
                 "disagree");
  }
}

TEST(NeighborMachines, HierarchicalAndLocalAllreduceOnSimulatedMachines) {
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world % 2 != 0) GTEST_SKIP() << "needs machines of 2 ranks";
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  options.nodes_per_machine = 2;
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(&options, &ctx));
  int rank, machines, machine;
  starling_rank(ctx, &rank);
  starling_machine_size(ctx, &machines);
  starling_machine_rank(ctx, &machine);
  // local allreduce: the sum of the machine's two ranks.
  Buffer x(Kind::kF64, {64});
  for (size_t i = 0; i < 64; ++i) x.set(i, Value(Kind::kF64, rank, i, 9));
  Buffer local(Kind::kF64, {64});
  ASSERT_OK(starling_local_allreduce(ctx, &x.t, &local.t, STARLING_SUM, nullptr));
  for (size_t i = 0; i < 64; ++i)
    ASSERT_NEAR(local.get(i), Value(Kind::kF64, 2 * machine, i, 9) + Value(Kind::kF64, 2 * machine + 1, i, 9), 1e-12);

  EXPECT_ERROR(starling_hierarchical_neighbor_allreduce(ctx, &x.t, &local.t, nullptr), STARLING_ERR_INVALID_USAGE,
               "machine topology");
  auto mean = [&](int m, size_t i) { return 0.5 * (Value(Kind::kF64, 2 * m, i, 9) + Value(Kind::kF64, 2 * m + 1, i, 9)); };
  Topo ring;
  ASSERT_OK(starling_topology_ring(machines, STARLING_RING_BIDIRECTIONAL, &ring.t));
  const auto w = ring.Matrix(machines);
  for (int weighted = 0; weighted < 2; ++weighted) {
    ASSERT_OK(starling_set_machine_topology(ctx, ring.t, weighted));
    Buffer out(Kind::kF64, {64});
    ASSERT_OK(starling_hierarchical_neighbor_allreduce(ctx, &x.t, &out.t, nullptr));
    int k = 0;
    for (int m = 0; m < machines; ++m) k += (m != machine && w[m][machine] != 0);
    for (size_t i = 0; i < 64; ++i) {
      double expected = 0;
      if (weighted) {
        for (int m = 0; m < machines; ++m) expected += w[m][machine] * mean(m, i);
      } else {
        expected = mean(machine, i);
        for (int m = 0; m < machines; ++m)
          if (m != machine && w[m][machine] != 0) expected += mean(m, i);
        expected /= k + 1;
      }
      ASSERT_NEAR(out.get(i), expected, 1e-12) << "weighted " << weighted << " element " << i;
    }
  }
  // Dynamic: machine m receives from machine m + 1 only, with weight 0.5.
  if (machines > 1) {
    const int from = (machine + 1) % machines, to = (machine - 1 + machines) % machines;
    const double half = 0.5;
    starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
    args.dynamic = 1;
    args.use_weights = 1;
    args.self_weight = 0.5;
    args.num_sources = 1;
    args.source_ranks = &from;
    args.source_weights = &half;
    args.num_destinations = 1;
    args.destination_ranks = &to;
    Buffer out(Kind::kF64, {64});
    starling_request_t req;
    ASSERT_OK(starling_hierarchical_neighbor_allreduce_nonblocking(ctx, &x.t, &out.t, &args, &req));
    ASSERT_OK(starling_request_wait(req));
    ASSERT_OK(starling_request_free(req));
    for (size_t i = 0; i < 64; ++i) ASSERT_NEAR(out.get(i), 0.5 * mean(machine, i) + 0.5 * mean(from, i), 1e-12);
  }
  ASSERT_OK(starling_context_destroy(ctx));
}

TEST_F(Neighbor, BadInput) {
  Buffer x(Kind::kF32, {4});
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  const int out_of_range = size, me = rank, twice[2] = {(rank + 1) % size, (rank + 1) % size};
  const double ok[2] = {0.5, 0.5}, nan[1] = {NAN}, negative[1] = {-0.5};
  args.dynamic = 1;
  args.use_weights = 1;
  args.self_weight = 0.5;
  args.num_sources = 1;
  args.source_weights = ok;
  args.source_ranks = &out_of_range;
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "out of range");
  args.source_ranks = &me;
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "self");
  if (size > 1) {
    args.num_sources = 2;
    args.source_ranks = twice;
    EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "twice");
    args.num_sources = 0;
    args.num_destinations = 2;
    args.destination_ranks = twice;
    EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT,
                 "destination_ranks contains rank");
    args.num_destinations = 1;
    args.destination_weights = negative;
    EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, ">= 0");
    args.destination_weights = nullptr;
    args.num_destinations = 0;
    args.num_sources = 1;
    args.source_ranks = twice;
    args.source_weights = nan;
    EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "finite");
  }
  args = STARLING_NEIGHBOR_ARGS_INIT;
  args.dynamic = 1;
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "use_weights");
  args.dynamic = 0;
  args.use_weights = 1;
  args.self_weight = NAN;
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "self_weight");
  // Static mode: weights for a rank that is not an in-neighbor.
  Topo ring;
  ASSERT_OK(starling_topology_ring(size, STARLING_RING_RIGHT, &ring.t));
  ASSERT_OK(starling_set_topology(ctx, ring.t, 0));
  if (size >= 3) {
    const int not_neighbor = (rank + 1) % size;  // right ring: the in-neighbor is rank - 1
    args.self_weight = 0.5;
    args.num_sources = 1;
    args.source_ranks = &not_neighbor;
    args.source_weights = ok;
    EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT,
                 "is not an in-neighbor");
  }
  args = STARLING_NEIGHBOR_ARGS_INIT;
  const int one = 0;
  args.num_destinations = 1;
  args.destination_ranks = &one;
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "dynamic mode");
  args = STARLING_NEIGHBOR_ARGS_INIT;
  args.num_sources = 1;
  args.source_ranks = nullptr;
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "NULL");
  args = STARLING_NEIGHBOR_ARGS_INIT;
  args.struct_size = 8;
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &x.t, &x.t, &args), STARLING_ERR_INVALID_ARGUMENT, "struct_size");
  // A graph of the wrong size; a machine topology on a context without one.
  Topo wrong;
  ASSERT_OK(starling_topology_ring(size + 1, STARLING_RING_BIDIRECTIONAL, &wrong.t));
  EXPECT_ERROR(starling_set_topology(ctx, wrong.t, 0), STARLING_ERR_INVALID_ARGUMENT, "nodes but the context has");
  EXPECT_ERROR(starling_set_topology(ctx, nullptr, 0), STARLING_ERR_INVALID_HANDLE, "topology");
  EXPECT_ERROR(starling_set_topology(ctx, ring.t, 2), STARLING_ERR_INVALID_ARGUMENT, "is_weighted");
  EXPECT_ERROR(starling_hierarchical_neighbor_allreduce(ctx, &x.t, &x.t, nullptr), STARLING_ERR_INVALID_USAGE,
               "neighbor_allreduce");  // one rank per machine on this host layout... or no machine topology
  if (size > 1) {
    EXPECT_ERROR(starling_pair_gossip(ctx, &x.t, &x.t, rank, 0.5, 0.5, nullptr), STARLING_ERR_INVALID_ARGUMENT,
                 "this rank");
  }
  EXPECT_ERROR(starling_pair_gossip(ctx, &x.t, &x.t, size, 0.5, 0.5, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "out of range");
  int v;
  EXPECT_ERROR(starling_in_neighbors(ctx, nullptr, 5, &v), STARLING_ERR_INVALID_ARGUMENT, "NULL");
  ASSERT_OK(starling_barrier(ctx));  // nothing above was queued
}

TEST(NeighborMachines, MachineTopologyNeedsAHomogeneousLayout) {
  int world;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 4) GTEST_SKIP() << "needs 4 ranks (machines of 3 + 1)";
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  options.nodes_per_machine = 3;
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(&options, &ctx));
  Topo two;
  ASSERT_OK(starling_topology_fully_connected(2, &two.t));
  EXPECT_ERROR(starling_set_machine_topology(ctx, two.t, 0), STARLING_ERR_UNSUPPORTED, "homogeneous");
  Buffer x(Kind::kF32, {4});
  EXPECT_ERROR(starling_hierarchical_neighbor_allreduce(ctx, &x.t, &x.t, nullptr), STARLING_ERR_UNSUPPORTED,
               "homogeneous");
  ASSERT_OK(starling_context_destroy(ctx));
}

}  // namespace
}  // namespace starling_test
