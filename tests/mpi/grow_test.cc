// starling_context_grow's and starling_context_shrink's refusals, where nothing is
// spawned and no rank leaves: bad arguments, options that differ between ranks, windows
// alive, a program that cannot start; without ULFM (Debian's Open MPI 4.1) both are
// UNSUPPORTED saying what is needed. After each refusal the context still works (exact
// allreduce). tests/fault runs it under ULFM too; the resizes themselves are tested by
// tests/fault/grow_program.cc.
#include <string>
#include <vector>

#include "test_util.h"

namespace starling_test {
namespace {

class Grow : public ContextTest {
 protected:
  // The context is unchanged: same size, and an allreduce is exact.
  void ExpectUsable() {
    int now = 0;
    ASSERT_OK(starling_size(ctx, &now));
    EXPECT_EQ(now, size);
    Buffer x(Kind::kF64, {3}), y(Kind::kF64, {3});
    for (size_t i = 0; i < 3; ++i) reinterpret_cast<double*>(x.bytes())[i] = rank + 1.0;
    ASSERT_OK(starling_allreduce(ctx, &x.t, &y.t, STARLING_SUM, "grow_test"));
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(reinterpret_cast<double*>(y.bytes())[i], size * (size + 1) / 2.0);
  }
  bool FaultTolerant() {
    int ft = -1;
    EXPECT_OK(starling_fault_tolerant(ctx, &ft));
    return ft == 1;
  }
};

TEST_F(Grow, LocalChecks) {
  int joined = -1;
  ASSERT_OK(starling_joined(ctx, &joined));
  EXPECT_EQ(joined, 0);
  EXPECT_ERROR(starling_joined(nullptr, &joined), STARLING_ERR_INVALID_HANDLE, "");
  EXPECT_ERROR(starling_joined(ctx, nullptr), STARLING_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERROR(starling_context_grow(nullptr, nullptr, nullptr), STARLING_ERR_INVALID_HANDLE, "");
  starling_grow_options_t opts = STARLING_GROW_OPTIONS_INIT;
  opts.struct_size = 2;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "STARLING_GROW_OPTIONS_INIT");
  opts = STARLING_GROW_OPTIONS_INIT;
  opts.is_weighted = 3;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "is_weighted");
  opts = STARLING_GROW_OPTIONS_INIT;
  const char* args[] = {"x", nullptr};
  opts.argv = args;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "command is NULL");
  opts = STARLING_GROW_OPTIONS_INIT;
  opts.command = "";
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "command is empty");
  opts = STARLING_GROW_OPTIONS_INIT;
  opts.topology = reinterpret_cast<starling_topology_t>(uintptr_t{4242});
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_HANDLE, "topology");
  starling_grow_result_t out = STARLING_GROW_RESULT_INIT;
  out.joined_capacity = 2;  // with a NULL array
  EXPECT_ERROR(starling_context_grow(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT, "joined");
  out = STARLING_GROW_RESULT_INIT;
  out.old_to_new_capacity = -1;
  EXPECT_ERROR(starling_context_grow(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT, "old_to_new");
  out = STARLING_GROW_RESULT_INIT;
  out.struct_size = 5;
  EXPECT_ERROR(starling_context_grow(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT, "STARLING_GROW_RESULT_INIT");
  // A window alive: INVALID_USAGE naming it (checked before anything is collective).
  Buffer w(Kind::kF64, {4});
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &w.t, "grow_blocker", 0, &win));
  EXPECT_ERROR(starling_context_grow(ctx, nullptr, nullptr), STARLING_ERR_INVALID_USAGE, "grow_blocker");
  ASSERT_OK(starling_window_free(win));
  ExpectUsable();
}

TEST_F(Grow, WithoutUlfmUnsupported) {
  if (FaultTolerant()) GTEST_SKIP() << "ULFM is on: grow is supported";
  EXPECT_ERROR(starling_context_grow(ctx, nullptr, nullptr), STARLING_ERR_UNSUPPORTED, "needs");
  EXPECT_NE(std::string(starling_last_error()).find("--with-ft ulfm"), std::string::npos) << starling_last_error();
  ExpectUsable();
}

