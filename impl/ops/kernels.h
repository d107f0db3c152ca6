// Internal building blocks of impl/ops/reduce.cc: element-wise operators, block
// kernels, codecs (widening a storage type to its compute type and back) and the
// blocked implementations of the public operations. Internal to impl/ops.
//
// Everything is STARLING_INLINE so that reduce.cc can instantiate the same code twice:
// for the baseline x86-64 target (SSE2) and inside target("avx2,f16c") functions,
// where GCC auto-vectorizes the very same loops with 256-bit vectors. The loops are
// plain and branch-free over __restrict pointers; the results do not depend on the
// vector width (element-wise IEEE operations, no reassociation, no FMA).
//
// Multi-input operations run block by block (kBlock elements) so that the output
// block stays in L1 while each input is folded in: one pass over memory per operand.
// 16-bit floats (and integers in the weighted operations) are widened block-wise into
// a stack buffer of the compute type, combined there, and narrowed back once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "impl/common/half.h"
#include "impl/ops/convert.h"

#define STARLING_INLINE inline __attribute__((always_inline))

namespace starling::ops::kernels {

// Elements per block: the blocks of all operands stay in L1. Measured on 64 MiB
// tensors, 1024 beat 2048 and 4096 by 10-40% for float16/float32 (512 was on par).
constexpr size_t kBlock = 1024;

// ---- element-wise operators

template <typename T>
STARLING_INLINE bool IsNaN(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

struct SumOp {
  template <typename T>
  STARLING_INLINE static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // Wrap around without signed-overflow UB.
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

// The IsNaN(a) term makes a NaN win from either side (a < b is false for NaN b).
struct MinOp {
  template <typename T>
  STARLING_INLINE static T Apply(T a, T b) {
    return (a < b || IsNaN(a)) ? a : b;
  }
};

struct MaxOp {
  template <typename T>
  STARLING_INLINE static T Apply(T a, T b) {
    return (b < a || IsNaN(a)) ? a : b;
  }
};

// ---- binary kernels, one per aliasing pattern so that __restrict stays true

template <class Op, typename T>
STARLING_INLINE void Combine(T* __restrict out, const T* __restrict a, const T* __restrict b,
                             size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], b[i]);
}

template <class Op, typename T>
STARLING_INLINE void CombineIntoA(T* __restrict a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = Op::Apply(a[i], b[i]);
}

template <class Op, typename T>
STARLING_INLINE void CombineIntoB(const T* __restrict a, T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) b[i] = Op::Apply(a[i], b[i]);
}

template <class Op, typename T>
STARLING_INLINE void CombineSelf(T* __restrict a, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = Op::Apply(a[i], a[i]);
}

// ---- block kernels on the compute type C (float or double)

template <typename C>
STARLING_INLINE void ScaleTo(C* __restrict out, const C* __restrict x, C s, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = s * x[i];
}

template <typename C>
STARLING_INLINE void ScaleInPlace(C* __restrict out, C s, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = s * out[i];
}

template <typename C>
STARLING_INLINE void AddScaled(C* __restrict out, const C* __restrict x, C w, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] += w * x[i];
}

template <typename C>
STARLING_INLINE void AddTo(C* __restrict out, const C* __restrict x, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] += x[i];
}

template <typename C>
STARLING_INLINE void DivideInPlace(C* __restrict out, C d, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = out[i] / d;
}

// 1/d if d is a power of two with a normal reciprocal, else 0. Then x / d and x * (1/d)
// are the same real number correctly rounded: the same bits (a subnormal reciprocal
// would not survive flush-to-zero modes, hence "normal"), and a multiply is several
// times cheaper than a divide. Any other divisor is divided by.
template <typename C>
C ExactInverse(C d) {
  int exp;
  const C mantissa = std::frexp(d, &exp);
  const C inverse = C(1) / d;
  return std::fabs(mantissa) == C(0.5) && std::isnormal(inverse) ? inverse : C(0);
}

