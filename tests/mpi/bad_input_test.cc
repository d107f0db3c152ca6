// Bad input on purpose, for every entry point of the foundation: each call must return
// the documented status with a message naming the problem, and leave the context
// usable. Ranks that disagree get STARLING_ERR_MISMATCH on every rank, not a hang.
#include <functional>
#include <thread>

#include "test_util.h"

namespace starling_test {
namespace {

using BadInput = ContextTest;

// A tensor whose fields the test then breaks.
struct Probe : Buffer {
  Probe() : Buffer(Kind::kF32, {8}) {}
};

TEST_F(BadInput, ContextCreation) {
  EXPECT_ERROR(starling_context_create(nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT, "out must not be NULL");
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  starling_context_t other = nullptr;
  options.struct_size = 4;
  EXPECT_ERROR(starling_context_create(&options, &other), STARLING_ERR_INVALID_ARGUMENT, "struct_size");
  options = (starling_context_options_t)STARLING_CONTEXT_OPTIONS_INIT;
  options.use_host_comm = 7;
  EXPECT_ERROR(starling_context_create(&options, &other), STARLING_ERR_INVALID_ARGUMENT, "use_host_comm");
  options.use_host_comm = 1;
  options.host_comm = int64_t{1} << 40;
  EXPECT_ERROR(starling_context_create(&options, &other), STARLING_ERR_INVALID_ARGUMENT, "host_comm");
  options.host_comm = -5;
  EXPECT_ERROR(starling_context_create(&options, &other), STARLING_ERR_INVALID_ARGUMENT, "host_comm");
  options = (starling_context_options_t)STARLING_CONTEXT_OPTIONS_INIT;
  options.nodes_per_machine = -2;
  EXPECT_ERROR(starling_context_create(&options, &other), STARLING_ERR_INVALID_ARGUMENT, "nodes_per_machine");
  EXPECT_EQ(other, nullptr);
}

TEST_F(BadInput, QueriesBeforeCreateAndAfterDestroy) {
  int v;
  auto queries = {starling_rank, starling_size, starling_local_rank, starling_local_size, starling_machine_rank,
                  starling_machine_size, starling_is_homogeneous};
  for (auto query : queries) {
    EXPECT_ERROR(query(nullptr, &v), STARLING_ERR_INVALID_HANDLE, "context handle is NULL");
    EXPECT_ERROR(query(ctx, nullptr), STARLING_ERR_INVALID_ARGUMENT, "out must not be NULL");
  }
  starling_context_t gone;
  ASSERT_OK(starling_context_create(nullptr, &gone));
  ASSERT_OK(starling_context_destroy(gone));
  for (auto query : queries) EXPECT_ERROR(query(gone, &v), STARLING_ERR_INVALID_HANDLE, "already freed or destroyed");
  EXPECT_ERROR(starling_context_destroy(gone), STARLING_ERR_INVALID_HANDLE, "already freed or destroyed");
  EXPECT_ERROR(starling_context_abandon(gone, "is testing"), STARLING_ERR_INVALID_HANDLE, "already freed or destroyed");
  EXPECT_ERROR(starling_context_abandon(nullptr, nullptr), STARLING_ERR_INVALID_HANDLE, "NULL");
  Probe t;
  EXPECT_ERROR(starling_allreduce(gone, &t.t, &t.t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_HANDLE, "context");
  EXPECT_ERROR(starling_broadcast(nullptr, &t.t, &t.t, 0, nullptr), STARLING_ERR_INVALID_HANDLE, "NULL");
  EXPECT_ERROR(starling_barrier(gone), STARLING_ERR_INVALID_HANDLE, "destroyed");
  EXPECT_ERROR(starling_context_destroy(nullptr), STARLING_ERR_INVALID_HANDLE, "NULL");
}

TEST_F(BadInput, TensorsAreValidatedBeforeAnythingIsQueued) {
  Probe good;
  Probe t;
  EXPECT_ERROR(starling_allreduce(ctx, nullptr, &good.t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "in must not be NULL");
  EXPECT_ERROR(starling_allreduce(ctx, &good.t, nullptr, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "out must not be NULL");

  int64_t strides[] = {2};
  t.t.strides = strides;
  EXPECT_ERROR(starling_allreduce(ctx, &t.t, &t.t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "not contiguous");
  t.t.strides = nullptr;
  t.t.byte_offset = 1;
  EXPECT_ERROR(starling_broadcast(ctx, &t.t, &t.t, 0, nullptr), STARLING_ERR_INVALID_ARGUMENT, "misaligned");
  t.t.byte_offset = 0;
  t.t.dtype = {kDLComplex, 64, 1};
  EXPECT_ERROR(starling_allreduce(ctx, &t.t, &t.t, STARLING_SUM, nullptr), STARLING_ERR_UNSUPPORTED, "complex64");
  t.t.dtype = {kDLUInt, 1, 1};
  EXPECT_ERROR(starling_allreduce(ctx, &t.t, &t.t, STARLING_SUM, nullptr), STARLING_ERR_UNSUPPORTED, "dtype");
  t.t.dtype = {kDLFloat, 32, 1};
  // A host pointer labelled CUDA: UNSUPPORTED without a usable GPU (here), else
  // INVALID_ARGUMENT (the pointer is not device memory); either names the device.
  t.t.device = {kDLCUDA, 0};
  const starling_status_t cuda_status = starling_allreduce(ctx, &t.t, &t.t, STARLING_SUM, nullptr);
  EXPECT_TRUE(cuda_status == STARLING_ERR_UNSUPPORTED || cuda_status == STARLING_ERR_INVALID_ARGUMENT) << cuda_status;
  EXPECT_NE(std::string(starling_last_error()).find("in is on cuda:0"), std::string::npos) << starling_last_error();
  t.t.device = {kDLROCM, 0};
  EXPECT_ERROR(starling_allreduce(ctx, &t.t, &t.t, STARLING_SUM, nullptr), STARLING_ERR_UNSUPPORTED, "rocm:0");
  t.t.device = {kDLCPU, 0};

  Buffer other_shape(Kind::kF32, {4, 2});
  EXPECT_ERROR(starling_allreduce(ctx, &good.t, &other_shape.t, STARLING_SUM, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "same dtype and shape");
  Buffer other_dtype(Kind::kF64, {8});
  EXPECT_ERROR(starling_broadcast(ctx, &good.t, &other_dtype.t, 0, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "float64[8]");
  DLTensor shifted = good.t;
  shifted.byte_offset = 8;  // overlaps `good` by 6 elements
  shifted.shape = t.t.shape;
  EXPECT_ERROR(starling_allreduce(ctx, &good.t, &shifted, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "partially overlap");
}

// A descriptor broken in one way (from a valid float32[8]) and the message it must give.
struct BadDescriptor {
  const char* name;
  const char* message;
  std::function<void(DLTensor*)> apply;
};

std::vector<BadDescriptor> BadDescriptors() {
  static int64_t two61[] = {int64_t{1} << 61};
  static int64_t wraps[] = {int64_t{1} << 32, int64_t{1} << 32};
  static int64_t negative[] = {-4};
  static int64_t reversed[] = {-1};
  static std::vector<int64_t> deep(65, 1);
  return {
      {"shape [2^61] of float32 (2^63 bytes)",
       "shape [2305843009213693952] of float32 has a byte size that overflows",
       [](DLTensor* t) { t->shape = two61; }},
      {"float64 [2^32, 2^32] (wraps to 0 bytes)", "shape [4294967296, 4294967296] of float64 has a byte size that overflows",
       [](DLTensor* t) { t->shape = wraps; t->ndim = 2; t->dtype = {kDLFloat, 64, 1}; }},
      {"byte_offset 2^63", "+ byte_offset 9223372036854775808 + 32 bytes runs past the end of the address space",
       [](DLTensor* t) { t->byte_offset = uint64_t{1} << 63; }},
      {"byte_offset 2^64 - 4", "+ byte_offset 18446744073709551612 + 32 bytes runs past the end of the address space",
       [](DLTensor* t) { t->byte_offset = UINT64_MAX - 3; }},
      {"negative dimension", "negative dimension -4 at index 0", [](DLTensor* t) { t->shape = negative; }},
      {"negative stride", "not contiguous (stride -1 at dimension 0, expected 1)",
       [](DLTensor* t) { t->strides = reversed; }},
      {"ndim 65", "ndim 65 (must be between 0 and 64)",
       [](DLTensor* t) { t->shape = deep.data(); t->ndim = 65; }},
      {"ndim -1", "ndim -1 (must be between 0 and 64)", [](DLTensor* t) { t->ndim = -1; }},
  };
}

// Every entry point that takes a tensor rejects each bad descriptor before touching its
// memory or queuing anything; then the context still works on every rank.
TEST_F(BadInput, DescriptorsWhoseSizesOverflowOnEveryEntryPoint) {
  Probe good;
  Buffer gathered(Kind::kF32, {8 * static_cast<int64_t>(size)});
  Buffer window_tensor(Kind::kF32, {8});
  starling_window_t win = nullptr;
  ASSERT_OK(starling_window_create(ctx, &window_tensor.t, "bad_descriptors", 1, &win));
  int64_t dims[8] = {};
  const int peer = (rank + 1) % size;
  starling_request_t req = nullptr;
  auto nonblocking = [&req](starling_status_t s) {
    EXPECT_EQ(req, nullptr) << "a failed call left a request behind";
    return s;
  };
  const std::vector<std::pair<const char*, std::function<starling_status_t(DLTensor*)>>> calls = {
      {"allreduce in place", [&](DLTensor* b) { return starling_allreduce(ctx, b, b, STARLING_SUM, "bad"); }},
      {"allreduce out", [&](DLTensor* b) { return starling_allreduce(ctx, &good.t, b, STARLING_SUM, "bad"); }},
      {"allreduce_nonblocking", [&](DLTensor* b) {
         return nonblocking(starling_allreduce_nonblocking(ctx, b, b, STARLING_AVERAGE, "bad", &req));
       }},
      {"local_allreduce", [&](DLTensor* b) { return starling_local_allreduce(ctx, b, b, STARLING_SUM, "bad"); }},
      {"broadcast", [&](DLTensor* b) { return starling_broadcast(ctx, b, b, 0, "bad"); }},
      {"allgather in", [&](DLTensor* b) { return starling_allgather(ctx, b, &gathered.t, dims, "bad"); }},
      {"allgather out", [&](DLTensor* b) { return starling_allgather(ctx, &good.t, b, dims, "bad"); }},
      {"allgather_first_dims", [&](DLTensor* b) { return starling_allgather_first_dims(ctx, b, dims, "bad"); }},
      {"neighbor_allreduce", [&](DLTensor* b) { return starling_neighbor_allreduce(ctx, b, b, nullptr); }},
      {"neighbor_allreduce_nonblocking", [&](DLTensor* b) {
         return nonblocking(starling_neighbor_allreduce_nonblocking(ctx, b, b, nullptr, &req));
       }},
      {"neighbor_allgather", [&](DLTensor* b) { return starling_neighbor_allgather(ctx, b, &gathered.t, dims, nullptr); }},
      {"neighbor_allgather out", [&](DLTensor* b) { return starling_neighbor_allgather(ctx, &good.t, b, dims, nullptr); }},
      {"neighbor_allgather_first_dims",
       [&](DLTensor* b) { return starling_neighbor_allgather_first_dims(ctx, b, dims, nullptr); }},
      {"hierarchical_neighbor_allreduce",
       [&](DLTensor* b) { return starling_hierarchical_neighbor_allreduce(ctx, b, b, nullptr); }},
      {"pair_gossip", [&](DLTensor* b) { return starling_pair_gossip(ctx, b, b, peer, 0.5, 0.5, "bad"); }},
      {"window_create", [&](DLTensor* b) {
         starling_window_t w = nullptr;
         const starling_status_t s = starling_window_create(ctx, b, "never_created", 0, &w);
         EXPECT_EQ(w, nullptr);
         return s;
       }},
      {"window_put", [&](DLTensor* b) { return starling_window_put(win, b, nullptr); }},
      {"window_accumulate", [&](DLTensor* b) { return starling_window_accumulate(win, b, nullptr); }},
  };
  for (const BadDescriptor& bad : BadDescriptors()) {
    for (const auto& [name, call] : calls) {
      SCOPED_TRACE(std::string(name) + " with " + bad.name);
      Probe t;
      bad.apply(&t.t);
      EXPECT_ERROR(call(&t.t), STARLING_ERR_INVALID_ARGUMENT, bad.message);
    }
  }
  ASSERT_OK(starling_window_free(win));
  // Nothing was queued or written: the context still lines up on every rank.
  Buffer x(Kind::kF64, {3});
  x.set(0, 2.0);
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "after bad descriptors"));
  EXPECT_EQ(x.get(0), 2.0 * size);
  ASSERT_OK(starling_barrier(ctx));
}

TEST_F(BadInput, OperationArguments) {
  Probe t;
  EXPECT_ERROR(starling_allreduce(ctx, &t.t, &t.t, (starling_reduce_op_t)9, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "reduce op 9");
  Buffer ints(Kind::kI32, {8});
  EXPECT_ERROR(starling_allreduce(ctx, &ints.t, &ints.t, STARLING_AVERAGE, nullptr), STARLING_ERR_UNSUPPORTED,
               "floating-point");
  EXPECT_ERROR(starling_broadcast(ctx, &t.t, &t.t, -1, nullptr), STARLING_ERR_INVALID_ARGUMENT, "root -1");
  EXPECT_ERROR(starling_broadcast(ctx, &t.t, &t.t, size, nullptr), STARLING_ERR_INVALID_ARGUMENT, "out of range");
  EXPECT_ERROR(starling_allreduce_nonblocking(ctx, &t.t, &t.t, STARLING_SUM, nullptr, nullptr),
               STARLING_ERR_INVALID_ARGUMENT, "req must not be NULL");
  EXPECT_ERROR(starling_barrier_nonblocking(ctx, nullptr), STARLING_ERR_INVALID_ARGUMENT, "req");

  Buffer scalar(Kind::kF32, {});
  Buffer gathered(Kind::kF32, {static_cast<int64_t>(size)});
  EXPECT_ERROR(starling_allgather(ctx, &scalar.t, &gathered.t, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "at least one dimension");
  Buffer rows(Kind::kF32, {2, 3});
  Buffer wrong_width(Kind::kF32, {2 * static_cast<int64_t>(size), 4});
  EXPECT_ERROR(starling_allgather(ctx, &rows.t, &wrong_width.t, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "all dimensions but the first");
  Buffer wrong_dtype(Kind::kI32, {2 * static_cast<int64_t>(size), 3});
  EXPECT_ERROR(starling_allgather(ctx, &rows.t, &wrong_dtype.t, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "dtype");
  if (size > 1)
    EXPECT_ERROR(starling_allgather(ctx, &rows.t, &rows.t, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
                 "in place");
  EXPECT_ERROR(starling_allgather_first_dims(ctx, &rows.t, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "first_dims");
  // Nothing above was queued: a real collective still lines up on every rank.
  Buffer x(Kind::kF64, {3});
  x.set(0, 1.0);
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, nullptr));
  EXPECT_EQ(x.get(0), static_cast<double>(size));
}

TEST_F(BadInput, RequestLifecycle) {
  EXPECT_ERROR(starling_request_wait(nullptr), STARLING_ERR_INVALID_HANDLE, "request handle is NULL");
  EXPECT_ERROR(starling_request_test(nullptr), STARLING_ERR_INVALID_HANDLE, "NULL");
  EXPECT_ERROR(starling_request_free(nullptr), STARLING_ERR_INVALID_HANDLE, "NULL");
  Probe t;
  starling_request_t req;
  ASSERT_OK(starling_allreduce_nonblocking(ctx, &t.t, &t.t, STARLING_SUM, nullptr, &req));
  ASSERT_OK(starling_request_wait(req));
  EXPECT_ERROR(starling_request_wait(req), STARLING_ERR_INVALID_USAGE, "already waited");
  EXPECT_OK(starling_request_test(req));
  ASSERT_OK(starling_request_free(req));
  EXPECT_ERROR(starling_request_free(req), STARLING_ERR_INVALID_HANDLE, "already freed");
  EXPECT_ERROR(starling_request_wait(req), STARLING_ERR_INVALID_HANDLE, "already freed");
  EXPECT_ERROR(starling_request_test(req), STARLING_ERR_INVALID_HANDLE, "already freed");
}

TEST_F(BadInput, FreeingARunningRequestIsRefused) {
  if (size < 2) GTEST_SKIP() << "needs a peer that is late";
  Probe t;
  if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  starling_request_t req;
  ASSERT_OK(starling_allreduce_nonblocking(ctx, &t.t, &t.t, STARLING_SUM, nullptr, &req));
  if (rank == 0) {
    EXPECT_EQ(starling_request_test(req), STARLING_IN_PROGRESS);
    EXPECT_ERROR(starling_request_free(req), STARLING_ERR_INVALID_USAGE, "still running");
  }
  ASSERT_OK(starling_request_wait(req));
  ASSERT_OK(starling_request_free(req));
}

// Runs `call` on every rank; all must fail with MISMATCH naming "disagree", then the
// context must still work.
template <typename Call>
void ExpectMismatchEverywhere(starling_context_t ctx, int size, Call call, const char* fragment = "disagree") {
  starling_status_t s = call();
  EXPECT_EQ(s, STARLING_ERR_MISMATCH) << starling_last_error();
  EXPECT_NE(std::string(starling_last_error()).find(fragment), std::string::npos) << starling_last_error();
  Buffer x(Kind::kI64, {2});
  x.set(0, 5);
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "after mismatch"));
  EXPECT_EQ(x.get(0), 5.0 * size);
}

TEST_F(BadInput, RanksDisagreeOnElementCount) {
  if (size < 2) GTEST_SKIP();
  for (int64_t n : {int64_t{10}, int64_t{100000}}) {  // small (gather) and large (ring) paths
    Buffer x(Kind::kF32, {rank == 1 ? n + 2 : n});
    ExpectMismatchEverywhere(ctx, size, [&] { return starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "n"); });
  }
}

TEST_F(BadInput, RanksDisagreeOnDtypeOpRootOrOperation) {
  if (size < 2) GTEST_SKIP();
  Buffer f(Kind::kF32, {16}), i(Kind::kI32, {16});
  ExpectMismatchEverywhere(ctx, size, [&] {
    return starling_allreduce(ctx, rank == 0 ? &i.t : &f.t, rank == 0 ? &i.t : &f.t, STARLING_SUM, nullptr);
  });
  ExpectMismatchEverywhere(ctx, size, [&] {
    return starling_allreduce(ctx, &f.t, &f.t, rank == size - 1 ? STARLING_MAX : STARLING_SUM, nullptr);
  });
  ExpectMismatchEverywhere(ctx, size, [&] { return starling_broadcast(ctx, &f.t, &f.t, rank == 0 ? 1 : 0, nullptr); });
  ExpectMismatchEverywhere(ctx, size, [&] {
    return rank == 0 ? starling_broadcast(ctx, &f.t, &f.t, 0, nullptr)
                     : starling_allreduce(ctx, &f.t, &f.t, STARLING_SUM, nullptr);
  });
  ExpectMismatchEverywhere(ctx, size, [&] {
    return rank == 1 ? starling_barrier(ctx) : starling_allreduce(ctx, &f.t, &f.t, STARLING_SUM, nullptr);
  });
  Buffer big(Kind::kF64, {200000});
  ExpectMismatchEverywhere(ctx, size, [&] {
    return rank == 0 ? starling_broadcast(ctx, &big.t, &big.t, 0, nullptr)
                     : starling_allreduce(ctx, &big.t, &big.t, STARLING_SUM, nullptr);
  });
}

TEST_F(BadInput, AllgatherOutputOfTheWrongSizeOnOneRank) {
  if (size < 2) GTEST_SKIP();
  Buffer in(Kind::kF32, {2, 3});
  Buffer out(Kind::kF32, {2 * static_cast<int64_t>(size) + (rank == 1 ? 1 : 0), 3});
  ExpectMismatchEverywhere(
      ctx, size, [&] { return starling_allgather(ctx, &in.t, &out.t, nullptr, nullptr); }, "add up to");
  Buffer other_width(Kind::kF32, {2, rank == 0 ? 4 : 3});
  Buffer out2(Kind::kF32, {2 * static_cast<int64_t>(size), rank == 0 ? 4 : 3});
  ExpectMismatchEverywhere(ctx, size, [&] { return starling_allgather(ctx, &other_width.t, &out2.t, nullptr, nullptr); });
}

TEST_F(BadInput, MismatchReportedThroughARequest) {
  if (size < 2) GTEST_SKIP();
  Buffer x(Kind::kF64, {rank == 0 ? 3 : 4});
  starling_request_t req;
  ASSERT_OK(starling_allreduce_nonblocking(ctx, &x.t, &x.t, STARLING_SUM, "named", &req));
  EXPECT_ERROR(starling_request_wait(req), STARLING_ERR_MISMATCH, "allreduce 'named'");
  EXPECT_EQ(starling_request_test(req), STARLING_ERR_MISMATCH);
  ASSERT_OK(starling_request_free(req));
}

}  // namespace
}  // namespace starling_test
