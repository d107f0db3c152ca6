// starling_context_split: membership and order by color and key, independent contexts
// (their own engine, topology and collectives, interleaved with the parent's), ranks
// left out, splits of splits, destroy orders, refusals and mismatches.
#include <numeric>

#include "test_util.h"

namespace starling_test {
namespace {

using Split = ContextTest;

TEST_F(Split, ByParityReversedByKey) {
  const int color = rank % 2;
  starling_context_t child = nullptr;
  ASSERT_OK(starling_context_split(ctx, color, -rank, nullptr, &child));
  ASSERT_NE(child, nullptr);
  std::vector<int> members;  // parent ranks of this color, in the child's order (descending key = -rank)
  for (int r = size - 1; r >= 0; --r)
    if (r % 2 == color) members.push_back(r);
  int child_rank = -1, child_size = -1;
  ASSERT_OK(starling_rank(child, &child_rank));
  ASSERT_OK(starling_size(child, &child_size));
  ASSERT_EQ(child_size, static_cast<int>(members.size()));
  ASSERT_EQ(members[static_cast<size_t>(child_rank)], rank);

  // The child's default topology is a new context's: exponential-2 over its size.
  starling_topology_t topo = nullptr;
  int weighted = -1, topo_size = 0;
  ASSERT_OK(starling_get_topology(child, &topo, &weighted));
  ASSERT_OK(starling_topology_size(topo, &topo_size));
  EXPECT_EQ(topo_size, child_size);
  EXPECT_EQ(weighted, 0);
  ASSERT_OK(starling_topology_free(topo));

  // Collectives on the child and the parent, interleaved (nonblocking on both).
  Buffer in(Kind::kF64, {3}), out(Kind::kF64, {3}), pin(Kind::kF64, {3}), pout(Kind::kF64, {3});
  for (int i = 0; i < 3; ++i) {
    in.set(i, rank + 1 + i);
    pin.set(i, 10.0 * rank);
  }
  starling_request_t on_parent, on_child;
  ASSERT_OK(starling_allreduce_nonblocking(ctx, &pin.t, &pout.t, STARLING_SUM, "parent", &on_parent));
  ASSERT_OK(starling_allreduce_nonblocking(child, &in.t, &out.t, STARLING_SUM, "child", &on_child));
  ASSERT_OK(starling_request_wait(on_child));
  ASSERT_OK(starling_request_wait(on_parent));
  ASSERT_OK(starling_request_free(on_child));
  ASSERT_OK(starling_request_free(on_parent));
  for (int i = 0; i < 3; ++i) {
    double expected = 0;
    for (int r : members) expected += r + 1 + i;
    EXPECT_EQ(out.get(i), expected);
    EXPECT_EQ(pout.get(i), 10.0 * size * (size - 1) / 2);
  }

  // alltoall on the child moves parent ranks between its members.
  Buffer a(Kind::kI32, {child_size}), b(Kind::kI32, {child_size});
  for (int q = 0; q < child_size; ++q) a.set(q, 100 * rank + q);
  ASSERT_OK(starling_alltoall(child, &a.t, &b.t, nullptr, nullptr, nullptr));
  for (int q = 0; q < child_size; ++q) EXPECT_EQ(b.get(q), 100 * members[static_cast<size_t>(q)] + child_rank);

  // A split of the split: every member alone.
  starling_context_t single = nullptr;
  ASSERT_OK(starling_context_split(child, child_rank, 0, nullptr, &single));
  int single_size = 0;
  ASSERT_OK(starling_size(single, &single_size));
  EXPECT_EQ(single_size, 1);
  ASSERT_OK(starling_context_destroy(single));

  // A split context cannot grow.
  starling_grow_options_t grow = STARLING_GROW_OPTIONS_INIT;
  EXPECT_ERROR(starling_context_grow(child, &grow, nullptr), STARLING_ERR_INVALID_USAGE, "starling_context_split");
  ASSERT_OK(starling_context_destroy(child));
}

TEST_F(Split, UndefinedColorGivesNoContext) {
  const int color = rank == 0 ? STARLING_SPLIT_UNDEFINED : 7;
  starling_context_t child = reinterpret_cast<starling_context_t>(0x1);
  starling_split_options_t options = STARLING_SPLIT_OPTIONS_INIT;
  options.nodes_per_machine = 1;
  ASSERT_OK(starling_context_split(ctx, color, 0, &options, &child));
  if (rank == 0) {
    EXPECT_EQ(child, nullptr);
  } else {
    ASSERT_NE(child, nullptr);
    int child_size = 0, machines = 0;
    ASSERT_OK(starling_size(child, &child_size));
    ASSERT_OK(starling_machine_size(child, &machines));
    EXPECT_EQ(child_size, size - 1);
    EXPECT_EQ(machines, size - 1);  // nodes_per_machine = 1: a machine per rank
    Buffer in(Kind::kF32, {2 * child_size}), out(Kind::kF32, {2});
    for (int i = 0; i < 2 * child_size; ++i) in.set(i, rank);
    ASSERT_OK(starling_reduce_scatter(child, &in.t, &out.t, nullptr, STARLING_AVERAGE, nullptr));
    EXPECT_EQ(out.get(0), size / 2.0);  // the average of parent ranks 1..size-1
    ASSERT_OK(starling_context_destroy(child));
  }
  // The parent goes on, with every rank.
  ASSERT_OK(starling_barrier(ctx));
}

TEST_F(Split, ChildOutlivesParent) {
  starling_context_t child = nullptr;
  ASSERT_OK(starling_context_split(ctx, 0, 0, nullptr, &child));
  ASSERT_OK(starling_context_destroy(ctx));
  ctx = nullptr;
  Buffer in(Kind::kI64, {1}), out(Kind::kI64, {1});
  in.set(0, rank);
  ASSERT_OK(starling_allreduce(child, &in.t, &out.t, STARLING_SUM, nullptr));
  EXPECT_EQ(out.get(0), size * (size - 1) / 2);
  ASSERT_OK(starling_context_destroy(child));
}

TEST_F(Split, BadInputAndMismatch) {
  starling_context_t child = nullptr;
  EXPECT_ERROR(starling_context_split(ctx, 0, 0, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT, "out");
  EXPECT_ERROR(starling_context_split(nullptr, 0, 0, nullptr, &child), STARLING_ERR_INVALID_HANDLE, "");
  EXPECT_ERROR(starling_context_split(ctx, -5, 0, nullptr, &child), STARLING_ERR_INVALID_ARGUMENT,
               "STARLING_SPLIT_UNDEFINED");
  starling_split_options_t options = STARLING_SPLIT_OPTIONS_INIT;
  options.struct_size = 3;
  EXPECT_ERROR(starling_context_split(ctx, 0, 0, &options, &child), STARLING_ERR_INVALID_ARGUMENT,
               "STARLING_SPLIT_OPTIONS_INIT");
  options = STARLING_SPLIT_OPTIONS_INIT;
  options.nodes_per_machine = -1;
  EXPECT_ERROR(starling_context_split(ctx, 0, 0, &options, &child), STARLING_ERR_INVALID_ARGUMENT,
               "nodes_per_machine");
  EXPECT_EQ(child, nullptr);
  if (size > 1) {
    // Rank 0 splits while the others enter a barrier: every rank fails, nobody hangs.
    if (rank == 0) {
      EXPECT_ERROR(starling_context_split(ctx, 0, 0, nullptr, &child), STARLING_ERR_MISMATCH, "context_split");
      EXPECT_EQ(child, nullptr);
    } else {
      EXPECT_ERROR(starling_barrier(ctx), STARLING_ERR_MISMATCH, "");
    }
  }
  ASSERT_OK(starling_barrier(ctx));
}

}  // namespace
}  // namespace starling_test