template <typename C>
STARLING_INLINE void DivideBlock(C* out, C d, C inverse, size_t n) {
  if (inverse != 0) {
    ScaleInPlace(out, inverse, n);
  } else {
    DivideInPlace(out, d, n);
  }
}

// ---- codecs: widen a storage type into its compute type and narrow back.
// Interface (src is storage, dst/acc compute, n elements):
//   Load(src, dst, n)            dst = widen(src)
//   LoadScaled(src, s, dst, n)   dst = s * widen(src)
//   AddScaled(src, w, acc, n)    acc += w * widen(src)
//   Add(src, acc, n)             acc += widen(src)
//   Store(src, dst, n)           dst = narrow(src)
// The fused forms save a pass over a temporary buffer.

// The fused forms for codecs with an inline element-wise Widen (CRTP base).
template <class Codec>
struct Elementwise {
  template <typename S, typename C>
  STARLING_INLINE static void Load(const S* __restrict src, C* __restrict dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = Codec::Widen(src[i]);
  }
  template <typename S, typename C>
  STARLING_INLINE static void LoadScaled(const S* __restrict src, C s, C* __restrict dst,
                                         size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = s * Codec::Widen(src[i]);
  }
  template <typename S, typename C>
  STARLING_INLINE static void AddScaled(const S* __restrict src, C w, C* __restrict acc, size_t n) {
    for (size_t i = 0; i < n; ++i) acc[i] += w * Codec::Widen(src[i]);
  }
  template <typename S, typename C>
  STARLING_INLINE static void Add(const S* __restrict src, C* __restrict acc, size_t n) {
    for (size_t i = 0; i < n; ++i) acc[i] += Codec::Widen(src[i]);
  }
};

struct HalfCodec : Elementwise<HalfCodec> {  // portable bit manipulation (half.h)
  using Storage = uint16_t;
  using Compute = float;
  STARLING_INLINE static float Widen(uint16_t h) { return HalfToFloat(h); }
  STARLING_INLINE static void Store(const float* __restrict src, uint16_t* __restrict dst,
                                    size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
  }
};

struct BFloat16Codec : Elementwise<BFloat16Codec> {
  using Storage = uint16_t;
  using Compute = float;
  STARLING_INLINE static float Widen(uint16_t b) { return BFloat16ToFloat(b); }
  STARLING_INLINE static void Store(const float* __restrict src, uint16_t* __restrict dst,
                                    size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = FloatToBFloat16(src[i]);
  }
};

#if defined(__x86_64__) || defined(__i386__)
// Not always_inline: the generic templates that call these are compiled for the
// baseline target first, and GCC refuses to force AVX2 code into them.
#define STARLING_AVX2_FN __attribute__((target("avx2,f16c")))

// float16 through vcvtph2ps/vcvtps2ph (same bits as HalfCodec). GCC does not
// vectorize half conversions by itself, so the fused forms are written with
// intrinsics; only call from target("avx2,f16c") code, when detail::HasF16C().
struct HalfF16CCodec {
  using Storage = uint16_t;
  using Compute = float;
  static void Load(const uint16_t* src, float* dst, size_t n) {
    detail::HalfToFloatF16C(src, dst, n);
  }
  static void Store(const float* src, uint16_t* dst, size_t n) {
    detail::FloatToHalfF16C(src, dst, n);
  }
  STARLING_AVX2_FN static void LoadScaled(const uint16_t* src, float s, float* dst, size_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(vs, Widen8(src + i)));
    for (; i < n; ++i) dst[i] = s * HalfToFloat(src[i]);
  }
  STARLING_AVX2_FN static void AddScaled(const uint16_t* src, float w, float* acc, size_t n) {
    const __m256 vw = _mm256_set1_ps(w);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 sum =
          _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_mul_ps(vw, Widen8(src + i)));
      _mm256_storeu_ps(acc + i, sum);
    }
    for (; i < n; ++i) acc[i] += w * HalfToFloat(src[i]);
  }
  STARLING_AVX2_FN static void Add(const uint16_t* src, float* acc, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), Widen8(src + i)));
    }
    for (; i < n; ++i) acc[i] += HalfToFloat(src[i]);
  }

 private:
  STARLING_AVX2_FN static __m256 Widen8(const uint16_t* src) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  }
};
#else
using HalfF16CCodec = HalfCodec;  // no F16C off x86
#endif

