// Classic collectives for every dtype, blocking and nonblocking, in place and out of
// place, small (latency path) and large (ring / chain path) sizes, against references
// every rank computes independently in float64.
#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "test_util.h"

namespace starling_test {
namespace {

using Collectives = ContextTest;

// 70000 float64 elements = 560 KB: above the small-message thresholds, so the
// agreement + ring/chain paths run; several chunks of 256 KiB.
const size_t kSizes[] = {0, 1, 7, 1000, 70000};

void CheckAllreduce(Buffer& out, starling_reduce_op_t op, int size, int salt, const std::string& what) {
  for (size_t i = 0; i < out.numel(); ++i) {
    const double expected = ReducedValue(out.kind, op, size, i, salt);
    const double scale = op == STARLING_AVERAGE ? 4.0 : 4.0 * size;
    ASSERT_NEAR(out.get(i), expected, Tolerance(out.kind, scale)) << what << " element " << i;
  }
}

TEST_F(Collectives, AllreduceEveryDtypeOpSizeBlockingInPlaceAndNot) {
  const starling_reduce_op_t ops[] = {STARLING_SUM, STARLING_AVERAGE, STARLING_MIN, STARLING_MAX};
  int salt = 0;
  for (Kind k : kAllKinds) {
    for (starling_reduce_op_t op : ops) {
      if (op == STARLING_AVERAGE && !IsFloat(k)) continue;
      for (size_t n : kSizes) {
        if (n == 70000 && KindSize(k) < 4 && op != STARLING_SUM) continue;  // keep the test fast
        for (int in_place = 0; in_place < 2; ++in_place) {
          ++salt;
          Buffer in(k, {static_cast<int64_t>(n)});
          Buffer out(k, {static_cast<int64_t>(n)});
          for (size_t i = 0; i < n; ++i) in.set(i, Value(k, rank, i, salt));
          Buffer& target = in_place ? in : out;
          ASSERT_OK(starling_allreduce(ctx, &in.t, &target.t, op, "t"));
          CheckAllreduce(target, op, size, salt,
                         std::string(KindName(k)) + " op " + std::to_string(op) + " n " + std::to_string(n) +
                             (in_place ? " in place" : ""));
          if (!in_place) {  // the input is untouched
            for (size_t i = 0; i < n; ++i) ASSERT_EQ(in.get(i), Value(k, rank, i, salt));
          }
        }
      }
    }
  }
}

TEST_F(Collectives, AllreduceResultsAreBitIdenticalAcrossRanks) {
  // Values that are not exactly summable in float32: every rank must still end with the
  // same bits (each element reduced in one fixed order).
  for (size_t n : {size_t{1000}, size_t{300000}}) {
    Buffer x(Kind::kF32, {static_cast<int64_t>(n)});
    for (size_t i = 0; i < n; ++i) x.set(i, 1.0 / (1.0 + i + 3.0 * rank) + 1e-3 * rank);
    ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_AVERAGE, nullptr));
    Buffer root_copy(Kind::kF32, {static_cast<int64_t>(n)});
    ASSERT_OK(starling_broadcast(ctx, &x.t, &root_copy.t, 0, nullptr));
    ASSERT_EQ(std::memcmp(x.bytes(), root_copy.bytes(), n * 4), 0) << "n " << n;
  }
}

TEST_F(Collectives, ManyNonblockingRequestsInFlight) {
  const int kRequests = 40;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<starling_request_t> requests(kRequests);
  for (int j = 0; j < kRequests; ++j) {
    const Kind k = kAllKinds[j % 9];
    const size_t n = (j % 5 == 0) ? 40000 : 10 + j;
    buffers.push_back(std::make_unique<Buffer>(k, std::vector<int64_t>{static_cast<int64_t>(n)}));
    for (size_t i = 0; i < n; ++i) buffers.back()->set(i, Value(k, rank, i, 1000 + j));
    ASSERT_OK(starling_allreduce_nonblocking(ctx, &buffers.back()->t, &buffers.back()->t, STARLING_SUM, nullptr,
                                             &requests[j]));
  }
  // Wait in reverse order: completion order does not depend on wait order.
  for (int j = kRequests - 1; j >= 0; --j) {
    ASSERT_OK(starling_request_wait(requests[j]));
    ASSERT_OK(starling_request_test(requests[j]));  // the final status stays readable
    ASSERT_OK(starling_request_free(requests[j]));
    CheckAllreduce(*buffers[j], STARLING_SUM, size, 1000 + j, "request " + std::to_string(j));
  }
}

