// Contexts: layout queries, simulated machines, a host communicator, several contexts
// at once, and shutdown with operations still queued.
#include <mpi.h>

#include <thread>

#include "test_util.h"
#include "world.h"

namespace starling_test {
namespace {

TEST(Context, LayoutOnOneHost) {
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  int v = -1;
  ASSERT_OK(starling_rank(ctx, &v));
  EXPECT_EQ(v, WorldRank());
  ASSERT_OK(starling_size(ctx, &v));
  EXPECT_EQ(v, WorldSize());
  ASSERT_OK(starling_local_rank(ctx, &v));
  EXPECT_EQ(v, WorldRank());  // one host: everyone shares memory
  ASSERT_OK(starling_local_size(ctx, &v));
  EXPECT_EQ(v, WorldSize());
  ASSERT_OK(starling_machine_rank(ctx, &v));
  EXPECT_EQ(v, 0);
  ASSERT_OK(starling_machine_size(ctx, &v));
  EXPECT_EQ(v, 1);
  ASSERT_OK(starling_is_homogeneous(ctx, &v));
  EXPECT_EQ(v, 1);
  ASSERT_OK(starling_context_destroy(ctx));
}

TEST(Context, SimulatedMachines) {
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  options.nodes_per_machine = 2;
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(&options, &ctx));
  const int r = WorldRank(), p = WorldSize();
  int v = -1;
  ASSERT_OK(starling_local_rank(ctx, &v));
  EXPECT_EQ(v, r % 2);
  ASSERT_OK(starling_local_size(ctx, &v));
  EXPECT_EQ(v, std::min(2, p - (r / 2) * 2));
  ASSERT_OK(starling_machine_rank(ctx, &v));
  EXPECT_EQ(v, r / 2);
  ASSERT_OK(starling_machine_size(ctx, &v));
  EXPECT_EQ(v, (p + 1) / 2);
  ASSERT_OK(starling_is_homogeneous(ctx, &v));
  EXPECT_EQ(v, (p % 2 == 0 || p == 1) ? 1 : 0);  // a last machine of 1 rank breaks homogeneity
  ASSERT_OK(starling_context_destroy(ctx));

  if (p == 4) {  // 3 + 1 ranks: machines of different sizes
    options.nodes_per_machine = 3;
    ASSERT_OK(starling_context_create(&options, &ctx));
    ASSERT_OK(starling_is_homogeneous(ctx, &v));
    EXPECT_EQ(v, 0);
    ASSERT_OK(starling_machine_size(ctx, &v));
    EXPECT_EQ(v, 2);
    ASSERT_OK(starling_context_destroy(ctx));
  }
}

TEST(Context, AdoptsAHostCommunicator) {
  // Split the world into halves (even / odd ranks) and run a context on each half.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, WorldRank() % 2, WorldRank(), &half);
  int half_size;
  MPI_Comm_size(half, &half_size);
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  options.use_host_comm = 1;
  options.host_comm = MPI_Comm_c2f(half);
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(&options, &ctx));
  int v;
  ASSERT_OK(starling_size(ctx, &v));
  EXPECT_EQ(v, half_size);
  Buffer x(Kind::kI32, {1});
  x.set(0, WorldRank());
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, nullptr));
  int expected = 0;
  for (int r = WorldRank() % 2; r < WorldSize(); r += 2) expected += r;
  EXPECT_EQ(x.get(0), expected);
  ASSERT_OK(starling_context_destroy(ctx));
  // MPI belongs to the host: still usable after the context is gone.
  int flag = 0;
  MPI_Finalized(&flag);
  EXPECT_EQ(flag, 0);
  MPI_Barrier(half);
  MPI_Comm_free(&half);
}

TEST(Context, TwoContextsInterleaved) {
  starling_context_t a, b;
  ASSERT_OK(starling_context_create(nullptr, &a));
  ASSERT_OK(starling_context_create(nullptr, &b));
  Buffer x(Kind::kF64, {1000}), y(Kind::kF64, {1000});
  for (size_t i = 0; i < 1000; ++i) {
    x.set(i, 1.0);
    y.set(i, 2.0);
  }
  starling_request_t ra, rb;
  ASSERT_OK(starling_allreduce_nonblocking(a, &x.t, &x.t, STARLING_SUM, nullptr, &ra));
  ASSERT_OK(starling_allreduce_nonblocking(b, &y.t, &y.t, STARLING_SUM, nullptr, &rb));
  ASSERT_OK(starling_request_wait(rb));
  ASSERT_OK(starling_request_wait(ra));
  ASSERT_OK(starling_request_free(ra));
  ASSERT_OK(starling_request_free(rb));
  EXPECT_EQ(x.get(999), WorldSize() * 1.0);
  EXPECT_EQ(y.get(0), WorldSize() * 2.0);
  ASSERT_OK(starling_context_destroy(b));
  ASSERT_OK(starling_context_destroy(a));
}

TEST(Context, DestroyRunsQueuedOperationsAndRequestsStayValid) {
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  const int kOps = 12;
  std::vector<std::unique_ptr<Buffer>> data;
  std::vector<starling_request_t> reqs(kOps);
  for (int j = 0; j < kOps; ++j) {
    data.push_back(std::make_unique<Buffer>(Kind::kF32, std::vector<int64_t>{20000}));
    for (size_t i = 0; i < 20000; ++i) data[j]->set(i, j + WorldRank());
    ASSERT_OK(starling_allreduce_nonblocking(ctx, &data[j]->t, &data[j]->t, STARLING_SUM, nullptr, &reqs[j]));
  }
  ASSERT_OK(starling_context_destroy(ctx));  // without waiting first
  const double rank_sum = WorldSize() * (WorldSize() - 1) / 2.0;
  for (int j = 0; j < kOps; ++j) {
    EXPECT_EQ(starling_request_test(reqs[j]), STARLING_SUCCESS) << "destroy returned with op " << j << " unfinished";
    ASSERT_OK(starling_request_wait(reqs[j]));
    ASSERT_OK(starling_request_free(reqs[j]));
    EXPECT_EQ(data[j]->get(19999), j * WorldSize() + rank_sum);
  }
  int v;
  EXPECT_ERROR(starling_rank(ctx, &v), STARLING_ERR_INVALID_HANDLE, "already freed or destroyed");
  EXPECT_ERROR(starling_barrier(ctx), STARLING_ERR_INVALID_HANDLE, "context");
}

TEST(Context, IdleEngineSleeps) {
  // An idle context must not burn a core: measure this process's CPU time while idle.
  starling_context_t ctx;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  ASSERT_OK(starling_barrier(ctx));
  const std::clock_t start = std::clock();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpu = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  EXPECT_LT(cpu, 0.05) << "idle context used " << cpu << " s of CPU in 0.5 s";
  ASSERT_OK(starling_context_destroy(ctx));
}

}  // namespace
}  // namespace starling_test