// The value, unknown to the optimizer. Used for clamp bounds: with constant bounds GCC
// threads the clamp branches (the clamped value is then known) and the loop no longer
// if-converts, so it does not vectorize.
template <typename T>
STARLING_INLINE T Opaque(T v) {
  volatile T hidden = v;
  return hidden;
}

// 0.5 - 2^-54, the largest double below 0.5. v + copysign(kJustBelowHalf, v),
// truncated, rounds |v| < 2^52 to nearest with ties away from zero: a tie lands on
// (or rounds up to) the next integer, anything below a tie stays below it. From 2^52
// on every double is an integer and the addition rounds back to v.
constexpr double kJustBelowHalf = 0.49999999999999994;

// std::llround semantics plus saturation to [lo, hi] and NaN -> 0, for results that
// fit int32. Branch-free: maxpd/minpd/cvttpd2dq.
STARLING_INLINE int32_t RoundClampToInt32(double v, double lo, double hi) {
  v = v == v ? v : 0.0;
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return static_cast<int32_t>(v + std::copysign(kJustBelowHalf, v));
}

STARLING_INLINE int64_t RoundSaturateToInt64(double v) {
  if (v != v) return 0;
  if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (v <= -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v + std::copysign(kJustBelowHalf, v));
}

// Integers in the weighted operations: computed in double, rounded and saturated.
template <typename T>
struct IntCodec : Elementwise<IntCodec<T>> {
  using Storage = T;
  using Compute = double;
  STARLING_INLINE static double Widen(T v) { return static_cast<double>(v); }
  STARLING_INLINE static void Store(const double* __restrict src, T* __restrict dst, size_t n) {
    if constexpr (sizeof(T) <= 4) {
      const double lo = Opaque(static_cast<double>(std::numeric_limits<T>::min()));
      const double hi = Opaque(static_cast<double>(std::numeric_limits<T>::max()));
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(RoundClampToInt32(src[i], lo, hi));
    } else {
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(RoundSaturateToInt64(src[i]));
    }
  }
};

// ---- Reduce: out = op(a, b); out may be a and/or b

template <class Op, typename T>
STARLING_INLINE void CombineNative(T* out, const T* a, const T* b, size_t n) {
  if (out == a && out == b) {
    CombineSelf<Op>(out, n);
  } else if (out == a) {
    CombineIntoA<Op>(out, b, n);
  } else if (out == b) {
    CombineIntoB<Op>(a, out, n);
  } else {
    Combine<Op>(out, a, b, n);
  }
}

template <class Op, class Codec>
STARLING_INLINE void CombineWidened(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n) {
  float fa[kBlock], fb[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    Codec::Load(a + i, fa, m);
    Codec::Load(b + i, fb, m);
    CombineIntoA<Op>(fa, fb, m);
    Codec::Store(fa, out + i, m);  // after both loads: out may be a or b
  }
}

// ---- Divide: data /= divisor

template <typename T>
STARLING_INLINE void DivideNative(T* data, T divisor, size_t n) {
  DivideBlock(data, divisor, ExactInverse(divisor), n);
}

template <class Codec>
STARLING_INLINE void DivideWidened(uint16_t* data, double divisor, size_t n) {
  const float d = static_cast<float>(divisor);
  const float inverse = ExactInverse(d);
  float buf[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    Codec::Load(data + i, buf, m);
    DivideBlock(buf, d, inverse, m);
    Codec::Store(buf, data + i, m);
  }
}

// ---- WeightedSum: out = self_weight * x + sum_j w[j] * in[j]; out may be x

