// starling_context_abort at 2 ranks. Each test uses a second context ("victim") that
// rank 0 aborts while rank 1 never makes the matching call; the ContextTest context
// stays healthy and keeps the ranks in step (its barriers), so the job ends cleanly.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "test_util.h"

namespace starling_test {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Bounds on this 2-core machine shared with other jobs: an abort is seen within a few
// hundred microseconds when idle; the bound leaves room for scheduling delays.
constexpr double kAbortBoundSeconds = 0.1;
constexpr double kDestroyBoundSeconds = 1.0;

// Aborts `ctx` from another thread after `delay` seconds; records when.
class DelayedAbort {
 public:
  DelayedAbort(starling_context_t ctx, double delay) {
    // Started last: the thread writes the members below.
    thread_ = std::thread([this, ctx, delay] {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      at_ = Clock::now();
      armed_ = true;  // before the abort: whatever the abort releases sees it
      status_ = starling_context_abort(ctx);
    });
  }
  ~DelayedAbort() {
    if (thread_.joinable()) thread_.join();
  }
  // Seconds from the abort to now.
  double SinceAbort() const { return armed_ ? Since(at_) : -1.0; }
  void Join() { thread_.join(); }
  starling_status_t status() const { return status_; }

 private:
  Clock::time_point at_;
  std::atomic<bool> armed_{false};
  starling_status_t status_ = -100;
  std::thread thread_;
};

class AbortTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    ASSERT_OK(starling_context_create(nullptr, &victim));
  }
  void TearDown() override {
    if (victim) EXPECT_OK(starling_context_destroy(victim));
    ContextTest::TearDown();
  }
  // Destroys the aborted context and checks that it is quick (local).
  void DestroyVictim() {
    const auto start = Clock::now();
    EXPECT_OK(starling_context_destroy(victim));
    EXPECT_LT(Since(start), kDestroyBoundSeconds);
    victim = nullptr;
  }
  starling_context_t victim = nullptr;
};

TEST_F(AbortTest, BlockedCallAndPendingRequestsFailWithAborted) {
  if (size != 2) GTEST_SKIP() << "needs 2 ranks";
  Buffer x(Kind::kF32, {1024});
  if (rank == 0) {
    // Three nonblocking operations whose peer never comes: the first runs (and waits)
    // on the progress thread, the others stay queued.
    starling_request_t reqs[3];
    for (auto& r : reqs) ASSERT_OK(starling_allreduce_nonblocking(victim, &x.t, &x.t, STARLING_SUM, "pending", &r));
    std::string message;
    double returned_after = -1;
    {
      DelayedAbort abort(victim, 0.3);
      const auto start = Clock::now();
      const starling_status_t status = starling_allreduce(victim, &x.t, &x.t, STARLING_SUM, "blocked");
      message = starling_last_error();
      returned_after = abort.SinceAbort();
      EXPECT_EQ(status, STARLING_ERR_ABORTED) << message;
      EXPECT_GT(Since(start), 0.25);
      abort.Join();
      EXPECT_EQ(abort.status(), STARLING_SUCCESS);
    }
    std::printf("[ abort ] blocked allreduce returned %.3f ms after starling_context_abort\n", returned_after * 1e3);
    EXPECT_GE(returned_after, 0.0);
    EXPECT_LT(returned_after, kAbortBoundSeconds);
    EXPECT_NE(message.find("allreduce 'blocked'"), std::string::npos) << message;
    EXPECT_NE(message.find("abort"), std::string::npos) << message;
    // The requests complete with ABORTED, test and wait agree, and they can be freed.
    for (auto& r : reqs) {
      const auto start = Clock::now();
      EXPECT_ERROR(starling_request_wait(r), STARLING_ERR_ABORTED, "abort");
      EXPECT_LT(Since(start), kAbortBoundSeconds);
      EXPECT_EQ(starling_request_test(r), STARLING_ERR_ABORTED);
      EXPECT_OK(starling_request_free(r));
    }
    // Later calls fail at once: blocking, nonblocking (no request), windows, topology.
    auto start = Clock::now();
    EXPECT_ERROR(starling_allreduce(victim, &x.t, &x.t, STARLING_SUM, "later"), STARLING_ERR_ABORTED, "aborted");
    EXPECT_ERROR(starling_barrier(victim), STARLING_ERR_ABORTED, "aborted");
    EXPECT_ERROR(starling_neighbor_allreduce(victim, &x.t, &x.t, nullptr), STARLING_ERR_ABORTED, "aborted");
    starling_request_t late = reinterpret_cast<starling_request_t>(1);
    EXPECT_ERROR(starling_broadcast_nonblocking(victim, &x.t, &x.t, 0, "late", &late), STARLING_ERR_ABORTED, "aborted");
    EXPECT_EQ(late, nullptr);
    starling_window_t win = nullptr;
    EXPECT_ERROR(starling_window_create(victim, &x.t, "w", 0, &win), STARLING_ERR_ABORTED, "aborted");
    EXPECT_LT(Since(start), kAbortBoundSeconds);
    // Local queries still work; aborting again is not an error.
    int r = -1;
    EXPECT_OK(starling_rank(victim, &r));
    EXPECT_EQ(r, 0);
    EXPECT_OK(starling_context_abort(victim));
    EXPECT_STRNE(starling_status_string(STARLING_ERR_ABORTED), "unknown status code");
    DestroyVictim();
    EXPECT_ERROR(starling_context_abort(victim), STARLING_ERR_INVALID_HANDLE, "context");
  }
  ASSERT_OK(starling_barrier(ctx));  // rank 1 never called the victim's operations
}