// Under ULFM: the collective checks refuse on every rank, and nothing is spawned.
TEST_F(Grow, CollectiveChecks) {
  if (!FaultTolerant()) GTEST_SKIP() << "needs ULFM (tests/fault runs this under mpirun --with-ft ulfm)";
  starling_grow_options_t opts = STARLING_GROW_OPTIONS_INIT;
  opts.count = -1;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "count must be >= 1");
  opts.count = 0;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "count must be >= 1");
  opts = STARLING_GROW_OPTIONS_INIT;
  int place = size + 1;  // the grown context has size + 1 ranks: [0, size]
  opts.ranks = &place;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "not in [0,");
  place = -1;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "not in [0,");
  int twice[2] = {0, 0};
  opts.count = 2;
  opts.ranks = twice;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "given twice");
  // Ranks that differ between ranks (each rank asks for its own place).
  if (size > 1) {
    opts = STARLING_GROW_OPTIONS_INIT;
    place = rank;
    opts.ranks = &place;
    EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "other options");
  }
  // A topology of the wrong size.
  starling_topology_t ring;
  ASSERT_OK(starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, &ring));
  opts = STARLING_GROW_OPTIONS_INIT;
  opts.topology = ring;
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "ranks but the grown");
  ASSERT_OK(starling_topology_free(ring));
  // The current topology is not a generator's: the grow needs one.
  if (size >= 3) {
    const int src[] = {0, 1}, dst[] = {1, 2};
    starling_topology_t odd;
    ASSERT_OK(starling_topology_create(size, 2, src, dst, nullptr, &odd));
    ASSERT_OK(starling_set_topology(ctx, odd, 0));
    ASSERT_OK(starling_topology_free(odd));
    EXPECT_ERROR(starling_context_grow(ctx, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT, "pass options->topology");
    starling_topology_t usual;
    ASSERT_OK(starling_topology_exponential_two(size, &usual));
    ASSERT_OK(starling_set_topology(ctx, usual, 0));
    ASSERT_OK(starling_topology_free(usual));
  }
  // A program that cannot start.
  opts = STARLING_GROW_OPTIONS_INIT;
  opts.command = "/nonexistent/starling-replacement";
  EXPECT_ERROR(starling_context_grow(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               rank == 0 ? "not an executable file" : "rank 0's options are invalid");
  ExpectUsable();
}

TEST_F(Grow, ShrinkLocalChecks) {
  EXPECT_ERROR(starling_context_shrink(nullptr, nullptr, nullptr), STARLING_ERR_INVALID_HANDLE, "");
  starling_shrink_options_t opts = STARLING_SHRINK_OPTIONS_INIT;
  opts.struct_size = 2;
  EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "STARLING_SHRINK_OPTIONS_INIT");
  opts = STARLING_SHRINK_OPTIONS_INIT;
  opts.is_weighted = 2;
  EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "is_weighted");
  opts = STARLING_SHRINK_OPTIONS_INIT;
  opts.topology = reinterpret_cast<starling_topology_t>(uintptr_t{4242});
  EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_HANDLE, "topology");
  starling_shrink_result_t out = STARLING_SHRINK_RESULT_INIT;
  out.left_capacity = 2;  // with a NULL array
  EXPECT_ERROR(starling_context_shrink(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT, "left");
  out = STARLING_SHRINK_RESULT_INIT;
  out.struct_size = 5;
  EXPECT_ERROR(starling_context_shrink(ctx, nullptr, &out), STARLING_ERR_INVALID_ARGUMENT,
               "STARLING_SHRINK_RESULT_INIT");
  Buffer w(Kind::kF64, {4});
  starling_window_t win;
  ASSERT_OK(starling_window_create(ctx, &w.t, "shrink_blocker", 0, &win));
  EXPECT_ERROR(starling_context_shrink(ctx, nullptr, nullptr), STARLING_ERR_INVALID_USAGE, "shrink_blocker");
  ASSERT_OK(starling_window_free(win));
  EXPECT_ERROR(starling_context_resize(nullptr, 1, nullptr), STARLING_ERR_INVALID_HANDLE, "");
  EXPECT_ERROR(starling_context_resize(ctx, 0, nullptr), STARLING_ERR_INVALID_ARGUMENT, "new_size must be >= 1");
  int left = -1;
  ASSERT_OK(starling_context_resize(ctx, size, &left));  // the same size: nothing to do
  EXPECT_EQ(left, 0);
  if (!FaultTolerant()) {
    EXPECT_ERROR(starling_context_shrink(ctx, nullptr, nullptr), STARLING_ERR_UNSUPPORTED, "--with-ft ulfm");
    EXPECT_ERROR(starling_context_resize(ctx, size + 1, nullptr), STARLING_ERR_UNSUPPORTED, "--with-ft ulfm");
  }
  ExpectUsable();
}

// A resize called on some ranks only: rank 0 shrinks (then grows) while the others enter
// a barrier; every rank fails with MISMATCH naming the calls, nobody hangs, with or
// without ULFM, and the context stays usable.
TEST_F(Grow, ResizeOnSomeRanksOnly) {
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  if (rank == 0) {
    EXPECT_ERROR(starling_context_shrink(ctx, nullptr, nullptr), STARLING_ERR_MISMATCH, "context_shrink");
    EXPECT_ERROR(starling_context_grow(ctx, nullptr, nullptr), STARLING_ERR_MISMATCH, "context_grow");
  } else {
    EXPECT_ERROR(starling_barrier(ctx), STARLING_ERR_MISMATCH, "");
    EXPECT_ERROR(starling_barrier(ctx), STARLING_ERR_MISMATCH, "");
  }
  ExpectUsable();
}

// Under ULFM: the collective checks refuse on every rank, and no rank leaves.
TEST_F(Grow, ShrinkCollectiveChecks) {
  if (!FaultTolerant()) GTEST_SKIP() << "needs ULFM (tests/fault runs this under mpirun --with-ft ulfm)";
  starling_shrink_options_t opts = STARLING_SHRINK_OPTIONS_INIT;
  opts.count = 0;
  EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "count must be in");
  opts.count = size;  // nobody would stay
  EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "at least one rank stays");
  if (size > 1) {
    opts = STARLING_SHRINK_OPTIONS_INIT;
    int leaving = size;
    opts.ranks = &leaving;
    EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "not in [0,");
    leaving = rank;  // each rank names itself: the options differ
    EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "other options");
  }
  if (size > 2) {
    opts = STARLING_SHRINK_OPTIONS_INIT;
    int twice[2] = {1, 1};
    opts.count = 2;
    opts.ranks = twice;
    EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "given twice");
    starling_topology_t ring;  // over the current size, not size - 1
    ASSERT_OK(starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, &ring));
    opts = STARLING_SHRINK_OPTIONS_INIT;
    opts.topology = ring;
    EXPECT_ERROR(starling_context_shrink(ctx, &opts, nullptr), STARLING_ERR_INVALID_ARGUMENT, "stay");
    ASSERT_OK(starling_topology_free(ring));
  }
  ExpectUsable();
}

}  // namespace
}  // namespace starling_test