// Few inputs (the usual in-degrees 1-3): one fused pass, with the same operations in
// the same order as the blocked loops, so the same bits. The blocked loops move each
// block through L1 up to k + 2 times; at 256 KiB - 1 MiB of float32 with one input the
// fused pass took 8.8 us against 14 us (1.6x) and 90 against 117 us.
template <typename T, int K>
STARLING_INLINE void WeightedSumFused(T* out, const T* x, T sw, const void* const* in, const double* w,
                                      size_t n) {
  const T* __restrict r0 = static_cast<const T*>(in[0]);
  const T* __restrict r1 = static_cast<const T*>(in[K > 1 ? 1 : 0]);
  const T* __restrict r2 = static_cast<const T*>(in[K > 2 ? 2 : 0]);
  const T w0 = static_cast<T>(w[0]), w1 = static_cast<T>(w[K > 1 ? 1 : 0]), w2 = static_cast<T>(w[K > 2 ? 2 : 0]);
  for (size_t i = 0; i < n; ++i) {
    T t = sw * x[i];
    t = t + w0 * r0[i];
    if constexpr (K > 1) t = t + w1 * r1[i];
    if constexpr (K > 2) t = t + w2 * r2[i];
    out[i] = t;
  }
}

template <typename T>
STARLING_INLINE void WeightedSumNative(T* out, const T* x, double self_weight,
                                       const void* const* in, const double* w, int k, size_t n) {
  const T sw = static_cast<T>(self_weight);
  if constexpr (std::is_floating_point_v<T>) {
    switch (k) {
      case 1: return WeightedSumFused<T, 1>(out, x, sw, in, w, n);
      case 2: return WeightedSumFused<T, 2>(out, x, sw, in, w, n);
      case 3: return WeightedSumFused<T, 3>(out, x, sw, in, w, n);
      default: break;
    }
  }
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    T* o = out + i;
    if (out != x) {
      ScaleTo(o, x + i, sw, m);
    } else if (sw != T(1)) {  // x * 1 == x: skip the pass
      ScaleInPlace(o, sw, m);
    }
    for (int j = 0; j < k; ++j) {
      AddScaled(o, static_cast<const T*>(in[j]) + i, static_cast<T>(w[j]), m);
    }
  }
}

template <class Codec>
STARLING_INLINE void WeightedSumWidened(typename Codec::Storage* out,
                                        const typename Codec::Storage* x, double self_weight,
                                        const void* const* in, const double* w, int k, size_t n) {
  using S = typename Codec::Storage;
  using C = typename Codec::Compute;
  const C sw = static_cast<C>(self_weight);
  C acc[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    if (sw != C(1)) {
      Codec::LoadScaled(x + i, sw, acc, m);
    } else {  // x * 1 == x
      Codec::Load(x + i, acc, m);
    }
    for (int j = 0; j < k; ++j) {
      Codec::AddScaled(static_cast<const S*>(in[j]) + i, static_cast<C>(w[j]), acc, m);
    }
    Codec::Store(acc, out + i, m);  // after all loads: out may be x
  }
}

// ---- UniformAverage: out = (x + in[0] + ... + in[k-1]) / (k + 1); out may be x

// One fused pass for few inputs (see WeightedSumFused): the sum in the blocked loops'
// order, then the multiply by an exact inverse or the divide.
template <typename T, int K, bool kMultiply>
STARLING_INLINE void UniformAverageFused(T* out, const T* x, const void* const* in, T f, size_t n) {
  const T* __restrict r0 = static_cast<const T*>(in[0]);
  const T* __restrict r1 = static_cast<const T*>(in[K > 1 ? 1 : 0]);
  const T* __restrict r2 = static_cast<const T*>(in[K > 2 ? 2 : 0]);
  for (size_t i = 0; i < n; ++i) {
    T s = x[i] + r0[i];
    if constexpr (K > 1) s = s + r1[i];
    if constexpr (K > 2) s = s + r2[i];
    out[i] = kMultiply ? s * f : s / f;
  }
}

