#include "impl/ops/reduce.h"

#include <atomic>
#include <cstdint>

#include "impl/common/error.h"
#include "impl/ops/convert.h"
#include "impl/ops/kernels.h"

// Each public function checks its arguments, then switches once on dtype (and op) to a
// kernel instantiation from kernels.h. Most have a second instantiation compiled for
// AVX2 (+F16C for float16), chosen at run time: the same element-wise operations, so
// the same bits, only wider vectors. The integer average keeps its baseline code.

namespace starling::ops {
namespace {

using namespace kernels;  // NOLINT: this file is the only user of kernels.h

#if defined(__x86_64__) || defined(__i386__)
#define STARLING_AVX2 __attribute__((target("avx2,f16c")))
#else
#define STARLING_AVX2
#endif

std::atomic<bool> g_avx2_enabled{true};

// True when the AVX2 instantiations may run (x86 with AVX2 and F16C).
bool UseAvx2() { return detail::HasF16C() && g_avx2_enabled.load(std::memory_order_relaxed); }

// ---- AVX2 instantiations: the kernels inline into these and vectorize 256 bits wide.

template <class Op, typename T>
STARLING_AVX2 void CombineNativeAvx2(T* out, const T* a, const T* b, size_t n) {
  CombineNative<Op>(out, a, b, n);
}
template <class Op, class Codec>
STARLING_AVX2 void CombineWidenedAvx2(uint16_t* out, const uint16_t* a, const uint16_t* b,
                                      size_t n) {
  CombineWidened<Op, Codec>(out, a, b, n);
}
template <typename T>
STARLING_AVX2 void DivideNativeAvx2(T* data, T divisor, size_t n) {
  DivideNative(data, divisor, n);
}
template <class Codec>
STARLING_AVX2 void DivideWidenedAvx2(uint16_t* data, double divisor, size_t n) {
  DivideWidened<Codec>(data, divisor, n);
}
template <typename T>
STARLING_AVX2 void WeightedSumNativeAvx2(T* out, const T* x, double sw, const void* const* in,
                                         const double* w, int k, size_t n) {
  WeightedSumNative(out, x, sw, in, w, k, n);
}
template <class Codec, typename S>
STARLING_AVX2 void WeightedSumWidenedAvx2(S* out, const S* x, double sw, const void* const* in,
                                          const double* w, int k, size_t n) {
  WeightedSumWidened<Codec>(out, x, sw, in, w, k, n);
}
template <typename T>
STARLING_AVX2 void UniformAverageNativeAvx2(T* out, const T* x, const void* const* in, int k,
                                            size_t n) {
  UniformAverageNative(out, x, in, k, n);
}
template <class Codec, typename S>
STARLING_AVX2 void UniformAverageWidenedAvx2(S* out, const S* x, const void* const* in, int k,
                                             size_t n) {
  UniformAverageWidened<Codec>(out, x, in, k, n);
}

// ---- typed entry points: cast the buffers, pick the AVX2 or the baseline instantiation.
// 16-bit floats take two codecs: the baseline one and the one for AVX2 code.

template <class Op, typename T>
void CombineTyped(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  UseAvx2() ? CombineNativeAvx2<Op>(o, x, y, n) : CombineNative<Op>(o, x, y, n);
}

template <class Op, class Codec, class Avx2Codec>
void Combine16(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<uint16_t*>(out);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  UseAvx2() ? CombineWidenedAvx2<Op, Avx2Codec>(o, x, y, n) : CombineWidened<Op, Codec>(o, x, y, n);
}

template <class Op>
void CombineDispatch(void* out, const void* a, const void* b, size_t n, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return Combine16<Op, HalfCodec, HalfF16CCodec>(out, a, b, n);
    case DType::kBFloat16: return Combine16<Op, BFloat16Codec, BFloat16Codec>(out, a, b, n);
    case DType::kFloat32: return CombineTyped<Op, float>(out, a, b, n);
    case DType::kFloat64: return CombineTyped<Op, double>(out, a, b, n);
    case DType::kInt8: return CombineTyped<Op, int8_t>(out, a, b, n);
    case DType::kInt16: return CombineTyped<Op, int16_t>(out, a, b, n);
    case DType::kInt32: return CombineTyped<Op, int32_t>(out, a, b, n);
    case DType::kInt64: return CombineTyped<Op, int64_t>(out, a, b, n);
    case DType::kUInt8: return CombineTyped<Op, uint8_t>(out, a, b, n);
  }
  Fail(Code::kInvalidArgument, "reduce: unsupported dtype ", static_cast<int>(dtype));
}

template <typename T>
void DivideTyped(void* data, double divisor, size_t n) {
  auto* p = static_cast<T*>(data);
  const auto d = static_cast<T>(divisor);  // float32: as NumPy, x / float32(size)
  UseAvx2() ? DivideNativeAvx2(p, d, n) : DivideNative(p, d, n);
}

template <class Codec, class Avx2Codec>
void Divide16(void* data, double divisor, size_t n) {
  auto* p = static_cast<uint16_t*>(data);
  UseAvx2() ? DivideWidenedAvx2<Avx2Codec>(p, divisor, n) : DivideWidened<Codec>(p, divisor, n);
}

template <typename T>
void WeightedSumTyped(void* out, const void* x, double sw, const void* const* in, const double* w,
                      int k, size_t n) {
  auto* o = static_cast<T*>(out);
  auto* xt = static_cast<const T*>(x);
  UseAvx2() ? WeightedSumNativeAvx2(o, xt, sw, in, w, k, n)
            : WeightedSumNative(o, xt, sw, in, w, k, n);
}

// Integers (IntCodec) and 16-bit floats.
template <class Codec, class Avx2Codec = Codec>
void WeightedSumWidenedTyped(void* out, const void* x, double sw, const void* const* in,
                             const double* w, int k, size_t n) {
  using S = typename Codec::Storage;
  auto* o = static_cast<S*>(out);
  auto* xs = static_cast<const S*>(x);
  UseAvx2() ? WeightedSumWidenedAvx2<Avx2Codec>(o, xs, sw, in, w, k, n)
            : WeightedSumWidened<Codec>(o, xs, sw, in, w, k, n);
}

template <typename T>
void UniformAverageTyped(void* out, const void* x, const void* const* in, int k, size_t n) {
  auto* o = static_cast<T*>(out);
  auto* xt = static_cast<const T*>(x);
  UseAvx2() ? UniformAverageNativeAvx2(o, xt, in, k, n) : UniformAverageNative(o, xt, in, k, n);
}

template <class Codec, class Avx2Codec>
void UniformAverage16(void* out, const void* x, const void* const* in, int k, size_t n) {
  auto* o = static_cast<uint16_t*>(out);
  auto* xs = static_cast<const uint16_t*>(x);
  UseAvx2() ? UniformAverageWidenedAvx2<Avx2Codec>(o, xs, in, k, n)
            : UniformAverageWidened<Codec>(o, xs, in, k, n);
}

template <typename T>
void UniformAverageIntTyped(void* out, const void* x, const void* const* in, int k, size_t n) {
  UniformAverageInt(static_cast<T*>(out), static_cast<const T*>(x), in, k, n);
}

// ---- argument checks (per call, never per element)

bool Overlap(const void* p, const void* q, size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto b = reinterpret_cast<uintptr_t>(q);
  return a < b + bytes && b < a + bytes;
}

void CheckPartialOverlap(const void* out, const void* in, size_t bytes, const char* what) {
  STARLING_CHECK_ARG(out == in || !Overlap(out, in, bytes), what,
                     ": out partially overlaps an input");
}

void CheckInputs(const char* what, const void* out, const void* x, const void* const* in, int k,
                 size_t n, DType dtype) {
  STARLING_CHECK_ARG(k >= 0, what, ": negative input count ", k);
  if (n == 0) return;
  STARLING_CHECK_ARG(out != nullptr && x != nullptr, what, ": null buffer");
  STARLING_CHECK_ARG(k == 0 || in != nullptr, what, ": null input list");
  const size_t bytes = n * DTypeSize(dtype);
  CheckPartialOverlap(out, x, bytes, what);
  for (int j = 0; j < k; ++j) {
    STARLING_CHECK_ARG(in[j] != nullptr, what, ": input ", j, " is null");
    STARLING_CHECK_ARG(!Overlap(out, in[j], bytes), what, ": out overlaps input ", j);
  }
}

[[noreturn]] void UnsupportedDType(const char* what, DType dtype) {
  Fail(Code::kInvalidArgument, what, ": unsupported dtype ", static_cast<int>(dtype));
}

}  // namespace