TEST_F(Collectives, NonblockingCompletesInBackgroundWithoutWaiting) {
  Buffer x(Kind::kF64, {100000});
  for (size_t i = 0; i < x.numel(); ++i) x.set(i, Value(Kind::kF64, rank, i, 7));
  starling_request_t req;
  ASSERT_OK(starling_allreduce_nonblocking(ctx, &x.t, &x.t, STARLING_SUM, "bg", &req));
  // Poll only: the progress thread must finish the operation on its own.
  int status = STARLING_IN_PROGRESS;
  for (int i = 0; i < 20000 && status == STARLING_IN_PROGRESS; ++i) {
    status = starling_request_test(req);
    if (status == STARLING_IN_PROGRESS) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ASSERT_EQ(status, STARLING_SUCCESS) << starling_last_error();
  ASSERT_OK(starling_request_free(req));
  CheckAllreduce(x, STARLING_SUM, size, 7, "background");
}

TEST_F(Collectives, BroadcastEveryRootDtypeSize) {
  int salt = 500;
  for (Kind k : kAllKinds) {
    for (size_t n : kSizes) {
      for (int root = 0; root < size; ++root) {
        for (int in_place = 0; in_place < 2; ++in_place) {
          ++salt;
          Buffer in(k, {static_cast<int64_t>(n)});
          Buffer out(k, {static_cast<int64_t>(n)});
          for (size_t i = 0; i < n; ++i) in.set(i, Value(k, rank, i, salt));
          Buffer& target = in_place ? in : out;
          if (n > 1000 && k != Kind::kF32 && k != Kind::kU8) continue;
          starling_request_t req;
          if (salt % 2) {
            ASSERT_OK(starling_broadcast(ctx, &in.t, &target.t, root, nullptr));
          } else {
            ASSERT_OK(starling_broadcast_nonblocking(ctx, &in.t, &target.t, root, nullptr, &req));
            ASSERT_OK(starling_request_wait(req));
            ASSERT_OK(starling_request_free(req));
          }
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(target.get(i), Value(k, root, i, salt)) << KindName(k) << " n " << n << " root " << root;
        }
      }
    }
  }
}

TEST_F(Collectives, AllgatherVaryingFirstDimensions) {
  int salt = 900;
  for (Kind k : {Kind::kF32, Kind::kF64, Kind::kI8, Kind::kBF16, Kind::kI64}) {
    // 170 / 400 rows: blocks on both sides of the two-rank threshold (2 KiB) for
    // allgather's data with the metadata, mixed across ranks (impl/ops/allgather.cc).
    for (int64_t rows_base : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{170}, int64_t{400}, int64_t{9000}}) {
      ++salt;
      // Rank r contributes rows_base + r rows (rank 0 may contribute none) of width 3.
      auto rows_of = [&](int r) { return rows_base == 0 ? (r % 2) : rows_base + r; };
      Buffer in(k, {rows_of(rank), 3});
      for (size_t i = 0; i < in.numel(); ++i) in.set(i, Value(k, rank, i, salt));
      std::vector<int64_t> dims(size, -1);
      ASSERT_OK(starling_allgather_first_dims(ctx, &in.t, dims.data(), nullptr));
      int64_t total = 0;
      for (int r = 0; r < size; ++r) {
        ASSERT_EQ(dims[r], rows_of(r));
        total += rows_of(r);
      }
      Buffer out(k, {total, 3});
      std::vector<int64_t> dims2(size, -1);
      starling_request_t req;
      ASSERT_OK(starling_allgather_nonblocking(ctx, &in.t, &out.t, dims2.data(), "g", &req));
      ASSERT_OK(starling_request_wait(req));
      ASSERT_OK(starling_request_free(req));
      EXPECT_EQ(dims2, dims);
      size_t at = 0;
      for (int r = 0; r < size; ++r) {
        for (size_t i = 0; i < static_cast<size_t>(rows_of(r)) * 3; ++i, ++at)
          ASSERT_EQ(out.get(at), Value(k, r, i, salt)) << KindName(k) << " rank block " << r << " element " << i;
      }
      // Blocking form too.
      Buffer out2(k, {total, 3});
      ASSERT_OK(starling_allgather(ctx, &in.t, &out2.t, nullptr, nullptr));
      ASSERT_EQ(std::memcmp(out.bytes(), out2.bytes(), out.numel() * KindSize(k)), 0);
    }
  }
}