template <typename T, int K>
STARLING_INLINE void UniformAverageFused(T* out, const T* x, const void* const* in, T divisor, T inverse,
                                         size_t n) {
  if (inverse != 0) {
    UniformAverageFused<T, K, true>(out, x, in, inverse, n);
  } else {
    UniformAverageFused<T, K, false>(out, x, in, divisor, n);
  }
}

template <typename T>
STARLING_INLINE void UniformAverageNative(T* out, const T* x, const void* const* in, int k,
                                          size_t n) {
  const T divisor = static_cast<T>(k + 1);
  const T inverse = ExactInverse(divisor);
  if constexpr (std::is_floating_point_v<T>) {
    switch (k) {
      case 1: return UniformAverageFused<T, 1>(out, x, in, divisor, inverse, n);
      case 2: return UniformAverageFused<T, 2>(out, x, in, divisor, inverse, n);
      case 3: return UniformAverageFused<T, 3>(out, x, in, divisor, inverse, n);
      default: break;
    }
  }
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    T* o = out + i;
    if (out != x) std::memcpy(o, x + i, m * sizeof(T));
    for (int j = 0; j < k; ++j) AddTo(o, static_cast<const T*>(in[j]) + i, m);
    if (k > 0) DivideBlock(o, divisor, inverse, m);
  }
}

template <class Codec>
STARLING_INLINE void UniformAverageWidened(typename Codec::Storage* out,
                                           const typename Codec::Storage* x, const void* const* in,
                                           int k, size_t n) {
  using S = typename Codec::Storage;
  using C = typename Codec::Compute;
  const C divisor = static_cast<C>(k + 1);
  const C inverse = ExactInverse(divisor);
  C acc[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    Codec::Load(x + i, acc, m);
    for (int j = 0; j < k; ++j) Codec::Add(static_cast<const S*>(in[j]) + i, acc, m);
    DivideBlock(acc, divisor, inverse, m);
    Codec::Store(acc, out + i, m);
  }
}

__extension__ typedef __int128 Int128;

// Exact integer average: 128-bit sum, then a division rounded half away from zero.
template <typename T>
void UniformAverageExactInt(T* out, const T* x, const void* const* in, int k, size_t n) {
  constexpr size_t kIntBlock = 512;
  const Int128 d = static_cast<Int128>(k) + 1;
  Int128 acc[kIntBlock];
  for (size_t i = 0; i < n; i += kIntBlock) {
    const size_t m = std::min(kIntBlock, n - i);
    for (size_t e = 0; e < m; ++e) acc[e] = x[i + e];
    for (int j = 0; j < k; ++j) {
      const T* src = static_cast<const T*>(in[j]) + i;
      for (size_t e = 0; e < m; ++e) acc[e] += src[e];
    }
    for (size_t e = 0; e < m; ++e) {
      const Int128 s = acc[e];
      Int128 q = s / d;
      const Int128 r = s % d;  // same sign as s
      if (2 * (r < 0 ? -r : r) >= d) q += s < 0 ? -1 : 1;
      out[i + e] = static_cast<T>(q);  // a mean of T values is within T's range
    }
  }
}

template <typename T>
void UniformAverageInt(T* out, const T* x, const void* const* in, int k, size_t n) {
  // Up to 32-bit types with at most 2^20 terms, |sum| < 2^51: the double sum is exact,
  // and the correctly rounded double quotient lies on the same side of every
  // half-integer as the exact one (a non-tie is at least 1/(2(k+1)) away from it, far
  // more than the rounding error), so rounding it gives the exactly rounded mean.
  // This vectorizes, unlike 64-bit integer division.
  if (sizeof(T) <= 4 && k < (1 << 20)) {
    UniformAverageWidened<IntCodec<T>>(out, x, in, k, n);
  } else {
    UniformAverageExactInt(out, x, in, k, n);
  }
}

}  // namespace starling::ops::kernels