void detail::SetAvx2Enabled(bool enabled) { g_avx2_enabled.store(enabled); }

void Reduce(void* dst, const void* src, size_t n, DType dtype, ReduceOp op) {
  Reduce3(dst, dst, src, n, dtype, op);
}

void Reduce3(void* out, const void* a, const void* b, size_t n, DType dtype, ReduceOp op) {
  if (n > 0) {
    STARLING_CHECK_ARG(out != nullptr && a != nullptr && b != nullptr, "reduce: null buffer");
    const size_t bytes = n * DTypeSize(dtype);
    CheckPartialOverlap(out, a, bytes, "reduce");
    CheckPartialOverlap(out, b, bytes, "reduce");
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return CombineDispatch<SumOp>(out, a, b, n, dtype);
    case ReduceOp::kMin: return CombineDispatch<MinOp>(out, a, b, n, dtype);
    case ReduceOp::kMax: return CombineDispatch<MaxOp>(out, a, b, n, dtype);
  }
  Fail(Code::kInvalidArgument, "reduce: unsupported op ", static_cast<int>(op));
}

void Divide(void* data, size_t n, DType dtype, double divisor) {
  STARLING_CHECK_ARG(n == 0 || data != nullptr, "divide: null buffer");
  switch (dtype) {
    case DType::kFloat16: return Divide16<HalfCodec, HalfF16CCodec>(data, divisor, n);
    case DType::kBFloat16: return Divide16<BFloat16Codec, BFloat16Codec>(data, divisor, n);
    case DType::kFloat32: return DivideTyped<float>(data, divisor, n);
    case DType::kFloat64: return DivideTyped<double>(data, divisor, n);
    default: UnsupportedDType("divide (floating dtypes only)", dtype);
  }
}

