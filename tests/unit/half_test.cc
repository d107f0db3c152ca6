// Tests of the 16-bit float conversions: the scalar ones (impl/common/half.h) against
// an independent reference, and the F16C bulk conversions (impl/ops/convert.h) against
// the portable ones.
//
// NaNs: payloads are kept where the format has room, but signaling NaNs come back
// quiet (as the F16C instructions do), so a NaN round trip may set the quiet bit.

#include "impl/common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "impl/ops/convert.h"
#include "tests/unit/float_reference.h"

namespace starling {
namespace {

using namespace test;  // NOLINT

TEST(Half, AllValuesRoundTrip) {
  // Every half decodes to its exact value; encoding gives it back, except that NaNs
  // come back quiet (bit 9 set) with sign and remaining payload kept.
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    ASSERT_TRUE(SameValue(f, RefHalfValue(static_cast<uint16_t>(h)))) << std::hex << h;
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    const uint16_t want = static_cast<uint16_t>(nan ? h | 0x200 : h);
    ASSERT_EQ(FloatToHalf(f), want) << std::hex << h;
    if (!nan) {
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0);
    }
  }
}

TEST(Half, RoundingCases) {
  const struct {
    float in;
    uint16_t out;
  } cases[] = {
      {1.0f, 0x3c00},
      {1.0f + 0x1p-11f, 0x3c00},             // tie -> even (down)
      {1.0f + 3 * 0x1p-11f, 0x3c02},         // tie -> even (up)
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},  // above the tie
      {0x1p-24f, 0x0001},                    // smallest subnormal
      {0x1p-25f, 0x0000},                    // tie between 0 and 2^-24 -> 0
      {0x1p-25f + 0x1p-40f, 0x0001},
      {3 * 0x1p-25f, 0x0002},        // 1.5 steps -> 2
      {5 * 0x1p-25f, 0x0002},        // 2.5 steps -> 2
      {1023.5f * 0x1p-24f, 0x0400},  // largest subnormal + tie -> min normal
      {0x1p-14f, 0x0400},            // smallest normal
      {1e-30f, 0x0000},
      {-1e-30f, 0x8000},
      {-0.0f, 0x8000},
      {65504.0f, 0x7bff},  // largest finite
      {65519.996f, 0x7bff},
      {65520.0f, 0x7c00},  // tie -> even = infinity
      {1e10f, 0x7c00},
      {-1e10f, 0xfc00},
      {HUGE_VALF, 0x7c00},
      {-HUGE_VALF, 0xfc00},
      {std::numeric_limits<float>::denorm_min(), 0x0000},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FloatToHalf(c.in), c.out) << c.in;
    EXPECT_EQ(RefHalf(c.in), c.out) << "reference disagrees: " << c.in;
  }
  const uint16_t nan = FloatToHalf(std::nanf(""));
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  EXPECT_EQ(FloatToHalf(BitsFloat(0x7f800001u)) & 0x7e00, 0x7e00);  // sNaN, low payload
  EXPECT_EQ(FloatToHalf(BitsFloat(0xffc00000u)), 0xfe00);           // sign kept
}

// Floats that exercise the rounding of both formats: every exponent near the half
// range with assorted mantissas (low bits around the ties), plus random patterns.
std::vector<float> TestFloats() {
  std::vector<float> v;
  std::mt19937_64 rng(7);
  const uint32_t lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x7fff, 0x8000, 0x8001, 0xffff};
  for (uint32_t e = 0; e < 256; ++e) {
    for (int r = 0; r < 48; ++r) {
      const uint32_t high = static_cast<uint32_t>(rng()) & 0x7f0000u;
      for (uint32_t low : lows) {
        for (uint32_t sign : {0u, 0x80000000u}) {
          v.push_back(BitsFloat(sign | e << 23 | high | low));
          v.push_back(BitsFloat(sign | e << 23 | ((high | low) ^ 0x2000)));
        }
      }
    }
  }
  for (int i = 0; i < 1000000; ++i) v.push_back(BitsFloat(static_cast<uint32_t>(rng())));
  // Concentrated on the half range: exponents 100..145.
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    v.push_back(BitsFloat((bits & 0x807fffffu) | (100u + bits % 46) << 23));
  }
  return v;
}

TEST(Half, FloatToHalfMatchesReference) {
  for (float f : TestFloats()) {
    const uint16_t got = FloatToHalf(f);
    if (std::isnan(f)) {
      ASSERT_TRUE((got & 0x7c00) == 0x7c00 && (got & 0x3ff)) << f;
    } else {
      ASSERT_EQ(got, RefHalf(f)) << std::hexfloat << f;
    }
  }
}

