// The plugin's kernels: dispatch.h picks the element functor of elementwise.h (the code
// the host and the emulated device run too), and one grid-stride kernel template runs
// it. Every launch is asynchronous on the caller's stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "impl/device/cuda/errors.h"
#include "impl/device/cuda/plugin.h"
#include "impl/device/kernels/dispatch.h"
#include "impl/device/runtime_status.h"

namespace starling::device::cuda {
namespace {

namespace kern = starling::device::kernels;

// fn(i) for every i < n. fn arrives by value as a kernel parameter (weighted_sum's in[]
// and w[] included: about 550 bytes of the 4 KiB allowed), so nothing is copied to the
// device before the launch and the host arrays may be reused as soon as we return.
template <class Fn>
__global__ void Elementwise(Fn fn, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) fn(i);
}

// weighted_sum in 16-byte packs (WeightedSumFn::Packed), then the last elements that fill
// no pack (fewer than a pack's count: block 0's first threads) one by one.
template <class Codec>
__global__ void WeightedSumPacked(kern::WeightedSumFn<Codec> fn, size_t packs, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (size_t p = first; p < packs; p += stride) fn.Packed(p);
  const size_t rest = packs * kern::Pack16<typename Codec::Storage>::kCount + first;
  if (rest < n) fn(rest);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

constexpr unsigned kThreads = 256;
// Enough blocks to fill any current GPU several times over (an H100 holds 132 SMs x 8
// blocks of 256); larger tensors loop. Keeps the launch independent of the device.
constexpr size_t kMaxBlocks = 8192;

// The launcher dispatch.h calls: one kernel launch on `stream`.
struct Launch {
  cudaStream_t stream;
  const char* what;
  template <class Fn>
  int operator()(const Fn& fn, size_t n) const { return OneByOne(fn, n); }
  // weighted_sum: in 16-byte packs where every pointer allows (the neighbor combine, the
  // most bytes any kernel here moves).
  template <class Codec>
  int operator()(const kern::WeightedSumFn<Codec>& fn, size_t n) const {
    const size_t packs = n / kern::Pack16<typename Codec::Storage>::kCount;
    bool aligned = Aligned16(fn.out) && Aligned16(fn.x);
    for (int j = 0; j < fn.k; ++j) aligned = aligned && Aligned16(fn.in[j]);
    if (!aligned || packs == 0) return OneByOne(fn, n);
    return Run(packs, [&](unsigned blocks) { WeightedSumPacked<<<blocks, kThreads, 0, stream>>>(fn, packs, n); });
  }

 private:
  template <class Fn>
  int OneByOne(const Fn& fn, size_t n) const {
    return Run(n, [&](unsigned blocks) { Elementwise<<<blocks, kThreads, 0, stream>>>(fn, n); });
  }
  // launch(blocks) with enough blocks for `items` threads' worth of work, at most kMaxBlocks.
  template <class Launcher>
  int Run(size_t items, const Launcher& launch) const {
    const auto blocks = static_cast<unsigned>(std::min(kMaxBlocks, (items + kThreads - 1) / kThreads));
    // <<<>>> reports only through the per-thread last-error slot: cleared first, so that
    // a code an earlier call left there is not taken for this launch's (runtime_status.h).
    const cudaError_t err = LaunchStatus([&] { launch(blocks); }, [] { return cudaGetLastError(); });
    if (err == cudaSuccess) return kern::kOk;
    Fail(std::string(what) + ": kernel launch: " + cudaGetErrorString(err));
    return kern::kLaunchFailed;
  }
};

// dispatch.h's status as the table's: launch failures already hold their message.
int Report(int status, const char* what, const std::string& args) {
  if (status == kern::kOk) return 0;
  if (status == kern::kLaunchFailed) return 1;
  return Fail(std::string(what) + ": " + kern::StatusMessage(status) + " (" + args + ")");
}

std::string Args(const char* name, int value) { return std::string(name) + " " + std::to_string(value); }

}  // namespace

int Reduce(void* dst, const void* src, size_t n, int dtype, int op, void* stream) {
  return OnStreamDevice(stream, [&] {
    const int status = kern::DispatchReduce(Launch{ToStream(stream), "reduce"}, dst, src, n, dtype, op);
    return Report(status, "reduce", Args("dtype", dtype) + ", " + Args("op", op));
  });
}

int Divide(void* data, size_t n, int dtype, double divisor, void* stream) {
  return OnStreamDevice(stream, [&] {
    const int status = kern::DispatchDivide(Launch{ToStream(stream), "divide"}, data, n, dtype, divisor);
    return Report(status, "divide", Args("dtype", dtype) + " (floating dtypes only)");
  });
}

int WeightedSum(void* out, const void* x, double self_weight, const void* const* in, const double* w, int k,
                size_t n, int dtype, void* stream) {
  return OnStreamDevice(stream, [&] {
    const int status =
        kern::DispatchWeightedSum(Launch{ToStream(stream), "weighted_sum"}, out, x, self_weight, in, w, k, n, dtype);
    return Report(status, "weighted_sum", Args("dtype", dtype) + ", " + Args("k", k));
  });
}

int Convert(void* dst, int dst_dtype, const void* src, int src_dtype, size_t n, void* stream) {
  return OnStreamDevice(stream, [&] {
    const int status = kern::DispatchConvert(Launch{ToStream(stream), "convert"}, dst, dst_dtype, src, src_dtype, n);
    return Report(status, "convert", Args("from dtype", src_dtype) + " " + Args("to dtype", dst_dtype));
  });
}

}  // namespace starling::device::cuda