void WeightedSum(void* out, const void* x, double self_weight, const void* const* in,
                 const double* w, int k, size_t n, DType dtype) {
  CheckInputs("weighted sum", out, x, in, k, n, dtype);
  STARLING_CHECK_ARG(n == 0 || k == 0 || w != nullptr, "weighted sum: null weights");
  if (n == 0) return;
  const double sw = self_weight;
  switch (dtype) {
    case DType::kFloat16:
      return WeightedSumWidenedTyped<HalfCodec, HalfF16CCodec>(out, x, sw, in, w, k, n);
    case DType::kBFloat16: return WeightedSumWidenedTyped<BFloat16Codec>(out, x, sw, in, w, k, n);
    case DType::kFloat32: return WeightedSumTyped<float>(out, x, sw, in, w, k, n);
    case DType::kFloat64: return WeightedSumTyped<double>(out, x, sw, in, w, k, n);
    case DType::kInt8: return WeightedSumWidenedTyped<IntCodec<int8_t>>(out, x, sw, in, w, k, n);
    case DType::kInt16: return WeightedSumWidenedTyped<IntCodec<int16_t>>(out, x, sw, in, w, k, n);
    case DType::kInt32: return WeightedSumWidenedTyped<IntCodec<int32_t>>(out, x, sw, in, w, k, n);
    case DType::kInt64: return WeightedSumWidenedTyped<IntCodec<int64_t>>(out, x, sw, in, w, k, n);
    case DType::kUInt8: return WeightedSumWidenedTyped<IntCodec<uint8_t>>(out, x, sw, in, w, k, n);
  }
  UnsupportedDType("weighted sum", dtype);
}

void UniformAverage(void* out, const void* x, const void* const* in, int k, size_t n, DType dtype) {
  CheckInputs("uniform average", out, x, in, k, n, dtype);
  if (n == 0) return;
  switch (dtype) {
    case DType::kFloat16: return UniformAverage16<HalfCodec, HalfF16CCodec>(out, x, in, k, n);
    case DType::kBFloat16: return UniformAverage16<BFloat16Codec, BFloat16Codec>(out, x, in, k, n);
    case DType::kFloat32: return UniformAverageTyped<float>(out, x, in, k, n);
    case DType::kFloat64: return UniformAverageTyped<double>(out, x, in, k, n);
    case DType::kInt8: return UniformAverageIntTyped<int8_t>(out, x, in, k, n);
    case DType::kInt16: return UniformAverageIntTyped<int16_t>(out, x, in, k, n);
    case DType::kInt32: return UniformAverageIntTyped<int32_t>(out, x, in, k, n);
    case DType::kInt64: return UniformAverageIntTyped<int64_t>(out, x, in, k, n);
    case DType::kUInt8: return UniformAverageIntTyped<uint8_t>(out, x, in, k, n);
  }
  UnsupportedDType("uniform average", dtype);
}

void Scale(void* out, const void* x, double factor, size_t n, DType dtype) {
  WeightedSum(out, x, factor, nullptr, nullptr, 0, n, dtype);
}

void Axpy(void* out, const void* x, double factor, size_t n, DType dtype) {
  const void* in[1] = {x};
  WeightedSum(out, out, 1.0, in, &factor, 1, n, dtype);
}

}  // namespace starling::ops
