// The element code of the device kernels (plugin_abi.h: reduce, divide, weighted_sum,
// convert), written once as __host__ __device__ functions: nvcc compiles it into the CUDA
// plugin's kernels, GCC into host_kernels.cc (the emulated device and the unit tests).
//
// Each operation is a small functor holding its pointers and scalars by value, with
// `operator()(size_t i)` computing element i. The host runs it in a plain loop, the GPU
// in a grid-stride loop; dispatch.h maps (dtype, op) to the functor.
//
// The arithmetic is that of impl/ops/reduce.h, operation for operation and operand for
// operand, so that results are the CPU kernels' bit for bit:
//  * float32/float64 compute in their own type; float16/bfloat16 widen to float32,
//    combine, and round back once (round to nearest even, half.h's NaN rules).
//  * weights: float for float32 and the 16-bit floats, double for float64 and integers;
//    the callers (dispatch.h) convert them once.
//  * integer sums wrap; weighted integer results are computed in double, rounded to
//    nearest with ties away from zero, saturated, NaN -> 0.
//  * min/max: a NaN on either side wins.
//
// No FMA contraction, no flush-to-zero, IEEE division:
//  * on the GPU every floating add/multiply/divide is an explicit __fadd_rn/__fmul_rn/
//    __fdiv_rn (double: __dadd_rn...): the _rn intrinsics are never contracted into an
//    FMA whatever -fmad says, and are correctly rounded. Subnormals need -ftz=false
//    (nvcc's default; checked below).
//  * on the host, compile with -ffp-contract=off, so that a -march with FMA cannot
//    contract a + w * x either: starling_device_kernels (CMakeLists.txt) does, and other
//    code including this header must too (or call host_kernels.h instead).
//  * NaN payloads: x86 SSE keeps the first NaN operand (quieted) and makes -NaN
//    (0xffc00000) from invalid operations (inf - inf); CUDA returns one canonical NaN
//    (0x7fffffff) from any of these. And GCC may swap the operands of a commutative
//    a + b, so even x86 code keeps either NaN of a two-NaN sum, depending on the loop
//    (impl/ops' AVX2 and baseline kernels differ there). Every floating operation here
//    therefore repairs a NaN result to x86's rule with the operands in source order
//    (NanLikeX86): host and GPU results are the same bits, NaNs included, and equal the
//    CPU kernels' except for which payload a two-NaN operation keeps.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define STARLING_HD __host__ __device__
#else
#define STARLING_HD
#endif

#if defined(__CUDACC_FTZ__) && __CUDACC_FTZ__
#error "impl/device/kernels needs -ftz=false: flushing subnormals changes results"
#endif

namespace starling::device::kernels {

// ---- bit casts

STARLING_HD inline uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

STARLING_HD inline float FloatFromBits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

STARLING_HD inline uint64_t DoubleBits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}

STARLING_HD inline double DoubleFromBits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// ---- x86's NaN results (see the header comment). r is the result computed for
// a op b; when it is a NaN, the x86 SSE result is the first NaN operand made quiet,
// or the default -NaN when neither operand was a NaN. Exposed so that the unit test
// can check the rule against the host's hardware. A NaN result is rare: the branches
// cost a compare per operation in memory-bound loops.

STARLING_HD inline float NanLikeX86(float r, float a, float b) {
  if (r == r) return r;
  if (a != a) return FloatFromBits(FloatBits(a) | 0x00400000u);
  if (b != b) return FloatFromBits(FloatBits(b) | 0x00400000u);
  return FloatFromBits(0xffc00000u);
}

STARLING_HD inline double NanLikeX86(double r, double a, double b) {
  if (r == r) return r;
  if (a != a) return DoubleFromBits(DoubleBits(a) | 0x0008000000000000ull);
  if (b != b) return DoubleFromBits(DoubleBits(b) | 0x0008000000000000ull);
  return DoubleFromBits(0xfff8000000000000ull);
}

// ---- arithmetic: correctly rounded, never contracted (header comment)

#if defined(__CUDA_ARCH__)
__device__ inline float Add(float a, float b) { return NanLikeX86(__fadd_rn(a, b), a, b); }
__device__ inline float Mul(float a, float b) { return NanLikeX86(__fmul_rn(a, b), a, b); }
__device__ inline float Div(float a, float b) { return NanLikeX86(__fdiv_rn(a, b), a, b); }
__device__ inline double Add(double a, double b) { return NanLikeX86(__dadd_rn(a, b), a, b); }
__device__ inline double Mul(double a, double b) { return NanLikeX86(__dmul_rn(a, b), a, b); }
__device__ inline double Div(double a, double b) { return NanLikeX86(__ddiv_rn(a, b), a, b); }
#else
inline float Add(float a, float b) { return NanLikeX86(a + b, a, b); }
inline float Mul(float a, float b) { return NanLikeX86(a * b, a, b); }
inline float Div(float a, float b) { return NanLikeX86(a / b, a, b); }
inline double Add(double a, double b) { return NanLikeX86(a + b, a, b); }
inline double Mul(double a, double b) { return NanLikeX86(a * b, a, b); }
inline double Div(double a, double b) { return NanLikeX86(a / b, a, b); }
#endif

