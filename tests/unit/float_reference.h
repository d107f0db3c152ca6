// Reference float encodings for the unit tests, written independently of
// impl/common/half.h: values are decoded to double and re-encoded with a generic
// frexp/ldexp/nearbyint rounding, for any binary format (float16, bfloat16).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace starling::test {

// Rounds v (to nearest even) into a binary format with `mbits` stored mantissa bits
// and `ebits` exponent bits; returns its bit pattern. NaN -> canonical quiet NaN.
inline uint32_t RefEncode(double v, int mbits, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t sign = std::signbit(v) ? 1u << (mbits + ebits) : 0u;
  const uint32_t exp_all_ones = ((1u << ebits) - 1) << mbits;
  if (std::isnan(v)) return sign | exp_all_ones | (1u << (mbits - 1));
  const double a = std::fabs(v);
  if (a == 0) return sign;
  int e2;
  std::frexp(a, &e2);
  int e = std::max(e2 - 1, 1 - bias);                   // below the normal range: subnormal step
  double q = std::nearbyint(std::ldexp(a, mbits - e));  // significand, rounded
  if (q == std::ldexp(1.0, mbits + 1)) {                // rounded up to the next binade
    q /= 2;
    ++e;
  }
  if (std::isinf(a) || e > bias) return sign | exp_all_ones;
  const uint32_t iq = static_cast<uint32_t>(q);
  if (iq < (1u << mbits)) return sign | iq;  // subnormal
  return sign | static_cast<uint32_t>(e + bias) << mbits | (iq - (1u << mbits));
}

inline double RefDecode(uint32_t bits, int mbits, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const bool neg = (bits >> (mbits + ebits)) & 1;
  const int e = (bits >> mbits) & ((1 << ebits) - 1);
  const uint32_t m = bits & ((1u << mbits) - 1);
  double v;
  if (e == (1 << ebits) - 1) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  } else if (e == 0) {
    v = std::ldexp(m, 1 - bias - mbits);
  } else {
    v = std::ldexp(m + (1u << mbits), e - bias - mbits);
  }
  return neg ? -v : v;
}

inline uint16_t RefHalf(double v) { return static_cast<uint16_t>(RefEncode(v, 10, 5)); }
inline uint16_t RefBF16(double v) { return static_cast<uint16_t>(RefEncode(v, 7, 8)); }
inline double RefHalfValue(uint16_t h) { return RefDecode(h, 10, 5); }
inline double RefBF16Value(uint16_t b) { return RefDecode(b, 7, 8); }

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Floats equal as values (+0 == -0), or both NaN.
inline bool SameValue(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

}  // namespace starling::test