TEST(BFloat16, AllValuesRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    ASSERT_TRUE(SameValue(f, RefBF16Value(static_cast<uint16_t>(b)))) << std::hex << b;
    const bool nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
    ASSERT_EQ(FloatToBFloat16(f), nan ? (b | 0x40) : b) << std::hex << b;
  }
}

TEST(BFloat16, RoundingCases) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f), 0x3f80);      // tie -> even (down)
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(0x1p-133f), 0x0001);                          // subnormal
  EXPECT_EQ(FloatToBFloat16(0x1p-134f), 0x0000);                          // tie -> 0
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // overflow
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(FloatToBFloat16(HUGE_VALF), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBFloat16(BitsFloat(0x7f800001u)), 0x7fc0);  // NaN stays NaN
  EXPECT_EQ(FloatToBFloat16(BitsFloat(0xff800001u)), 0xffc0);
  for (float f : TestFloats()) {
    const uint16_t got = FloatToBFloat16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE((got & 0x7f80) == 0x7f80 && (got & 0x7f)) << f;
    } else {
      ASSERT_EQ(got, RefBF16(f)) << std::hexfloat << f;
    }
  }
}

TEST(Half, F16CMatchesPortable) {
  if (!ops::detail::HasF16C()) GTEST_SKIP() << "CPU without F16C/AVX2";
  std::vector<uint16_t> halves(65536 + 5);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i * 40503u);
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> a(halves.size()), b(halves.size());
  ops::detail::HalfToFloatPortable(halves.data(), a.data(), halves.size());  // odd size: tails
  ops::detail::HalfToFloatF16C(halves.data(), b.data(), halves.size());
  for (size_t i = 0; i < halves.size(); ++i) {
    ASSERT_EQ(FloatBits(a[i]), FloatBits(b[i])) << std::hex << halves[i];  // NaNs too
    ASSERT_EQ(FloatBits(a[i]), FloatBits(HalfToFloat(halves[i])));
  }

  std::vector<float> floats = TestFloats();
  floats.push_back(1.0f);  // odd count: exercises the F16C tail path
  std::vector<uint16_t> p(floats.size()), q(floats.size());
  ops::detail::FloatToHalfPortable(floats.data(), p.data(), floats.size());
  ops::detail::FloatToHalfF16C(floats.data(), q.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(p[i], q[i]) << std::hexfloat << floats[i];
    ASSERT_EQ(p[i], FloatToHalf(floats[i]));
  }
}

// Set STARLING_EXHAUSTIVE=1 to compare all 2^32 floats (a few seconds).
TEST(Half, F16CMatchesPortableExhaustive) {
  if (!ops::detail::HasF16C()) GTEST_SKIP() << "CPU without F16C/AVX2";
  if (!std::getenv("STARLING_EXHAUSTIVE")) GTEST_SKIP() << "set STARLING_EXHAUSTIVE=1";
  constexpr size_t kChunk = 1 << 16;
  std::vector<float> f(kChunk);
  std::vector<uint16_t> p(kChunk), q(kChunk);
  for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
    for (size_t i = 0; i < kChunk; ++i) f[i] = BitsFloat(static_cast<uint32_t>(base + i));
    ops::detail::FloatToHalfPortable(f.data(), p.data(), kChunk);
    ops::detail::FloatToHalfF16C(f.data(), q.data(), kChunk);
    ASSERT_EQ(std::memcmp(p.data(), q.data(), kChunk * 2), 0) << "chunk at " << base;
  }
}

// The dispatching bulk conversions agree with the scalar ones (odd size: tails).
TEST(BulkConversions, MatchScalar) {
  std::vector<float> floats = TestFloats();
  floats.resize(100003);
  std::vector<uint16_t> h(floats.size()), b(floats.size());
  ops::FloatToHalfN(floats.data(), h.data(), floats.size());
  ops::FloatToBFloat16N(floats.data(), b.data(), floats.size());
  std::vector<float> hf(floats.size()), bf(floats.size());
  ops::HalfToFloatN(h.data(), hf.data(), h.size());
  ops::BFloat16ToFloatN(b.data(), bf.data(), b.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(h[i], FloatToHalf(floats[i])) << i;
    ASSERT_EQ(b[i], FloatToBFloat16(floats[i])) << i;
    ASSERT_EQ(FloatBits(hf[i]), FloatBits(HalfToFloat(h[i]))) << i;
    ASSERT_EQ(FloatBits(bf[i]), FloatBits(BFloat16ToFloat(b[i]))) << i;
  }
}

}  // namespace
}  // namespace starling