TEST_F(Collectives, BarrierWaitsForTheSlowestRank) {
  // Rank 0 enters late, and no rank may leave before it entered. Entry and exit times
  // come from one clock (steady_clock is the host's CLOCK_MONOTONIC, shared by the
  // ranks of these single-host tests), so the check holds however unevenly a loaded
  // machine (sanitizers, more ranks than cores) schedules the ranks.
  using Clock = std::chrono::steady_clock;
  auto now = [] { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); };
  for (int iteration = 0; iteration < 3; ++iteration) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Buffer times(Kind::kF64, {2});
    times.set(0, now());
    ASSERT_OK(starling_barrier(ctx));
    times.set(1, now());
    Buffer all(Kind::kF64, {2 * size});
    ASSERT_OK(starling_allgather(ctx, &times.t, &all.t, nullptr, nullptr));
    EXPECT_GE(times.get(1), all.get(0)) << "rank " << rank << " left the barrier before rank 0 entered";
  }
  starling_request_t req;
  ASSERT_OK(starling_barrier_nonblocking(ctx, &req));
  ASSERT_OK(starling_request_wait(req));
  ASSERT_OK(starling_request_free(req));
}

TEST_F(Collectives, MixedOperationsInFlightKeepTheirOrder) {
  Buffer a(Kind::kF32, {5000}), b(Kind::kI32, {300}), c(Kind::kF64, {2, 50});
  for (size_t i = 0; i < a.numel(); ++i) a.set(i, Value(Kind::kF32, rank, i, 1));
  for (size_t i = 0; i < b.numel(); ++i) b.set(i, Value(Kind::kI32, rank, i, 2));
  for (size_t i = 0; i < c.numel(); ++i) c.set(i, Value(Kind::kF64, rank, i, 3));
  Buffer gathered(Kind::kF64, {2 * static_cast<int64_t>(size), 50});
  starling_request_t r1, r2, r3, r4;
  ASSERT_OK(starling_allreduce_nonblocking(ctx, &a.t, &a.t, STARLING_MAX, "a", &r1));
  ASSERT_OK(starling_broadcast_nonblocking(ctx, &b.t, &b.t, size - 1, "b", &r2));
  ASSERT_OK(starling_allgather_nonblocking(ctx, &c.t, &gathered.t, nullptr, "c", &r3));
  ASSERT_OK(starling_barrier_nonblocking(ctx, &r4));
  for (starling_request_t r : {r4, r3, r2, r1}) {
    ASSERT_OK(starling_request_wait(r));
    ASSERT_OK(starling_request_free(r));
  }
  CheckAllreduce(a, STARLING_MAX, size, 1, "a");
  for (size_t i = 0; i < b.numel(); ++i) ASSERT_EQ(b.get(i), Value(Kind::kI32, size - 1, i, 2));
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < 100; ++i) ASSERT_EQ(gathered.get(r * 100 + i), Value(Kind::kF64, r, i, 3));
}

TEST_F(Collectives, IntegerSumsWrapAround) {
  Buffer x(Kind::kI8, {4});
  for (size_t i = 0; i < 4; ++i) x.set(i, 100);
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, nullptr));
  const int expected = static_cast<int8_t>(static_cast<uint8_t>(100 * size));
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(x.get(i), expected);
}

TEST_F(Collectives, ScalarTensors) {
  Buffer x(Kind::kF64, {});
  x.set(0, rank + 1.0);
  ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, nullptr));
  EXPECT_EQ(x.get(0), size * (size + 1) / 2.0);
}

}  // namespace
}  // namespace starling_test
