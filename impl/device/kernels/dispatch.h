// From the plugin ABI's kernel arguments (plugin_abi.h) to an element functor of
// elementwise.h: argument checks, the dtype/op switch, and the per-call scalars
// (float or double weights, the exact reciprocal of a divisor). Host code, shared by
// host_kernels.cc and the CUDA plugin so that both pick the very same functor.
//
// `launch(fn, n)` runs fn(i) for i < n and returns 0, or kLaunchFailed: a plain loop on
// the host, a kernel launch on a stream in the plugin. It is called only when n > 0.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "impl/device/kernels/elementwise.h"

namespace starling::device::kernels {

// starling::DType and starling::ReduceOp (impl/common/dtype.h), as the plugin ABI's
// ints; host_kernels.cc checks that they agree.
enum DTypeCode : int {
  kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2, kFloat64 = 3,
  kInt8 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7, kUInt8 = 8,
};
enum OpCode : int { kSum = 0, kAverage = 1, kMin = 2, kMax = 3 };

enum Status : int {
  kOk = 0,
  kBadDType = 1,
  kBadOp = 2,
  kBadCount = 3,
  kNullBuffer = 4,
  kBadConversion = 5,
  kLaunchFailed = 6,  // the launcher's own failure (it keeps the details)
};

inline const char* StatusMessage(int status) {
  switch (status) {
    case kOk: return "success";
    case kBadDType: return "unsupported dtype";
    case kBadOp: return "unsupported reduce op";
    case kBadCount: return "input count out of range (0..STARLING_DEVICE_MAX_INPUTS)";
    case kNullBuffer: return "null buffer";
    case kBadConversion: return "unsupported conversion";
    case kLaunchFailed: return "kernel launch failed";
  }
  return "unknown error";
}

// 1/d if d is a power of two with a normal reciprocal, else 0: then x * (1/d) and x / d
// are the same correctly rounded value (impl/ops/kernels.h's ExactInverse).
template <typename C>
C ExactInverse(C d) {
  int exp;
  const C mantissa = std::frexp(d, &exp);
  const C inverse = C(1) / d;
  return std::fabs(mantissa) == C(0.5) && std::isnormal(inverse) ? inverse : C(0);
}

namespace dispatch_detail {

template <class Codec, class Op, class Launch>
int Reduce(Launch& launch, void* dst, const void* src, size_t n) {
  using S = typename Codec::Storage;
  return launch(ReduceFn<Codec, Op>{static_cast<S*>(dst), static_cast<const S*>(src)}, n);
}

template <class Op, class Launch>
int ReduceDType(Launch& launch, void* dst, const void* src, size_t n, int dtype) {
  switch (dtype) {
    case kFloat16: return Reduce<Half, Op>(launch, dst, src, n);
    case kBFloat16: return Reduce<BFloat16, Op>(launch, dst, src, n);
    case kFloat32: return Reduce<Same<float>, Op>(launch, dst, src, n);
    case kFloat64: return Reduce<Same<double>, Op>(launch, dst, src, n);
    case kInt8: return Reduce<Same<int8_t>, Op>(launch, dst, src, n);
    case kInt16: return Reduce<Same<int16_t>, Op>(launch, dst, src, n);
    case kInt32: return Reduce<Same<int32_t>, Op>(launch, dst, src, n);
    case kInt64: return Reduce<Same<int64_t>, Op>(launch, dst, src, n);
    case kUInt8: return Reduce<Same<uint8_t>, Op>(launch, dst, src, n);
  }
  return kBadDType;
}

template <class Codec, class Launch>
int Divide(Launch& launch, void* data, size_t n, double divisor) {
  using C = typename Codec::Compute;
  const C d = static_cast<C>(divisor);  // float32: x / float(divisor), as NumPy
  DivideFn<Codec> fn{static_cast<typename Codec::Storage*>(data), d, ExactInverse(d)};
  return launch(fn, n);
}

// native: float32/float64 (stored as computed), where the CPU skips sw * x only when out
// is x and sw == 1; widened codecs skip it whenever sw == 1. (The same value either way;
// the bits differ only for a signaling NaN, which the multiplication quiets.)
template <class Codec, bool kNative, class Launch>
int WeightedSum(Launch& launch, void* out, const void* x, double sw, const void* const* in,
                const double* w, int k, size_t n) {
  using S = typename Codec::Storage;
  using C = typename Codec::Compute;
  WeightedSumFn<Codec> fn{};
  fn.out = static_cast<S*>(out);
  fn.x = static_cast<const S*>(x);
  for (int j = 0; j < k; ++j) {
    fn.in[j] = static_cast<const S*>(in[j]);
    fn.w[j] = static_cast<C>(w[j]);
  }
  fn.sw = static_cast<C>(sw);
  fn.k = k;
  fn.scale = kNative ? !(out == x && fn.sw == C(1)) : fn.sw != C(1);
  return launch(fn, n);
}

template <typename D, typename S, class Conversion, class Launch>
int Convert(Launch& launch, void* dst, const void* src, size_t n) {
  return launch(ConvertFn<D, S, Conversion>{static_cast<D*>(dst), static_cast<const S*>(src)}, n);
}

// A (dst, src) dtype pair as one switchable int.
constexpr int P(int dst_dtype, int src_dtype) { return dst_dtype * 16 + src_dtype; }

inline bool ValidDType(int dtype) { return dtype >= kFloat16 && dtype <= kUInt8; }

}  // namespace dispatch_detail

// reduce: dst[i] = op(dst[i], src[i]) (AVERAGE adds).
template <class Launch>
int DispatchReduce(Launch&& launch, void* dst, const void* src, size_t n, int dtype, int op) {
  using namespace dispatch_detail;
  if (!ValidDType(dtype)) return kBadDType;
  if (op < kSum || op > kMax) return kBadOp;
  if (n == 0) return kOk;
  if (dst == nullptr || src == nullptr) return kNullBuffer;
  switch (op) {
    case kSum:
    case kAverage: return ReduceDType<SumOp>(launch, dst, src, n, dtype);
    case kMin: return ReduceDType<MinOp>(launch, dst, src, n, dtype);
    default: return ReduceDType<MaxOp>(launch, dst, src, n, dtype);
  }
}

// divide: data[i] /= divisor, floating dtypes.
template <class Launch>
int DispatchDivide(Launch&& launch, void* data, size_t n, int dtype, double divisor) {
  using namespace dispatch_detail;
  if (dtype < kFloat16 || dtype > kFloat64) return kBadDType;
  if (n == 0) return kOk;
  if (data == nullptr) return kNullBuffer;
  switch (dtype) {
    case kFloat16: return Divide<Half>(launch, data, n, divisor);
    case kBFloat16: return Divide<BFloat16>(launch, data, n, divisor);
    case kFloat32: return Divide<Same<float>>(launch, data, n, divisor);
    default: return Divide<Same<double>>(launch, data, n, divisor);
  }
}

// weighted_sum: out = sw * x + sum_{j<k} w[j] * in[j]; out may be x; k <= kMaxInputs.
template <class Launch>
int DispatchWeightedSum(Launch&& launch, void* out, const void* x, double sw, const void* const* in,
                        const double* w, int k, size_t n, int dtype) {
  using namespace dispatch_detail;
  if (!ValidDType(dtype)) return kBadDType;
  if (k < 0 || k > kMaxInputs) return kBadCount;
  if (n == 0) return kOk;
  if (out == nullptr || x == nullptr || (k > 0 && (in == nullptr || w == nullptr))) return kNullBuffer;
  for (int j = 0; j < k; ++j) {
    if (in[j] == nullptr) return kNullBuffer;
  }
  switch (dtype) {
    case kFloat16: return WeightedSum<Half, false>(launch, out, x, sw, in, w, k, n);
    case kBFloat16: return WeightedSum<BFloat16, false>(launch, out, x, sw, in, w, k, n);
    case kFloat32: return WeightedSum<Same<float>, true>(launch, out, x, sw, in, w, k, n);
    case kFloat64: return WeightedSum<Same<double>, true>(launch, out, x, sw, in, w, k, n);
    case kInt8: return WeightedSum<Rounded<int8_t>, false>(launch, out, x, sw, in, w, k, n);
    case kInt16: return WeightedSum<Rounded<int16_t>, false>(launch, out, x, sw, in, w, k, n);
    case kInt32: return WeightedSum<Rounded<int32_t>, false>(launch, out, x, sw, in, w, k, n);
    case kInt64: return WeightedSum<Rounded<int64_t>, false>(launch, out, x, sw, in, w, k, n);
    default: return WeightedSum<Rounded<uint8_t>, false>(launch, out, x, sw, in, w, k, n);
  }
}

// convert: float16/bfloat16 <-> float32, int16 <-> int32, or equal dtypes (a bit copy).
template <class Launch>
int DispatchConvert(Launch&& launch, void* dst, int dst_dtype, const void* src, int src_dtype, size_t n) {
  using namespace dispatch_detail;
  if (!ValidDType(dst_dtype) || !ValidDType(src_dtype)) return kBadDType;
  const int pair = P(dst_dtype, src_dtype);
  constexpr int kSizes[] = {2, 2, 4, 8, 1, 2, 4, 8, 1};  // bytes per element, by dtype
  const bool supported = dst_dtype == src_dtype || pair == P(kFloat32, kFloat16) || pair == P(kFloat16, kFloat32) ||
                         pair == P(kFloat32, kBFloat16) || pair == P(kBFloat16, kFloat32) ||
                         pair == P(kInt32, kInt16) || pair == P(kInt16, kInt32);
  if (!supported) return kBadConversion;
  if (n == 0) return kOk;
  if (dst == nullptr || src == nullptr) return kNullBuffer;
  if (dst_dtype == src_dtype) {
    switch (kSizes[dst_dtype]) {
      case 1: return Convert<uint8_t, uint8_t, CastConv<uint8_t>>(launch, dst, src, n);
      case 2: return Convert<uint16_t, uint16_t, CastConv<uint16_t>>(launch, dst, src, n);
      case 4: return Convert<uint32_t, uint32_t, CastConv<uint32_t>>(launch, dst, src, n);
      default: return Convert<uint64_t, uint64_t, CastConv<uint64_t>>(launch, dst, src, n);
    }
  }
  switch (pair) {
    case P(kFloat32, kFloat16): return Convert<float, uint16_t, HalfToFloatConv>(launch, dst, src, n);
    case P(kFloat16, kFloat32): return Convert<uint16_t, float, FloatToHalfConv>(launch, dst, src, n);
    case P(kFloat32, kBFloat16): return Convert<float, uint16_t, BFloat16ToFloatConv>(launch, dst, src, n);
    case P(kBFloat16, kFloat32): return Convert<uint16_t, float, FloatToBFloat16Conv>(launch, dst, src, n);
    case P(kInt32, kInt16): return Convert<int32_t, int16_t, CastConv<int32_t>>(launch, dst, src, n);
    default: return Convert<int16_t, int32_t, CastConv<int16_t>>(launch, dst, src, n);
  }
}

}  // namespace starling::device::kernels
