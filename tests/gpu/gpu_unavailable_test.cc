// CUDA tensors where no device plugin can be used: a clean UNSUPPORTED naming what is
// missing, on every call, and host tensors keep working. Run three ways (CMake): plugin
// path that does not exist, an emulated machine with no GPU (init fails), and a
// plugin that is not a Starling plugin.
#include <cstdlib>

#include "test_util.h"

using namespace starling_test;

namespace {

TEST(GpuUnavailable, CudaTensorsAreRefusedWithTheReason) {
  const char* expect = std::getenv("EXPECT_MESSAGE");
  ASSERT_NE(expect, nullptr) << "set EXPECT_MESSAGE";
  starling_context_t ctx = nullptr;
  ASSERT_OK(starling_context_create(nullptr, &ctx));
  static float storage[4] = {1, 2, 3, 4};
  int64_t shape = 4;
  DLTensor t{};
  t.data = storage;
  t.device = {kDLCUDA, 0};
  t.ndim = 1;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = &shape;
  // On a machine with a GPU the real plugin loads: the host pointer is then refused as
  // not being device memory, and there is nothing to test here.
  if (starling_allreduce(ctx, &t, &t, STARLING_SUM, nullptr) == STARLING_ERR_INVALID_ARGUMENT &&
      std::string(starling_last_error()).find("host memory") != std::string::npos) {
    ASSERT_OK(starling_context_destroy(ctx));
    GTEST_SKIP() << "a usable GPU is present";
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    EXPECT_ERROR(starling_allreduce(ctx, &t, &t, STARLING_SUM, nullptr), STARLING_ERR_UNSUPPORTED, expect);
    starling_window_t win = nullptr;
    EXPECT_ERROR(starling_window_create(ctx, &t, "w", 0, &win), STARLING_ERR_UNSUPPORTED, expect);
  }
  const char* path = nullptr;
  ASSERT_OK(starling_gpu_path(ctx, &path));
  EXPECT_EQ(std::string(path).rfind("none", 0), 0u) << path;
  EXPECT_NE(std::string(starling_config_string()).find(expect), std::string::npos) << starling_config_string();
  // Host tensors are unaffected.
  t.device = {kDLCPU, 0};
  ASSERT_OK(starling_allreduce(ctx, &t, &t, STARLING_SUM, nullptr));
  ASSERT_OK(starling_context_destroy(ctx));
}

}  // namespace
