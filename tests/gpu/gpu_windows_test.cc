// Windows backed by CUDA memory (the emulated device in CI): the same sequence of
// operations on a host-backed and a device-backed window must leave identical tensors,
// versions and associated p, at 1-4 ranks.
#include "gpu_test_util.h"

using namespace starling_test;

namespace {

class GpuWindows : public ContextTest {
 protected:
  // Runs `step` on the host window and on the device window, then compares tensors.
  // A barrier follows, so no rank's next step (a put into a neighbor's buffer) can
  // overtake a neighbor still in this one.
  template <typename Step>
  void Both(const std::string& what, Step step) {
    ASSERT_OK(step(host_win, &x->host.t));
    ASSERT_OK(step(device_win, &x->t));
    ExpectSameBytes(*x, what);
    ASSERT_OK(starling_barrier(ctx));
  }
  void Create(Kind k, int64_t n, int zero_init) {
    x = std::make_unique<DeviceBuffer>(k, std::vector<int64_t>{n});
    x->Fill(rank, 60);
    ASSERT_OK(starling_window_create(ctx, &x->host.t, "host", zero_init, &host_win));
    ASSERT_OK(starling_window_create(ctx, &x->t, "device", zero_init, &device_win));
  }
  void Free() {
    ASSERT_OK(starling_window_free(host_win));
    ASSERT_OK(starling_window_free(device_win));
  }
  std::unique_ptr<DeviceBuffer> x;
  starling_window_t host_win = nullptr, device_win = nullptr;
};

TEST_F(GpuWindows, PutGetAccumulateUpdateMatchHostWindows) {
  for (Kind k : kAllKinds) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{70000}}) {
      const std::string what = std::string(KindName(k)) + " n " + std::to_string(n);
      Create(k, n, 0);
      ASSERT_OK(starling_barrier(ctx));
      // Update right after create: the buffers hold the creators' tensors.
      Both("update after create " + what, [](starling_window_t w, DLTensor*) { return starling_window_update(w, nullptr); });
      Both("put " + what, [](starling_window_t w, DLTensor* t) { return starling_window_put(w, t, nullptr); });
      ASSERT_OK(starling_barrier(ctx));
      Both("update after put " + what, [](starling_window_t w, DLTensor*) { return starling_window_update(w, nullptr); });
      starling_window_args_t scaled = STARLING_WINDOW_ARGS_INIT;
      scaled.self_weight = 0.5;
      Both("put with self_weight " + what, [&](starling_window_t w, DLTensor* t) { return starling_window_put(w, t, &scaled); });
      ASSERT_OK(starling_barrier(ctx));
      Both("get " + what, [](starling_window_t w, DLTensor*) { return starling_window_get(w, nullptr); });
      Both("update after get " + what, [](starling_window_t w, DLTensor*) { return starling_window_update(w, nullptr); });
      ASSERT_OK(starling_barrier(ctx));
      Both("accumulate " + what, [](starling_window_t w, DLTensor* t) { return starling_window_accumulate(w, t, nullptr); });
      ASSERT_OK(starling_barrier(ctx));
      Both("update_then_collect " + what,
           [](starling_window_t w, DLTensor*) { return starling_window_update_then_collect(w, 0); });
      // Versions agree.
      std::vector<int> ranks_h(size), ranks_d(size);
      std::vector<int64_t> versions_h(size), versions_d(size);
      int count_h = 0, count_d = 0;
      ASSERT_OK(starling_window_versions(host_win, ranks_h.data(), versions_h.data(), size, &count_h));
      ASSERT_OK(starling_window_versions(device_win, ranks_d.data(), versions_d.data(), size, &count_d));
      EXPECT_EQ(count_h, count_d);
      EXPECT_EQ(versions_h, versions_d);
      ASSERT_OK(starling_barrier(ctx));
      Free();
    }
  }
}

TEST_F(GpuWindows, MutexesWeightsAndAssociatedP) {
  ASSERT_OK(starling_set_window_associated_p_enabled(ctx, 1));
  Create(Kind::kF32, 5000, 1);
  ASSERT_OK(starling_barrier(ctx));
  std::vector<int> outs(size);
  int count = 0;
  ASSERT_OK(starling_out_neighbors(ctx, outs.data(), size, &count));
  outs.resize(count);
  std::vector<double> weights(outs.size(), 0.5);
  starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
  args.num_ranks = count;
  args.ranks = outs.data();
  args.weights = weights.data();
  args.self_weight = 0.5;
  args.require_mutex = 1;
  Both("accumulate with mutex and weights",
       [&](starling_window_t w, DLTensor* t) { return starling_window_accumulate(w, t, &args); });
  ASSERT_OK(starling_barrier(ctx));
  starling_window_update_args_t update = STARLING_WINDOW_UPDATE_ARGS_INIT;
  update.require_mutex = 1;
  update.reset = 1;
  Both("update with mutex and reset", [&](starling_window_t w, DLTensor*) { return starling_window_update(w, &update); });
  double p_host = 0, p_device = 0;
  ASSERT_OK(starling_window_associated_p(host_win, &p_host));
  ASSERT_OK(starling_window_associated_p(device_win, &p_device));
  EXPECT_EQ(p_host, p_device);
  if (size > 1) {
    EXPECT_NE(p_device, 1.0);
  }
  ASSERT_OK(starling_window_mutex_acquire(device_win, nullptr, 0, 0));
  ASSERT_OK(starling_window_mutex_release(device_win, nullptr, 0, 0));
  ASSERT_OK(starling_barrier(ctx));
  Free();
  ASSERT_OK(starling_set_window_associated_p_enabled(ctx, 0));
}

// Nonblocking puts from every rank at once into device windows, then one update.
TEST_F(GpuWindows, NonblockingPutsEveryRankAtOnce) {
  Create(Kind::kF64, 20000, 1);
  std::vector<starling_request_t> reqs(2);
  ASSERT_OK(starling_window_put_nonblocking(host_win, &x->host.t, nullptr, &reqs[0]));
  ASSERT_OK(starling_window_put_nonblocking(device_win, &x->t, nullptr, &reqs[1]));
  for (starling_request_t r : reqs) {
    ASSERT_OK(starling_request_wait(r));
    ASSERT_OK(starling_request_free(r));
  }
  ASSERT_OK(starling_barrier(ctx));
  Both("update after nonblocking puts", [](starling_window_t w, DLTensor*) { return starling_window_update(w, nullptr); });
  ASSERT_OK(starling_barrier(ctx));
  Free();
}

}  // namespace

namespace {

// A device-backed window left open when its context is destroyed: its device access
// (streams, pinned memory) must stay valid until the window goes (ASan runs this).
TEST(GpuWindowLifetime, DestroyingAContextWithALiveDeviceWindow) {
  starling_context_t ctx = nullptr;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  int rank = 0;
  ASSERT_OK(starling_rank(ctx, &rank));
  DeviceBuffer x(Kind::kF32, {4096});
  x.Fill(rank, 95);
  starling_window_t win = nullptr;
  ASSERT_OK(starling_window_create(ctx, &x.t, "left open on the device", 0, &win));
  ASSERT_OK(starling_window_put(win, &x.t, nullptr));
  ASSERT_OK(starling_barrier(ctx));
  ASSERT_OK(starling_window_update(win, nullptr));
  ASSERT_OK(starling_context_destroy(ctx));
  EXPECT_ERROR(starling_window_put(win, &x.t, nullptr), STARLING_ERR_SHUTDOWN, "context is being destroyed");
}

}  // namespace