TEST_F(AbortTest, RequestWaitOnAnotherThreadReturns) {
  if (size != 2) GTEST_SKIP() << "needs 2 ranks";
  Buffer x(Kind::kF64, {8});
  if (rank == 0) {
    starling_request_t req;
    ASSERT_OK(starling_neighbor_allreduce_nonblocking(victim, &x.t, &x.t, nullptr, &req));
    DelayedAbort abort(victim, 0.2);
    EXPECT_ERROR(starling_request_wait(req), STARLING_ERR_ABORTED, "neighbor_allreduce");
    const double after = abort.SinceAbort();
    EXPECT_GE(after, 0.0);
    EXPECT_LT(after, kAbortBoundSeconds);
    EXPECT_OK(starling_request_free(req));
    abort.Join();
    DestroyVictim();
  }
  ASSERT_OK(starling_barrier(ctx));
}

TEST_F(AbortTest, DestroyOnAnotherThreadIsReleasedByAbort) {
  if (size != 2) GTEST_SKIP() << "needs 2 ranks";
  Buffer x(Kind::kF32, {16});
  Buffer all(Kind::kF32, {32});
  if (rank == 0) {
    starling_request_t req;
    ASSERT_OK(starling_allgather_nonblocking(victim, &x.t, &all.t, nullptr, "stuck", &req));
    // Destroy runs queued work to completion, so it would wait for rank 1 forever.
    DelayedAbort abort(victim, 0.3);
    EXPECT_OK(starling_context_destroy(victim));
    const double after = abort.SinceAbort();
    EXPECT_GE(after, 0.0);
    EXPECT_LT(after, kDestroyBoundSeconds);
    victim = nullptr;
    abort.Join();
    EXPECT_ERROR(starling_request_wait(req), STARLING_ERR_ABORTED, "allgather 'stuck'");
    EXPECT_OK(starling_request_free(req));
  }
  ASSERT_OK(starling_barrier(ctx));
}

TEST_F(AbortTest, MutexWaitAndWindowsAfterAbort) {
  if (size != 2) GTEST_SKIP() << "needs 2 ranks";
  Buffer x(Kind::kF32, {64});
  starling_window_t win;
  ASSERT_OK(starling_window_create(victim, &x.t, "abort.w", 0, &win));
  const int zero = 0;
  // Rank 1 takes rank 0's mutex for its buffer and keeps it.
  if (rank == 1) ASSERT_OK(starling_window_mutex_acquire(win, &zero, 1, 0));
  ASSERT_OK(starling_barrier(ctx));
  if (rank == 0) {
    const int one = 1;
    DelayedAbort abort(victim, 0.3);
    EXPECT_ERROR(starling_window_mutex_acquire(win, &one, 1, 1), STARLING_ERR_ABORTED, "abort");
    const double after = abort.SinceAbort();
    EXPECT_GE(after, 0.0);
    EXPECT_LT(after, kAbortBoundSeconds);
    abort.Join();
    starling_window_update_args_t args = STARLING_WINDOW_UPDATE_ARGS_INIT;
    EXPECT_ERROR(starling_window_update(win, &args), STARLING_ERR_ABORTED, "aborted");
    EXPECT_ERROR(starling_window_put(win, &x.t, nullptr), STARLING_ERR_ABORTED, "aborted");
  }
  ASSERT_OK(starling_barrier(ctx));
  // Rank 1 cannot release the mutex (rank 0 no longer answers): it aborts too.
  if (rank == 1) ASSERT_OK(starling_context_abort(victim));
  // Freeing a window of an aborted context is local and releases the handle.
  EXPECT_OK(starling_window_free(win));
  EXPECT_EQ(starling_window_free(win), STARLING_ERR_INVALID_HANDLE);
  DestroyVictim();
  ASSERT_OK(starling_barrier(ctx));
}

}  // namespace
}  // namespace starling_test
