#include "impl/ops/convert.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define STARLING_X86 1
#endif

#include "impl/common/half.h"

namespace starling::ops {
namespace detail {

// The portable loops vectorize with plain SSE2 (half.h is branch-free).
void HalfToFloatPortable(const uint16_t* __restrict src, float* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfPortable(const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

#ifdef STARLING_X86

namespace {
// CPUID rather than __builtin_cpu_supports("f16c"), which not every compiler knows.
bool DetectF16CAndAvx2() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  if (!(ecx & bit_OSXSAVE) || !(ecx & bit_AVX) || !(ecx & bit_F16C)) return false;
  // The OS must save the YMM registers: XCR0 bits 1 (SSE) and 2 (AVX).
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx & bit_AVX2) != 0;
}
}  // namespace

bool HasF16C() {
  static const bool has = DetectF16CAndAvx2();
  return has;
}

__attribute__((target("f16c,avx2"))) void HalfToFloatF16C(const uint16_t* src, float* dst,
                                                          size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  if (i < n) {  // tail through a small buffer so every element goes through F16C
    uint16_t h[8] = {};
    float f[8];
    std::memcpy(h, src + i, (n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
    std::memcpy(dst + i, f, (n - i) * sizeof(float));
  }
}

__attribute__((target("f16c,avx2"))) void FloatToHalfF16C(const float* src, uint16_t* dst,
                                                          size_t n) {
  // Immediate rounding mode: round to nearest even regardless of MXCSR.
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRound);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  if (i < n) {
    float f[8] = {};
    uint16_t h[8];
    std::memcpy(f, src + i, (n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(_mm256_loadu_ps(f), kRound));
    std::memcpy(dst + i, h, (n - i) * sizeof(uint16_t));
  }
}

#else  // not x86: no F16C; the portable code is the only implementation.

bool HasF16C() { return false; }
void HalfToFloatF16C(const uint16_t* src, float* dst, size_t n) {
  HalfToFloatPortable(src, dst, n);
}
void FloatToHalfF16C(const float* src, uint16_t* dst, size_t n) {
  FloatToHalfPortable(src, dst, n);
}

#endif

}  // namespace detail

void HalfToFloatN(const uint16_t* src, float* dst, size_t n) {
  if (detail::HasF16C()) {
    detail::HalfToFloatF16C(src, dst, n);
  } else {
    detail::HalfToFloatPortable(src, dst, n);
  }
}

void FloatToHalfN(const float* src, uint16_t* dst, size_t n) {
  if (detail::HasF16C()) {
    detail::FloatToHalfF16C(src, dst, n);
  } else {
    detail::FloatToHalfPortable(src, dst, n);
  }
}

void BFloat16ToFloatN(const uint16_t* __restrict src, float* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(src[i]);
}

void FloatToBFloat16N(const float* __restrict src, uint16_t* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToBFloat16(src[i]);
}

}  // namespace starling::ops
