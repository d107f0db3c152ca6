#include "kernels.h"

#include <cstring>
#include <functional>
#include <vector>

#include "common.h"
#include "impl/device/kernels/dispatch.h"
#include "impl/device/kernels/host_kernels.h"
#include "impl/device/plugin_abi.h"
#include "impl/device/runtime_status.h"
#include "memory.h"
#include "stream.h"

namespace starling::emu {

namespace hk = starling::device::kernels;

namespace {

// The failure message of a kernel task whose host code rejected its arguments (the checks
// below should have caught it already; this is the backstop).
std::string KernelResult(const char* fn, int rc) {
  return rc == 0 ? std::string() : Format("%s: the kernel failed: %s", fn, hk::StatusMessage(rc));
}

int CheckBytes(const char* fn, size_t n, int dtype, size_t* bytes) {
  if (DTypeSize(dtype) == 0) return Fail("%s: unknown dtype %d", fn, dtype);
  if (!ElementBytes(n, dtype, bytes)) return Fail("%s: %zu elements of %s overflow", fn, n, DTypeName(dtype));
  return 0;
}

// A kernel launch: on a GPU, <<<>>> has no status of its own but the runtime's per-thread
// last-error slot, which is read here the way the CUDA plugin reads it (runtime_status.h):
// a code an earlier call left in the slot (an event query's "not ready") would otherwise be
// taken for this launch's failure.
int Launch(const char* fn, const std::function<int()>& submit) {
  std::string why;
  const int code = starling::device::LaunchStatus(
      [&] {
        if (submit() != 0) {
          why = LastError();
          SetRuntimeError(kRtLaunchFailure);
        }
      },
      [] { return TakeRuntimeError(); });
  if (code == kRtSuccess) return 0;
  if (!why.empty()) return Fail(why);
  return Fail("%s: kernel launch: %s", fn, RuntimeErrorName(code));
}

bool IsFloating(int dtype) { return dtype == kFloat16 || dtype == kBFloat16 || dtype == kFloat32 || dtype == kFloat64; }

}  // namespace

int MemcpyAsync(void* dst, const void* src, size_t bytes, void* stream_handle) {
  const char* fn = "memcpy_async";
  auto stream = ResolveStream(fn, stream_handle);
  if (!stream) return 1;
  if (CheckCopyable(fn, "dst", dst, bytes) != 0 || CheckCopyable(fn, "src", src, bytes) != 0) return 1;
  // Copied when the task runs, not now: a caller that reuses a host buffer before the
  // stream got there sees the consequence, as with a pinned buffer on a GPU.
  return stream->Submit(fn, [dst, src, bytes]() -> std::string {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return "";
  });
}

int Reduce(void* dst, const void* src, size_t n, int dtype, int op, void* stream_handle) {
  const char* fn = "reduce";
  auto stream = ResolveStream(fn, stream_handle);
  if (!stream) return 1;
  size_t bytes;
  if (CheckBytes(fn, n, dtype, &bytes) != 0) return 1;
  if (op < kSum || op > kMax) return Fail("%s: unknown op %d", fn, op);
  const int device = stream->device();
  if (CheckDevice(fn, "dst", dst, bytes, device) != 0 || CheckDevice(fn, "src", src, bytes, device) != 0) return 1;
  return Launch(fn, [&] {
    return stream->Submit(fn, [=]() { return KernelResult(fn, hk::HostReduce(dst, src, n, dtype, op)); });
  });
}

int Divide(void* data, size_t n, int dtype, double divisor, void* stream_handle) {
  const char* fn = "divide";
  auto stream = ResolveStream(fn, stream_handle);
  if (!stream) return 1;
  size_t bytes;
  if (CheckBytes(fn, n, dtype, &bytes) != 0) return 1;
  if (!IsFloating(dtype)) return Fail("%s: %s is not a floating dtype", fn, DTypeName(dtype));
  if (CheckDevice(fn, "data", data, bytes, stream->device()) != 0) return 1;
  return Launch(fn, [&] {
    return stream->Submit(fn, [=]() { return KernelResult(fn, hk::HostDivide(data, n, dtype, divisor)); });
  });
}

int WeightedSum(void* out, const void* x, double self_weight, const void* const* in, const double* w, int k, size_t n,
                int dtype, void* stream_handle) {
  const char* fn = "weighted_sum";
  auto stream = ResolveStream(fn, stream_handle);
  if (!stream) return 1;
  size_t bytes;
  if (CheckBytes(fn, n, dtype, &bytes) != 0) return 1;
  if (k < 0 || k > STARLING_DEVICE_MAX_INPUTS) return Fail("%s: k = %d is outside 0..%d", fn, k, STARLING_DEVICE_MAX_INPUTS);
  if (k > 0 && (in == nullptr || w == nullptr)) return Fail("%s: in or w is NULL with k = %d", fn, k);
  const int device = stream->device();
  if (CheckDevice(fn, "out", out, bytes, device) != 0 || CheckDevice(fn, "x", x, bytes, device) != 0) return 1;
  for (int j = 0; j < k; ++j) {
    const std::string arg = Format("in[%d]", j);
    if (CheckDevice(fn, arg.c_str(), in[j], bytes, device) != 0) return 1;
  }
  // The ABI lets the caller reuse in[] and w[] as soon as we return: copy them now.
  std::vector<const void*> inputs(in, in + k);
  std::vector<double> weights(w, w + k);
  return Launch(fn, [&] {
    return stream->Submit(fn, [=, inputs = std::move(inputs), weights = std::move(weights)]() {
      return KernelResult(fn, hk::HostWeightedSum(out, x, self_weight, inputs.data(), weights.data(), k, n, dtype));
    });
  });
}

int Convert(void* dst, int dst_dtype, const void* src, int src_dtype, size_t n, void* stream_handle) {
  const char* fn = "convert";
  auto stream = ResolveStream(fn, stream_handle);
  if (!stream) return 1;
  size_t dst_bytes, src_bytes;
  if (CheckBytes(fn, n, dst_dtype, &dst_bytes) != 0 || CheckBytes(fn, n, src_dtype, &src_bytes) != 0) return 1;
  const bool half_float = (src_dtype == kFloat16 || src_dtype == kBFloat16) && dst_dtype == kFloat32;
  const bool float_half = src_dtype == kFloat32 && (dst_dtype == kFloat16 || dst_dtype == kBFloat16);
  const bool ints = (src_dtype == kInt16 && dst_dtype == kInt32) || (src_dtype == kInt32 && dst_dtype == kInt16);
  if (!(half_float || float_half || ints || src_dtype == dst_dtype))
    return Fail("%s: no conversion from %s to %s", fn, DTypeName(src_dtype), DTypeName(dst_dtype));
  const int device = stream->device();
  if (CheckDevice(fn, "dst", dst, dst_bytes, device) != 0 || CheckDevice(fn, "src", src, src_bytes, device) != 0)
    return 1;
  return Launch(fn, [&] {
    return stream->Submit(fn, [=]() { return KernelResult(fn, hk::HostConvert(dst, dst_dtype, src, src_dtype, n)); });
  });
}

}  // namespace starling::emu
