// Bad CUDA input fails with a clear error on the calling rank, nothing hangs, and the
// context stays usable. Registered with STARLING_EMU_DEVICES=2.
#include "gpu_test_util.h"

using namespace starling_test;

namespace {

class GpuBadInput : public ContextTest {
 protected:
  // The context still works: a device allreduce gives the host result.
  void ExpectUsable() {
    DeviceBuffer x(Kind::kF32, {9});
    x.Fill(rank, 70);
    ASSERT_OK(starling_allreduce(ctx, &x.host.t, &x.host.t, STARLING_SUM, nullptr));
    ASSERT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, nullptr));
    ExpectSameBytes(x, "allreduce after bad input");
  }
};

TEST_F(GpuBadInput, HostPointerLabelledAsCuda) {
  Buffer host(Kind::kF32, {8});
  DLTensor t = host.t;
  t.device = {kDLCUDA, 0};
  EXPECT_ERROR(starling_allreduce(ctx, &t, &t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "says it is on cuda:0 but its data pointer is host memory");
  ExpectUsable();
}

TEST_F(GpuBadInput, InputAndOutputOnDifferentDevices) {
  DeviceBuffer in(Kind::kF32, {8});
  Buffer out(Kind::kF32, {8});
  EXPECT_ERROR(starling_allreduce(ctx, &in.t, &out.t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "in is on cuda:0 but out is host memory");
  EXPECT_ERROR(starling_neighbor_allreduce(ctx, &out.t, &in.t, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "out is on cuda:0 but in is host memory");
  ExpectUsable();
}

TEST_F(GpuBadInput, TensorOnAnotherGpuThanTheContexts) {
  if (TestDevice::Get().count() < 2 || TestDevice::Get().index() != 0) GTEST_SKIP() << "needs two GPUs";
  ExpectUsable();  // fixes the context's GPU: cuda:0
  DeviceBuffer other(Kind::kF32, {8}, 1);
  EXPECT_ERROR(starling_allreduce(ctx, &other.t, &other.t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "is on cuda:1 but this context uses cuda:0");
  DLTensor lying = other.t;
  lying.device = {kDLCUDA, 0};
  EXPECT_ERROR(starling_allreduce(ctx, &lying, &lying, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "its memory belongs to cuda:1");
  DLTensor missing = other.t;
  missing.device = {kDLCUDA, 7};
  EXPECT_ERROR(starling_allreduce(ctx, &missing, &missing, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "cuda:7");
  ExpectUsable();
}

TEST_F(GpuBadInput, OverlappingDeviceTensors) {
  DeviceBuffer x(Kind::kF32, {64});
  DLTensor in = x.t, out = x.t;
  int64_t half = 32;
  in.shape = &half;
  out.shape = &half;
  out.byte_offset = 16 * 4;
  EXPECT_ERROR(starling_allreduce(ctx, &in, &out, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "partially overlap");
  ExpectUsable();
}

// reduce_scatter may run in place only with out as exactly this rank's block of in;
// alltoall never in place.
TEST_F(GpuBadInput, ReduceScatterAndAlltoallOverlaps) {
  const int64_t block = 4;
  DeviceBuffer x(Kind::kF32, {block * (size + 1)});
  int64_t all = block * size, one = block;
  DLTensor in = x.t, out = x.t;
  in.shape = &all;
  out.shape = &one;
  out.byte_offset = 2 * 4;  // straddles blocks 0 and 1 (one rank: the end of in)
  EXPECT_ERROR(starling_reduce_scatter(ctx, &in, &out, nullptr, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               size > 1 ? "reduce_scatter: in and out overlap" : "in and out partially overlap");
  if (size > 1) {
    out.byte_offset = static_cast<uint64_t>((rank + 1) % size * block) * 4;  // another rank's block
    EXPECT_ERROR(starling_reduce_scatter(ctx, &in, &out, nullptr, STARLING_SUM, nullptr),
                 STARLING_ERR_INVALID_ARGUMENT, "reduce_scatter: in and out overlap");
  }
  DLTensor half = x.t;
  half.shape = &all;
  half.byte_offset = 2 * 4;
  EXPECT_ERROR(starling_alltoall(ctx, &in, &half, nullptr, nullptr, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "partially overlap");
  ExpectUsable();
}

TEST_F(GpuBadInput, WindowOnDeviceSomewhereAndHostElsewhere) {
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  DeviceBuffer x(Kind::kF32, {16});
  starling_window_t win = nullptr;
  DLTensor* t = rank == 0 ? &x.t : &x.host.t;
  EXPECT_ERROR(starling_window_create(ctx, t, "mixed", 0, &win), STARLING_ERR_MISMATCH, "window_create");
  EXPECT_EQ(win, nullptr);
  ExpectUsable();
  // The name is free again: a consistent create works.
  ASSERT_OK(starling_window_create(ctx, &x.t, "mixed", 0, &win));
  ASSERT_OK(starling_window_free(win));
}

TEST_F(GpuBadInput, NonContiguousAndNullDeviceData) {
  DeviceBuffer x(Kind::kF32, {4, 4});
  DLTensor t = x.t;
  int64_t strides[] = {1, 4};
  t.strides = strides;
  EXPECT_ERROR(starling_allreduce(ctx, &t, &t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "not contiguous");
  DLTensor null_data = x.t;
  null_data.data = nullptr;
  EXPECT_ERROR(starling_allreduce(ctx, &null_data, &null_data, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "NULL data");
  DLTensor negative = x.t;
  negative.device = {kDLCUDA, -1};
  EXPECT_ERROR(starling_allreduce(ctx, &negative, &negative, STARLING_SUM, nullptr), STARLING_ERR_INVALID_ARGUMENT,
               "negative CUDA device");
  ExpectUsable();
}

// A caller's stream being captured into a CUDA graph is refused before anything is
// recorded on it (review #19), by collectives, nonblocking calls and window puts alike;
// the capture stays valid, and the same calls work on that stream once it has ended.
TEST_F(GpuBadInput, CallerStreamBeingCapturedIntoAGraph) {
  const TestDevice& dev = TestDevice::Get();
  if (!dev.emulated()) GTEST_SKIP() << "the test drives the capture through the emulator";
  void* stream = nullptr;
  ASSERT_EQ(dev.table().stream_create(dev.index(), &stream), 0) << dev.last_error();
  DeviceBuffer x(Kind::kF32, {9}), out(Kind::kF32, {9});
  x.Fill(rank, 71);
  starling_window_t win = nullptr;
  ASSERT_OK(starling_window_create(ctx, &x.t, "captured", 0, &win));
  ASSERT_EQ(dev.BeginCapture(stream), 0) << dev.last_error();
  ASSERT_OK(starling_set_cuda_stream(stream));
  const char* why = "is being captured into a CUDA graph";
  EXPECT_ERROR(starling_allreduce(ctx, &x.t, &out.t, STARLING_SUM, nullptr), STARLING_ERR_INVALID_USAGE, why);
  starling_request_t req = nullptr;
  EXPECT_ERROR(starling_neighbor_allreduce_nonblocking(ctx, &x.t, &out.t, nullptr, &req), STARLING_ERR_INVALID_USAGE,
               why);
  EXPECT_EQ(req, nullptr);
  if (size > 1) {
    EXPECT_ERROR(starling_window_put(win, &x.t, nullptr), STARLING_ERR_INVALID_USAGE, why);
  }
  ASSERT_OK(starling_set_cuda_stream(nullptr));
  EXPECT_EQ(dev.EndCapture(stream), 0) << dev.last_error();  // nothing invalidated it
  ASSERT_OK(starling_set_cuda_stream(stream));
  ASSERT_OK(starling_allreduce(ctx, &x.t, &out.t, STARLING_SUM, nullptr));
  ASSERT_OK(starling_set_cuda_stream(nullptr));
  ASSERT_OK(starling_allreduce(ctx, &x.host.t, &out.host.t, STARLING_SUM, nullptr));
  ExpectSameBytes(out, "allreduce on the stream after its capture ended");
  ASSERT_OK(starling_window_free(win));
  ASSERT_EQ(dev.table().stream_destroy(stream), 0) << dev.last_error();
  ExpectUsable();
}

}  // namespace
