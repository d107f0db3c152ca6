// starling_context_repair and starling_fault_tolerant where no rank dies: bad arguments
// are refused first; without ULFM repair is UNSUPPORTED saying what is needed; under
// ULFM (`mpirun --with-ft ulfm`, tests/fault) it is a collective that drops nothing,
// installs a given topology and keeps windows working (exact results).
#include <signal.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

namespace starling_test {
namespace {

class Repair : public ContextTest {};

TEST_F(Repair, BadArguments) {
  int ft = -1;
  EXPECT_ERROR(starling_fault_tolerant(nullptr, &ft), STARLING_ERR_INVALID_HANDLE, "");
  EXPECT_ERROR(starling_fault_tolerant(ctx, nullptr), STARLING_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERROR(starling_context_repair(nullptr, nullptr, nullptr), STARLING_ERR_INVALID_HANDLE, "");
  starling_repair_options_t opts = STARLING_REPAIR_OPTIONS_INIT;
  opts.struct_size = 1;
  EXPECT_ERROR(starling_context_repair(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "STARLING_REPAIR_OPTIONS_INIT");
  opts = STARLING_REPAIR_OPTIONS_INIT;
  opts.is_weighted = 2;
  EXPECT_ERROR(starling_context_repair(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "is_weighted");
  opts.is_weighted = 0;
  opts.topology = reinterpret_cast<starling_topology_t>(uintptr_t{12345});
  EXPECT_ERROR(starling_context_repair(ctx, &opts, nullptr), STARLING_ERR_INVALID_HANDLE, "topology");
  starling_repair_result_t out = STARLING_REPAIR_RESULT_INIT;
  out.old_to_new_capacity = 4;  // with a NULL array
  EXPECT_ERROR(starling_context_repair(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT, "old_to_new");
  out = STARLING_REPAIR_RESULT_INIT;
  out.failed_capacity = -1;
  EXPECT_ERROR(starling_context_repair(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT, "failed");
  out = STARLING_REPAIR_RESULT_INIT;
  out.struct_size = 3;
  EXPECT_ERROR(starling_context_repair(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT,
               "STARLING_REPAIR_RESULT_INIT");
  // Nothing was changed: the context still works.
  ASSERT_OK(starling_barrier(ctx));
}

// Under ULFM a write to a dead peer's socket must not end a survivor: SIGPIPE (whose
// default action this C program keeps) is ignored once a fault-tolerant context exists.
// Before: the marathon's survivors died of "signal 13 (Broken pipe)" when a grown rank
// was killed (issue 29).
TEST_F(Repair, BrokenPipesDoNotEndSurvivors) {
  int ft = -1;
  ASSERT_OK(starling_fault_tolerant(ctx, &ft));
  struct sigaction current {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &current), 0);
  if (ft == 0) return;  // left as the program (or its parent) set it
  EXPECT_EQ(current.sa_handler, SIG_IGN) << "SIGPIPE would end this survivor when a peer's socket breaks";
}

TEST_F(Repair, WithoutAFailure) {
  int ft = -1;
  ASSERT_OK(starling_fault_tolerant(ctx, &ft));
  if (ft == 0) {
    EXPECT_ERROR(starling_context_repair(ctx, nullptr, nullptr), STARLING_ERR_UNSUPPORTED, "needs");
    EXPECT_NE(std::string(starling_last_error()).find("--with-ft ulfm"), std::string::npos) << starling_last_error();
    ASSERT_OK(starling_barrier(ctx));
    return;
  }
  // ULFM: a window survives the repair, and a given topology (a ring) is installed.
  Buffer w(Kind::kF64, {8});
  for (size_t i = 0; i < 8; ++i) reinterpret_cast<double*>(w.bytes())[i] = rank + 1.0;
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &w.t, "repair_test", 0, &win));
  starling_topology_t ring;
  ASSERT_OK(starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, &ring));
  starling_repair_options_t opts = STARLING_REPAIR_OPTIONS_INIT;
  opts.topology = ring;
  int old_to_new[16], failed[16];
  starling_repair_result_t out = STARLING_REPAIR_RESULT_INIT;
  out.old_to_new = old_to_new;
  out.old_to_new_capacity = 16;
  out.failed = failed;
  out.failed_capacity = 16;
  // Per-peer traffic restarts with the new numbering of the ranks; the totals go on.
  // Data first, far more than the repair itself moves (rebuilding the window: a few
  // hundred bytes); on one host the agreements move none (they meet on the board).
  Buffer x(Kind::kF64, {4096});
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, nullptr));
  ASSERT_OK(starling_barrier(ctx));
  auto peer_bytes = [&] {
    uint64_t sum = 0;
    for (int peer = 0; peer < size; ++peer) {
      starling_peer_stats_t p = STARLING_PEER_STATS_INIT;
      EXPECT_OK(starling_get_peer_stats(ctx, peer, &p));
      sum += p.bytes_sent;
    }
    return sum;
  };
  starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
  ASSERT_OK(starling_get_stats(ctx, &before));
  EXPECT_EQ(peer_bytes(), before.bytes_sent);
  ASSERT_OK(starling_context_repair(ctx, &opts, &out));
  ASSERT_OK(starling_topology_free(ring));
  ASSERT_OK(starling_get_stats(ctx, &after));
  EXPECT_GE(after.bytes_sent, before.bytes_sent);
  if (size > 1) EXPECT_LT(peer_bytes(), before.bytes_sent) << "per-peer counts did not restart";
  EXPECT_EQ(out.old_rank, rank);
  EXPECT_EQ(out.new_rank, rank);
  EXPECT_EQ(out.old_size, size);
  EXPECT_EQ(out.new_size, size);
  EXPECT_EQ(out.num_failed, 0);
  for (int r = 0; r < size; ++r) EXPECT_EQ(old_to_new[r], r);
  int in[16], count = 0;
  ASSERT_OK(starling_in_neighbors(ctx, in, 16, &count));
  double expected = rank + 1.0;
  for (int i = 0; i < count; ++i) {
    const int ring_left = (rank + size - 1) % size, ring_right = (rank + 1) % size;
    EXPECT_TRUE(in[i] == ring_left || in[i] == ring_right) << in[i];
    expected += in[i] + 1.0;
  }
  expected /= count + 1;
  ASSERT_OK(starling_window_put(win, &w.t, nullptr));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_update(win, nullptr));
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(w.get(i), expected, 1e-12 * expected);
  ASSERT_OK(starling_window_free(win));
}

}  // namespace
}  // namespace starling_test
