// Scalar conversions between float32 and the 16-bit float formats: IEEE binary16
// ("half", float16) and bfloat16. Round-to-nearest-even throughout.
//
// The code is branch-free so that loops calling these functions auto-vectorize: the
// cases are merged with bit masks rather than ?: because GCC otherwise keeps branches
// around the float operations (which may trap under the default -ftrapping-math) and
// gives up on the loop. It matches the x86 F16C instructions bit for bit, NaNs included:
// a signaling NaN comes out quiet (quiet bit set) with its payload kept where the
// target format has room for it, as vcvtph2ps / vcvtps2ph do.
//
// The float16 subnormal rounding uses one float32 addition, so it assumes the default
// floating-point environment (round-to-nearest); Starling never changes it.
#pragma once

#include <cstdint>
#include <cstring>

namespace starling {

namespace half_detail {
inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// cond ? a : b without a branch.
inline uint32_t Select(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}
}  // namespace half_detail

inline float HalfToFloat(uint16_t h) {
  using half_detail::Bits;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7fffu;  // exponent and mantissa
  // Normal: shift the 5-bit exponent and 10-bit mantissa into place, rebias 15 -> 127.
  const uint32_t normal = (mag << 13) + ((127u - 15u) << 23);
  // Inf/NaN: all-ones exponent; NaNs are made quiet like vcvtph2ps does.
  const uint32_t special = (mag << 13) | 0x7f800000u | (mag > 0x7c00u ? 0x00400000u : 0u);
  // Zero/subnormal: the value is mantissa * 2^-24, exact in float.
  const uint32_t subnormal = Bits(static_cast<float>(static_cast<int32_t>(mag)) * 0x1p-24f);
  uint32_t m = half_detail::Select(mag >= 0x0400u, normal, subnormal);
  m = half_detail::Select(mag >= 0x7c00u, special, m);
  return half_detail::FromBits(sign | m);
}

inline uint16_t FloatToHalf(float f) {
  using half_detail::Select;
  const uint32_t x = half_detail::Bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;  // |f|
  // NaN: quiet it and keep the top 10 payload bits.
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  // Normal half range [2^-14, 65520): rebias 127 -> 15, then drop 13 bits rounding to
  // nearest even (add 0xfff plus the lowest kept bit). A carry out of the mantissa
  // correctly bumps the exponent.
  const uint32_t normal = (a - ((127u - 15u) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5f puts the unit 2^-24 (the half subnormal step) at the last
  // float mantissa bit, so the FPU rounds to nearest even for us; what is left above
  // 0.5f is the half bit pattern (0x400 if it rounded up to the smallest normal).
  const uint32_t subnormal =
      half_detail::Bits(half_detail::FromBits(a) + 0.5f) - half_detail::Bits(0.5f);
  // 65520 = 65504 + half an ulp is the tie that rounds to even, i.e. up to infinity.
  uint32_t m = Select(a >= 0x38800000u, normal, subnormal);
  m = Select(a >= 0x477ff000u, 0x7c00u, m);
  m = Select(a > 0x7f800000u, nan, m);
  return static_cast<uint16_t>(sign | m);
}

// bfloat16 is the top half of a float32.
inline float BFloat16ToFloat(uint16_t b) {
  return half_detail::FromBits(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBFloat16(float f) {
  const uint32_t x = half_detail::Bits(f);
  // Round to nearest even on the dropped 16 bits; overflow carries into infinity.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  // NaN: truncate and set the quiet bit, so a payload held only in the low bits
  // cannot turn into infinity. (Integer-only, so ?: if-converts fine here.)
  const uint32_t nan = (x >> 16) | 0x0040u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace starling