// ---- 16-bit floats: impl/common/half.h's conversions, same formulas (integer bit
// manipulation plus one exact float multiply / one float add), so the same bits.

STARLING_HD inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7fffu;
  uint32_t m;
  if (mag >= 0x7c00u) {  // inf/NaN; NaNs made quiet like vcvtph2ps
    m = (mag << 13) | 0x7f800000u | (mag > 0x7c00u ? 0x00400000u : 0u);
  } else if (mag >= 0x0400u) {  // normal: rebias 15 -> 127
    m = (mag << 13) + ((127u - 15u) << 23);
  } else {  // zero/subnormal: mag * 2^-24, exact
    m = FloatBits(Mul(static_cast<float>(static_cast<int32_t>(mag)), 0x1p-24f));
  }
  return FloatFromBits(sign | m);
}

STARLING_HD inline uint16_t FloatToHalf(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  uint32_t m;
  if (a > 0x7f800000u) {  // NaN: quiet, top 10 payload bits
    m = 0x7e00u | ((a >> 13) & 0x3ffu);
  } else if (a >= 0x477ff000u) {  // from 65520 (the tie above 65504) on: infinity
    m = 0x7c00u;
  } else if (a >= 0x38800000u) {  // normal: rebias, drop 13 bits to nearest even
    m = (a - ((127u - 15u) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  } else {  // below 2^-14: + 0.5f rounds at the half subnormal step (2^-24)
    m = FloatBits(Add(FloatFromBits(a), 0.5f)) - FloatBits(0.5f);
  }
  return static_cast<uint16_t>(sign | m);
}

STARLING_HD inline float BFloat16ToFloat(uint16_t b) { return FloatFromBits(static_cast<uint32_t>(b) << 16); }

STARLING_HD inline uint16_t FloatToBFloat16(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- integers: round to nearest, ties away from zero, saturate, NaN -> 0
// (impl/ops/kernels.h: RoundClampToInt32 / RoundSaturateToInt64).

// 0.5 - 2^-54: v + copysign(this, v), truncated, rounds half away from zero.
constexpr double kJustBelowHalf = 0.49999999999999994;

STARLING_HD inline double CopySign(double magnitude, double sign) {
#if defined(__CUDA_ARCH__)
  return ::copysign(magnitude, sign);
#else
  return std::copysign(magnitude, sign);
#endif
}

STARLING_HD inline int32_t RoundClampToInt32(double v, double lo, double hi) {
  v = v == v ? v : 0.0;
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return static_cast<int32_t>(Add(v, CopySign(kJustBelowHalf, v)));
}

STARLING_HD inline int64_t RoundSaturateToInt64(double v) {
  if (v != v) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v <= -0x1p63) return INT64_MIN;
  return static_cast<int64_t>(Add(v, CopySign(kJustBelowHalf, v)));
}

// ---- codecs: a storage type, the type it computes in, and the conversions.

// Stored as computed: float32, float64, and integers where they do not widen (Reduce).
template <typename T>
struct Same {
  using Storage = T;
  using Compute = T;
  STARLING_HD static T Widen(T v) { return v; }
  STARLING_HD static T Narrow(T v) { return v; }
};

struct Half {
  using Storage = uint16_t;
  using Compute = float;
  STARLING_HD static float Widen(uint16_t v) { return HalfToFloat(v); }
  STARLING_HD static uint16_t Narrow(float v) { return FloatToHalf(v); }
};

struct BFloat16 {
  using Storage = uint16_t;
  using Compute = float;
  STARLING_HD static float Widen(uint16_t v) { return BFloat16ToFloat(v); }
  STARLING_HD static uint16_t Narrow(float v) { return FloatToBFloat16(v); }
};

// Integers in weighted sums: computed in double, stored rounded and saturated.
template <typename T>
struct Rounded {
  using Storage = T;
  using Compute = double;
  // The range as doubles; exact for every width (int64's bounds are handled apart).
  static constexpr bool kSigned = static_cast<T>(-1) < static_cast<T>(0);
  static constexpr double kLo = kSigned ? -static_cast<double>(1ull << (8 * sizeof(T) - 1)) : 0.0;
  static constexpr double kHi =
      static_cast<double>(kSigned ? (1ull << (8 * sizeof(T) - 1)) - 1 : (1ull << (8 * sizeof(T))) - 1);
  STARLING_HD static double Widen(T v) { return static_cast<double>(v); }
  STARLING_HD static T Narrow(double v) {
    if constexpr (sizeof(T) <= 4) {
      return static_cast<T>(RoundClampToInt32(v, kLo, kHi));
    } else {
      return static_cast<T>(RoundSaturateToInt64(v));
    }
  }
};

// ---- binary operators (impl/ops/kernels.h's SumOp/MinOp/MaxOp)

template <typename T>
STARLING_HD inline bool IsNaN(T v) {
  return v != v;  // always false for integers
}

struct SumOp {
  template <typename T>
  STARLING_HD static T Apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {  // wrap around without signed-overflow UB
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return Add(a, b);
    }
  }
};

struct MinOp {
  template <typename T>
  STARLING_HD static T Apply(T a, T b) {
    return (a < b || IsNaN(a)) ? a : b;
  }
};

struct MaxOp {
  template <typename T>
  STARLING_HD static T Apply(T a, T b) {
    return (b < a || IsNaN(a)) ? a : b;
  }
};

// ---- the kernels' element functors

// reduce: dst[i] = op(dst[i], src[i]); dst may be src.
template <class Codec, class Op>
struct ReduceFn {
  typename Codec::Storage* dst;
  const typename Codec::Storage* src;
  STARLING_HD void operator()(size_t i) const {
    dst[i] = Codec::Narrow(Op::Apply(Codec::Widen(dst[i]), Codec::Widen(src[i])));
  }
};

// divide: data[i] /= divisor, or *= inverse when that is exact (ExactInverse, nonzero).
template <class Codec>
struct DivideFn {
  using C = typename Codec::Compute;
  typename Codec::Storage* data;
  C divisor;
  C inverse;
  STARLING_HD void operator()(size_t i) const {
    const C v = Codec::Widen(data[i]);
    data[i] = Codec::Narrow(inverse != C(0) ? Mul(inverse, v) : Div(v, divisor));
  }
};

// At most this many inputs per weighted sum: STARLING_DEVICE_MAX_INPUTS (plugin_abi.h).
constexpr int kMaxInputs = 32;

// 16 bytes of elements, 16-byte aligned: one load or store instruction on the GPU.
template <typename S>
struct alignas(16) Pack16 {
  static constexpr int kCount = 16 / sizeof(S);
  S e[kCount];
};

// weighted_sum: out = sw * x + sum_{j<k} w[j] * in[j], in order; out may be x. Held by
// value (about 550 bytes) so the GPU gets in[] and w[] as kernel parameters.
template <class Codec>
struct WeightedSumFn {
  using S = typename Codec::Storage;
  using C = typename Codec::Compute;
  S* out;
  const S* x;
  const S* in[kMaxInputs];
  C w[kMaxInputs];
  C sw;
  int k;
  bool scale;  // false where the CPU skips the multiplication by sw == 1 (dispatch.h)
  STARLING_HD void operator()(size_t i) const {
    C acc = Codec::Widen(x[i]);
    if (scale) acc = Mul(sw, acc);
    // The product first: where acc and w * in[j] are both NaN, most of the CPU's loops
    // keep the product's NaN (GCC's operand order for acc += w * x; not all do).
    for (int j = 0; j < k; ++j) acc = Add(Mul(w[j], Codec::Widen(in[j][i])), acc);
    out[i] = Codec::Narrow(acc);  // after every load of element i: out may be x
  }
  // The same for the elements of pack p (Pack16: elements p * kCount onwards), every
  // input read as one 16-byte word and every load before the store. Only where out, x
  // and each in[j] are 16-byte aligned (the CUDA plugin checks): one element per load
  // kept an H200 at 63% of its copy bandwidth: too few bytes in flight per thread.
  STARLING_HD void Packed(size_t p) const {
    using P = Pack16<S>;
    constexpr int kCount = P::kCount;
    P word = reinterpret_cast<const P*>(x)[p];
    C acc[kCount];
    for (int v = 0; v < kCount; ++v) acc[v] = scale ? Mul(sw, Codec::Widen(word.e[v])) : Codec::Widen(word.e[v]);
    for (int j = 0; j < k; ++j) {
      word = reinterpret_cast<const P*>(in[j])[p];
      for (int v = 0; v < kCount; ++v) acc[v] = Add(Mul(w[j], Codec::Widen(word.e[v])), acc[v]);
    }
    for (int v = 0; v < kCount; ++v) word.e[v] = Codec::Narrow(acc[v]);
    reinterpret_cast<P*>(out)[p] = word;
  }
};

// convert: dst[i] = To(From(src[i])) through a conversion function object.
template <typename D, typename S, class Conversion>
struct ConvertFn {
  D* dst;
  const S* src;
  STARLING_HD void operator()(size_t i) const { dst[i] = Conversion::Apply(src[i]); }
};

struct HalfToFloatConv {
  STARLING_HD static float Apply(uint16_t v) { return HalfToFloat(v); }
};
struct FloatToHalfConv {
  STARLING_HD static uint16_t Apply(float v) { return FloatToHalf(v); }
};
struct BFloat16ToFloatConv {
  STARLING_HD static float Apply(uint16_t v) { return BFloat16ToFloat(v); }
};
struct FloatToBFloat16Conv {
  STARLING_HD static uint16_t Apply(float v) { return FloatToBFloat16(v); }
};
// int16 <-> int32 and equal dtypes (copied as unsigned bits: a float copy must not
// quiet a signaling NaN). Narrowing wraps (two's complement), as a cast does.
template <typename D>
struct CastConv {
  template <typename S>
  STARLING_HD static D Apply(S v) {
    return static_cast<D>(v);
  }
};

}  // namespace starling::device::kernels
