// Tests of the reduction kernels (impl/ops/reduce.h); the conversions are tested in
// half_test.cc.
//
// References are written independently of the code under test: floats are decoded to
// double and re-encoded by a generic frexp/ldexp/nearbyint rounding (float_reference.h),
// and integers use exact 64/128-bit arithmetic. Every per-dtype test runs twice, on the
// AVX2/F16C kernels and on the baseline ones.
//
// Tolerances:
//  * exact (bitwise for integers, value equality for floats, any NaN for NaN) for
//    every single operation: Reduce/Reduce3 (sum, min, max), Divide by small integers,
//    and all integer results. For float16/bfloat16 this relies on float32 being wide
//    enough (>= 2p+2 bits) that rounding to float32 first is innocuous.
//  * exact as well where the test repeats the documented arithmetic step by step:
//    UniformAverage (float64/float32: sum in order, one division; 16-bit: same in
//    float32, one rounding), Scale, Axpy.
//  * WeightedSum against a float64 reference: |got - ref| <= rtol * M + atol with
//    M = |sw*x| + sum |w_j*in_j| (the error bound of a sum is relative to M, not to
//    the result): float32 rtol 1e-6, float64 1e-14, float16 1e-3 (atol 6e-8, the
//    half subnormal step), bfloat16 1e-2.

#include "impl/ops/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "impl/common/error.h"
#include "tests/unit/float_reference.h"

namespace starling::ops {
namespace {

using namespace test;  // NOLINT

__extension__ typedef __int128 Int128;

const DType kAllDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                            DType::kFloat64, DType::kInt8,     DType::kInt16,
                            DType::kInt32,   DType::kInt64,    DType::kUInt8};
// Around the kernels' block size (1024) and the suggested 2048, plus a large odd one.
const size_t kSizes[] = {0, 1, 7, 1023, 1024, 1025, 2047, 2048, 2049, 100003};

bool IsIntDType(DType d) { return !IsFloating(d); }

// ---------------------------------------------------------------- typed buffers

// A buffer of n elements of a dtype, optionally offset by one element from the
// allocation so that the kernels see pointers that are not 16/32-byte aligned.
class Buf {
 public:
  Buf(DType dtype, size_t n, bool misalign = false)
      : dtype_(dtype),
        n_(n),
        size_(DTypeSize(dtype)),
        bytes_((n + 1) * size_ + 64),
        offset_(misalign ? size_ : 0) {}
  void* data() { return bytes_.data() + offset_; }
  const void* data() const { return bytes_.data() + offset_; }
  size_t size() const { return n_; }
  DType dtype() const { return dtype_; }

  // Floating dtypes: the element as double (exact).
  double Get(size_t i) const {
    const unsigned char* p = bytes_.data() + offset_ + i * size_;
    switch (dtype_) {
      case DType::kFloat16:
        return RefHalfValue(Load<uint16_t>(p));
      case DType::kBFloat16:
        return RefBF16Value(Load<uint16_t>(p));
      case DType::kFloat32:
        return Load<float>(p);
      case DType::kFloat64:
        return Load<double>(p);
      default:
        return static_cast<double>(GetInt(i));
    }
  }
  // Stores v rounded to the dtype (floating dtypes).
  void Set(size_t i, double v) {
    unsigned char* p = bytes_.data() + offset_ + i * size_;
    switch (dtype_) {
      case DType::kFloat16:
        return StoreAs<uint16_t>(p, RefHalf(v));
      case DType::kBFloat16:
        return StoreAs<uint16_t>(p, RefBF16(v));
      case DType::kFloat32:
        return StoreAs<float>(p, static_cast<float>(v));
      case DType::kFloat64:
        return StoreAs<double>(p, v);
      default:
        return SetInt(i, static_cast<int64_t>(v));
    }
  }
  // Integer dtypes: the element, and a store that wraps modulo 2^bits.
  int64_t GetInt(size_t i) const {
    const unsigned char* p = bytes_.data() + offset_ + i * size_;
    switch (dtype_) {
      case DType::kInt8:
        return Load<int8_t>(p);
      case DType::kInt16:
        return Load<int16_t>(p);
      case DType::kInt32:
        return Load<int32_t>(p);
      case DType::kInt64:
        return Load<int64_t>(p);
      case DType::kUInt8:
        return Load<uint8_t>(p);
      default:
        ADD_FAILURE() << "GetInt on a float dtype";
        return 0;
    }
  }
  void SetInt(size_t i, int64_t v) {
    unsigned char* p = bytes_.data() + offset_ + i * size_;
    const uint64_t u = static_cast<uint64_t>(v);  // little-endian: low bytes = wrapped value
    std::memcpy(p, &u, size_);
  }
  // The raw bits of element i (for bitwise checks).
  uint64_t Raw(size_t i) const {
    uint64_t u = 0;
    std::memcpy(&u, bytes_.data() + offset_ + i * size_, size_);
    return u;
  }

 private:
  template <typename T>
  static T Load(const unsigned char* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <typename T>
  static void StoreAs(unsigned char* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }
  DType dtype_;
  size_t n_, size_;
  std::vector<unsigned char> bytes_;
  size_t offset_;
};

int64_t IntMin(DType d) {
  switch (d) {
    case DType::kInt8:
      return INT8_MIN;
    case DType::kInt16:
      return INT16_MIN;
    case DType::kInt32:
      return INT32_MIN;
    case DType::kInt64:
      return INT64_MIN;
    default:
      return 0;
  }
}
int64_t IntMax(DType d) {
  switch (d) {
    case DType::kInt8:
      return INT8_MAX;
    case DType::kInt16:
      return INT16_MAX;
    case DType::kInt32:
      return INT32_MAX;
    case DType::kInt64:
      return INT64_MAX;
    default:
      return UINT8_MAX;
  }
}

// Random contents: integers over their whole range (so sums wrap); floats uniform in
// [-range, range], with a fraction `special` of NaN, +-inf and +-0.
void Fill(Buf& b, std::mt19937_64& rng, double range = 100.0, double special = 0.0) {
  std::uniform_real_distribution<double> uni(-range, range), coin(0.0, 1.0);
  const double specials[] = {std::nan(""), HUGE_VAL, -HUGE_VAL, 0.0, -0.0};
  for (size_t i = 0; i < b.size(); ++i) {
    if (IsIntDType(b.dtype())) {
      b.SetInt(i, static_cast<int64_t>(rng()));
    } else if (coin(rng) < special) {
      b.Set(i, specials[rng() % 5]);
    } else {
      b.Set(i, uni(rng));
    }
  }
}

// Integer reference rounding: std::llround semantics, saturated, NaN -> 0.
int64_t RefRoundSaturate(double v, DType d) {
  if (std::isnan(v)) return 0;
  if (v >= static_cast<double>(IntMax(d))) return IntMax(d);  // 2^63 for int64
  if (v <= static_cast<double>(IntMin(d))) return IntMin(d);
  return std::llround(v);
}

// Exact mean rounded half away from zero: floor((2|s| + d) / 2d), signed.
int64_t RefRoundedMean(Int128 s, Int128 d) {
  const Int128 a = s < 0 ? -s : s;
  const Int128 q = (2 * a + d) / (2 * d);
  return static_cast<int64_t>(s < 0 ? -q : q);
}

std::string Describe(DType d, size_t n, bool misalign) {
  return Str(DTypeName(d), " n=", n, misalign ? " misaligned" : "");
}

// Selects the AVX2 or the baseline (SSE2) kernels for its lifetime.
class KernelChoice {
 public:
  explicit KernelChoice(bool avx2) { detail::SetAvx2Enabled(avx2); }
  ~KernelChoice() { detail::SetAvx2Enabled(true); }
};

// Per-dtype tests run twice: with the AVX2/F16C kernels (where the CPU has them) and
// with the baseline ones, which otherwise would go untested on such machines.
class PerDType : public ::testing::TestWithParam<std::tuple<DType, bool>> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  void SetUp() override { choice_ = std::make_unique<KernelChoice>(std::get<1>(GetParam())); }
  void TearDown() override { choice_.reset(); }

 private:
  std::unique_ptr<KernelChoice> choice_;
};

std::string ParamName(const ::testing::TestParamInfo<std::tuple<DType, bool>>& info) {
  return Str(DTypeName(std::get<0>(info.param)), std::get<1>(info.param) ? "_avx2" : "_baseline");
}

// ================================================================ Reduce

double RefOpFloat(double a, double b, ReduceOp op) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAverage) return a + b;
  if (std::isnan(a) || std::isnan(b)) return std::nan("");
  return op == ReduceOp::kMin ? std::min(a, b) : std::max(a, b);
}

int64_t RefOpInt(int64_t a, int64_t b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    default:
      return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
}

// Checks out[i] == op(a[i], b[i]) exactly (Buf::SetInt wraps the integer reference).
void ExpectReduced(const Buf& out, const Buf& a, const Buf& b, ReduceOp op,
                   const std::string& what) {
  const DType d = out.dtype();
  Buf want(d, out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (IsIntDType(d)) {
      want.SetInt(i, RefOpInt(a.GetInt(i), b.GetInt(i), op));
      ASSERT_EQ(out.Raw(i), want.Raw(i))
          << what << " i=" << i << " a=" << a.GetInt(i) << " b=" << b.GetInt(i);
    } else {
      want.Set(i, RefOpFloat(a.Get(i), b.Get(i), op));
      ASSERT_TRUE(SameValue(out.Get(i), want.Get(i)))
          << what << " i=" << i << " a=" << a.Get(i) << " b=" << b.Get(i) << " got=" << out.Get(i)
          << " want=" << want.Get(i);
    }
  }
}

TEST_P(PerDType, ReduceMatchesReference) {
  const DType d = dtype();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax}) {
    for (size_t n : kSizes) {
      for (bool misalign : {false, true}) {
        std::mt19937_64 rng(n * 31 + static_cast<int>(op) * 7 + static_cast<int>(d));
        Buf a(d, n, misalign), b(d, n, misalign), out(d, n, misalign);
        Fill(a, rng, 100.0, 0.02);
        Fill(b, rng, 100.0, 0.02);
        const std::string what = Str(Describe(d, n, misalign), " op=", ReduceOpName(op));
        Reduce3(out.data(), a.data(), b.data(), n, d, op);
        ExpectReduced(out, a, b, op, what + " Reduce3");

        Buf dst = a;  // Reduce: in place into a copy of a
        Reduce(dst.data(), b.data(), n, d, op);
        ExpectReduced(dst, a, b, op, what + " Reduce");
      }
    }
  }
}

TEST_P(PerDType, Reduce3Aliasing) {
  const DType d = dtype();
  const size_t n = 5000;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax}) {
    std::mt19937_64 rng(99);
    Buf a(d, n), b(d, n);
    Fill(a, rng, 100.0, 0.3);  // many NaN/inf/signed-zero pairs
    Fill(b, rng, 100.0, 0.3);
    Buf distinct(d, n), out_a = a, out_b = b, self = a, self_in = a, self_ref(d, n);
    Reduce3(distinct.data(), a.data(), b.data(), n, d, op);
    const size_t bytes = n * DTypeSize(d);
    // Aliased results must equal the distinct-buffer result bit for bit (which NaN,
    // which zero included).
    Reduce3(out_a.data(), out_a.data(), b.data(), n, d, op);  // out == a
    ExpectReduced(out_a, a, b, op, "out==a");
    EXPECT_EQ(std::memcmp(out_a.data(), distinct.data(), bytes), 0);
    Reduce3(out_b.data(), a.data(), out_b.data(), n, d, op);  // out == b
    ExpectReduced(out_b, a, b, op, "out==b");
    EXPECT_EQ(std::memcmp(out_b.data(), distinct.data(), bytes), 0);
    Reduce3(self_ref.data(), self_in.data(), self_in.data(), n, d, op);
    Reduce3(self.data(), self.data(), self.data(), n, d, op);  // out == a == b
    ExpectReduced(self, self_in, self_in, op, "out==a==b");
    EXPECT_EQ(std::memcmp(self.data(), self_ref.data(), bytes), 0);
  }
}

TEST(Reduce, IntegerWraparound) {
  auto sum1 = [](DType d, int64_t a, int64_t b) {
    Buf x(d, 1), y(d, 1);
    x.SetInt(0, a);
    y.SetInt(0, b);
    Reduce(x.data(), y.data(), 1, d, ReduceOp::kSum);
    return x.GetInt(0);
  };
  EXPECT_EQ(sum1(DType::kInt8, 100, 100), -56);
  EXPECT_EQ(sum1(DType::kInt8, -128, -1), 127);
  EXPECT_EQ(sum1(DType::kUInt8, 200, 100), 44);
  EXPECT_EQ(sum1(DType::kInt16, 32767, 1), -32768);
  EXPECT_EQ(sum1(DType::kInt32, INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(sum1(DType::kInt64, INT64_MAX, 1), INT64_MIN);
  EXPECT_EQ(sum1(DType::kInt64, INT64_MIN, INT64_MIN), 0);
}

TEST(Reduce, NaNAndInfinity) {
  const double nan = std::nan(""), inf = HUGE_VAL;
  for (bool avx2 : {true, false}) {
    KernelChoice choice(avx2);
    for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
      // Pairs (a, b): NaN on either side, infinities, signed zeros.
      const double as[] = {nan, 1.0, nan, inf, inf, -inf, 0.0, -0.0};
      const double bs[] = {1.0, nan, nan, -inf, 1.0, 5.0, -0.0, 0.0};
      const size_t n = 8;
      Buf a(d, n), b(d, n);
      for (size_t i = 0; i < n; ++i) {
        a.Set(i, as[i]);
        b.Set(i, bs[i]);
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax}) {
        Buf out(d, n);
        Reduce3(out.data(), a.data(), b.data(), n, d, op);
        ExpectReduced(out, a, b, op, Str(DTypeName(d), " ", ReduceOpName(op)));
      }
      Buf out(d, n);
      Reduce3(out.data(), a.data(), b.data(), n, d, ReduceOp::kMin);
      EXPECT_TRUE(std::isnan(out.Get(0)) && std::isnan(out.Get(1))) << DTypeName(d);
      Reduce3(out.data(), a.data(), b.data(), n, d, ReduceOp::kSum);
      EXPECT_TRUE(std::isnan(out.Get(3))) << "inf + -inf";
      EXPECT_EQ(out.Get(4), inf);
    }
  }
}

// ================================================================ Divide

TEST_P(PerDType, Divide) {
  const DType d = dtype();
  if (IsIntDType(d)) {
    Buf x(d, 4);
    EXPECT_THROW(Divide(x.data(), 4, d, 2.0), Error);
    return;
  }
  for (size_t n : kSizes) {
    for (double divisor : {3.0, 7.0, 64.0, 100.0}) {
      std::mt19937_64 rng(n + static_cast<uint64_t>(divisor));
      Buf x(d, n, true);
      Fill(x, rng, 100.0, 0.02);
      Buf y = x;
      Divide(y.data(), n, d, divisor);
      for (size_t i = 0; i < n; ++i) {
        double want;
        if (d == DType::kFloat32) {
          want = static_cast<float>(x.Get(i)) / static_cast<float>(divisor);  // bit exact
        } else if (d == DType::kFloat64) {
          want = x.Get(i) / divisor;
        } else {  // divisors are exact in half and bfloat16: single correctly rounded op
          Buf w(d, 1);
          w.Set(0, x.Get(i) / divisor);
          want = w.Get(0);
        }
        ASSERT_TRUE(SameValue(y.Get(i), want)) << Describe(d, n, true) << " i=" << i;
      }
    }
  }
}

TEST(Divide, Float32IsTrueDivision) {
  // 1/3 rounded then multiplied differs from the division for some inputs; make sure
  // such an input gives the division's result.
  const float d = 3.0f, inv = 1.0f / d;
  int found = 0;
  for (float x = 1.0f; x < 1000.0f && found < 20; x += 0.37f) {
    if (x / d == x * inv) continue;
    ++found;
    float v = x;
    Divide(&v, 1, DType::kFloat32, 3.0);
    EXPECT_EQ(FloatBits(v), FloatBits(x / d)) << x;
  }
  EXPECT_GT(found, 0);
}

// Power-of-two divisors multiply by the reciprocal instead: must be the same bits,
// including subnormal results, overflow, and divisors whose reciprocal is not finite.
TEST(Divide, SpecialDivisorsMatchDivision) {
  std::mt19937 rng(11);
  std::vector<float> xs = {0.0f,       -0.0f,           1.0f,  3.0f,   1e-40f,
                           -1e-45f,    1.17549435e-38f, 3e38f, -3e38f, HUGE_VALF,
                           -HUGE_VALF, std::nanf("")};
  for (int i = 0; i < 2000; ++i) xs.push_back(BitsFloat(static_cast<uint32_t>(rng())));
  const double divisors[] = {2.0,          4.0,      0.5,      -4.0,  0x1p126, 0x1p127,
                             0x1p-126,     0x1p-127, 0x1p-149, 0.0,   -0.0,    HUGE_VAL,
                             std::nan(""), 3.0,      1.0,      1024.0};
  for (double dv : divisors) {
    std::vector<float> f = xs;
    Divide(f.data(), f.size(), DType::kFloat32, dv);
    std::vector<double> g(xs.begin(), xs.end());
    for (double& v : g) v *= 0x1p900;  // also exercise double range
    std::vector<double> g0 = g;
    Divide(g.data(), g.size(), DType::kFloat64, dv * 0x1p100);
    const float fd = static_cast<float>(dv);
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = xs[i] / fd;
      ASSERT_TRUE(FloatBits(f[i]) == FloatBits(want) || (std::isnan(f[i]) && std::isnan(want)))
          << xs[i] << " / " << dv;
      const double want64 = g0[i] / (dv * 0x1p100);
      ASSERT_TRUE(g[i] == want64 || (std::isnan(g[i]) && std::isnan(want64)))
          << g0[i] << " / " << dv;
    }
  }
}

// ================================================================ WeightedSum

struct Tolerance {
  double rtol, atol;
};
Tolerance TolFor(DType d) {
  switch (d) {
    case DType::kFloat16:
      return {1e-3, 6e-8};
    case DType::kBFloat16:
      return {1e-2, 1e-30};
    case DType::kFloat32:
      return {1e-6, 1e-30};
    case DType::kFloat64:
      return {1e-14, 1e-300};
    default:
      return {0, 0};
  }
}

// The inputs of a multi-input operation: x and k further buffers.
struct Inputs {
  Buf x;
  std::vector<Buf> in;
  std::vector<const void*> ptrs;
  Inputs(DType d, size_t n, int k, bool misalign, std::mt19937_64& rng, double range)
      : x(d, n, misalign) {
    Fill(x, rng, range);
    for (int j = 0; j < k; ++j) {
      in.emplace_back(d, n, misalign);
      Fill(in.back(), rng, range);
    }
    for (auto& b : in) ptrs.push_back(b.data());
  }
};

// Reference weighted sum in double, in the documented order.
double RefWeighted(const Inputs& s, double sw, const std::vector<double>& w, size_t i,
                   double* magnitude) {
  double v = sw * s.x.Get(i);
  *magnitude = std::fabs(v);
  for (size_t j = 0; j < w.size(); ++j) {
    v += w[j] * s.in[j].Get(i);
    *magnitude += std::fabs(w[j] * s.in[j].Get(i));
  }
  return v;
}

void ExpectWeighted(const Buf& out, const Inputs& s, double sw, const std::vector<double>& w,
                    const std::string& what) {
  const DType d = out.dtype();
  for (size_t i = 0; i < out.size(); ++i) {
    double mag;
    const double ref = RefWeighted(s, sw, w, i, &mag);
    if (IsIntDType(d)) {
      ASSERT_EQ(out.GetInt(i), RefRoundSaturate(ref, d)) << what << " i=" << i << " ref=" << ref;
    } else {
      const Tolerance t = TolFor(d);
      ASSERT_NEAR(out.Get(i), ref, t.rtol * mag + t.atol) << what << " i=" << i;
    }
  }
}

TEST_P(PerDType, WeightedSumMatchesReference) {
  const DType d = dtype();
  for (int k : {0, 1, 2, 3, 5}) {
    for (size_t n : kSizes) {
      for (bool misalign : {false, true}) {
        std::mt19937_64 rng(1000 + n * 3 + k);
        std::uniform_real_distribution<double> weight(-1.5, 1.5);
        Inputs s(d, n, k, misalign, rng, 100.0);
        const double sw = weight(rng);
        std::vector<double> w(k);
        for (double& v : w) v = weight(rng);
        const std::string what = Str(Describe(d, n, misalign), " k=", k);

        Buf out(d, n, misalign);
        WeightedSum(out.data(), s.x.data(), sw, s.ptrs.data(), w.data(), k, n, d);
        ExpectWeighted(out, s, sw, w, what);

        Buf alias = s.x;  // out == x
        WeightedSum(alias.data(), alias.data(), sw, s.ptrs.data(), w.data(), k, n, d);
        ASSERT_EQ(std::memcmp(alias.data(), out.data(), n * DTypeSize(d)), 0) << what;

        if (k == 0) {  // Scale is WeightedSum with k = 0
          Buf scaled(d, n, misalign);
          Scale(scaled.data(), s.x.data(), sw, n, d);
          ASSERT_EQ(std::memcmp(scaled.data(), out.data(), n * DTypeSize(d)), 0) << what;
          Scale(alias.data(), alias.data(), 1.0, n, d);  // factor 1: unchanged
          ASSERT_EQ(std::memcmp(alias.data(), out.data(), n * DTypeSize(d)), 0) << what;
        }
      }
    }
  }
}

TEST(WeightedSum, IntegerRoundingAndSaturation) {
  auto scale1 = [](DType d, int64_t x, double f) {
    Buf b(d, 1);
    b.SetInt(0, x);
    Scale(b.data(), b.data(), f, 1, d);
    return b.GetInt(0);
  };
  EXPECT_EQ(scale1(DType::kInt8, 3, 0.5), 2);  // 1.5: ties away from zero
  EXPECT_EQ(scale1(DType::kInt8, -3, 0.5), -2);
  EXPECT_EQ(scale1(DType::kInt8, 5, 0.5), 3);  // 2.5 -> 3, not 2
  EXPECT_EQ(scale1(DType::kInt8, -5, 0.5), -3);
  EXPECT_EQ(scale1(DType::kInt8, 1, 0.5), 1);
  EXPECT_EQ(scale1(DType::kInt8, 1, 0.49999999999999994), 0);  // just below the tie
  EXPECT_EQ(scale1(DType::kInt8, 100, 10.0), 127);             // 1000 saturates
  EXPECT_EQ(scale1(DType::kInt8, 100, -10.0), -128);
  EXPECT_EQ(scale1(DType::kUInt8, 5, -1.0), 0);
  EXPECT_EQ(scale1(DType::kUInt8, 200, 1.5), 255);
  EXPECT_EQ(scale1(DType::kUInt8, 5, 0.5), 3);
  EXPECT_EQ(scale1(DType::kInt16, 30000, 2.0), 32767);
  EXPECT_EQ(scale1(DType::kInt32, INT32_MAX, 2.0), INT32_MAX);
  EXPECT_EQ(scale1(DType::kInt32, INT32_MIN, 2.0), INT32_MIN);
  EXPECT_EQ(scale1(DType::kInt32, 7, 0.5), 4);
  EXPECT_EQ(scale1(DType::kInt64, INT64_MAX, 2.0), INT64_MAX);
  EXPECT_EQ(scale1(DType::kInt64, INT64_MIN, 2.0), INT64_MIN);
  EXPECT_EQ(scale1(DType::kInt64, -7, 0.5), -4);
  EXPECT_EQ(scale1(DType::kInt64, int64_t{1} << 60, 1.0), int64_t{1} << 60);
  for (DType d : {DType::kInt8, DType::kInt32, DType::kInt64, DType::kUInt8}) {
    EXPECT_EQ(scale1(d, 3, std::nan("")), 0) << DTypeName(d);  // NaN -> 0
    EXPECT_EQ(scale1(d, 3, HUGE_VAL), IntMax(d)) << DTypeName(d);
    EXPECT_EQ(scale1(d, 3, -HUGE_VAL), IntMin(d)) << DTypeName(d);
  }
  // Every tie n + 0.5 in the int8 range, both signs.
  for (int v = -255; v <= 255; v += 2) {
    const int64_t want = std::llround(v * 0.5);
    EXPECT_EQ(scale1(DType::kInt16, v, 0.5), want) << v;
  }
}

TEST(WeightedSum, NaNAndInfinityPropagate) {
  for (bool avx2 : {true, false}) {
    KernelChoice choice(avx2);
    for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
      const size_t n = 3;
      Buf x(d, n), y(d, n), out(d, n);
      x.Set(0, std::nan(""));
      x.Set(1, HUGE_VAL);
      x.Set(2, 1.0);
      y.Set(0, 1.0);
      y.Set(1, 1.0);
      y.Set(2, -HUGE_VAL);
      const void* in[] = {y.data()};
      const double w[] = {0.5};
      WeightedSum(out.data(), x.data(), 0.5, in, w, 1, n, d);
      EXPECT_TRUE(std::isnan(out.Get(0))) << DTypeName(d);
      EXPECT_EQ(out.Get(1), HUGE_VAL) << DTypeName(d);
      EXPECT_EQ(out.Get(2), -HUGE_VAL) << DTypeName(d);
    }
  }
}

TEST_P(PerDType, Axpy) {
  const DType d = dtype();
  for (size_t n : kSizes) {
    std::mt19937_64 rng(5 + n);
    Inputs s(d, n, 1, true, rng, 100.0);
    const double factor = -0.3;
    Buf out = s.x;
    Axpy(out.data(), s.in[0].data(), factor, n, d);
    ExpectWeighted(out, s, 1.0, {factor}, Describe(d, n, true));
    if (d == DType::kFloat32) {  // exactly out + float(factor) * x in float32
      for (size_t i = 0; i < n; ++i) {
        const float want = static_cast<float>(s.x.Get(i)) +
                           static_cast<float>(factor) * static_cast<float>(s.in[0].Get(i));
        ASSERT_EQ(FloatBits(static_cast<float>(out.Get(i))), FloatBits(want)) << i;
      }
    }
  }
}

// ================================================================ UniformAverage

TEST_P(PerDType, UniformAverageMatchesReference) {
  const DType d = dtype();
  for (int k : {0, 1, 2, 3, 5}) {
    for (size_t n : kSizes) {
      for (bool misalign : {false, true}) {
        std::mt19937_64 rng(2000 + n * 5 + k);
        Inputs s(d, n, k, misalign, rng, 100.0);
        const std::string what = Str(Describe(d, n, misalign), " k=", k);
        Buf out(d, n, misalign);
        UniformAverage(out.data(), s.x.data(), s.ptrs.data(), k, n, d);
        for (size_t i = 0; i < n; ++i) {
          if (IsIntDType(d)) {
            Int128 sum = s.x.GetInt(i);
            for (int j = 0; j < k; ++j) sum += s.in[j].GetInt(i);
            ASSERT_EQ(out.GetInt(i), RefRoundedMean(sum, k + 1)) << what << " i=" << i;
          } else if (d == DType::kFloat64) {
            double sum = s.x.Get(i);
            for (int j = 0; j < k; ++j) sum += s.in[j].Get(i);
            const double want = sum / (k + 1);
            ASSERT_EQ(out.Get(i), want) << what << " i=" << i;  // bit exact
          } else {
            // float32 arithmetic, then one rounding to the dtype.
            float sum = static_cast<float>(s.x.Get(i));
            for (int j = 0; j < k; ++j) sum += static_cast<float>(s.in[j].Get(i));
            Buf want(d, 1);
            want.Set(0, sum / static_cast<float>(k + 1));
            ASSERT_EQ(out.Raw(i), want.Raw(0)) << what << " i=" << i;
          }
        }
        Buf alias = s.x;  // out == x
        UniformAverage(alias.data(), alias.data(), s.ptrs.data(), k, n, d);
        ASSERT_EQ(std::memcmp(alias.data(), out.data(), n * DTypeSize(d)), 0) << what;
      }
    }
  }
}

TEST(UniformAverage, IntegerRounding) {
  // (x + a) / 2 for pairs hitting ties on both signs.
  const int64_t xs[] = {1, -1, 3, -3, 0, 2, 127, -128};
  const int64_t as[] = {0, 0, 0, 0, -1, 2, 127, -127};
  const int64_t want[] = {1, -1, 2, -2, -1, 2, 127, -128};
  Buf x(DType::kInt8, 8), a(DType::kInt8, 8), out(DType::kInt8, 8);
  for (size_t i = 0; i < 8; ++i) {
    x.SetInt(i, xs[i]);
    a.SetInt(i, as[i]);
  }
  const void* in[] = {a.data()};
  UniformAverage(out.data(), x.data(), in, 1, 8, DType::kInt8);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(out.GetInt(i), want[i]) << i;
  // int64 sums beyond 64 bits stay exact.
  int64_t big[] = {INT64_MAX, INT64_MAX - 2}, res[2];
  const void* in64[] = {big + 1};
  UniformAverage(res, big, in64, 1, 1, DType::kInt64);
  EXPECT_EQ(res[0], INT64_MAX - 1);
}

// Many inputs (the same few buffers repeated): exercises the double-sum path up to its
// bound (2^20 terms) and the exact 128-bit path beyond it.
TEST(UniformAverage, ManyInputs) {
  for (DType d : {DType::kInt32, DType::kInt16, DType::kInt64}) {
    for (int k : {(1 << 20) - 1, (1 << 20) + 4}) {
      const size_t n = 9;
      std::mt19937_64 rng(k);
      Inputs s(d, n, 3, false, rng, 0);
      std::vector<const void*> ptrs(k);
      for (int j = 0; j < k; ++j) ptrs[j] = s.in[j % 3].data();
      Buf out(d, n);
      UniformAverage(out.data(), s.x.data(), ptrs.data(), k, n, d);
      for (size_t i = 0; i < n; ++i) {
        Int128 sum = s.x.GetInt(i);
        for (int j = 0; j < 3; ++j)
          sum += static_cast<Int128>(s.in[j].GetInt(i)) * ((k - j + 2) / 3);
        ASSERT_EQ(out.GetInt(i), RefRoundedMean(sum, k + 1)) << DTypeName(d) << " k=" << k;
      }
    }
  }
}

// ================================================================ argument checks

TEST(Reduce, RejectsBadArguments) {
  float buf[16] = {};
  const void* in[] = {buf + 1};
  const double w[] = {1.0};
  // Partial overlaps.
  EXPECT_THROW(Reduce3(buf, buf + 1, buf + 8, 8, DType::kFloat32, ReduceOp::kSum), Error);
  EXPECT_THROW(WeightedSum(buf, buf + 8, 1.0, in, w, 1, 8, DType::kFloat32), Error);
  EXPECT_THROW(UniformAverage(buf, buf + 8, in, 1, 8, DType::kFloat32), Error);
  // Unknown dtype and op.
  EXPECT_THROW(Reduce(buf, buf + 8, 4, static_cast<DType>(42), ReduceOp::kSum), Error);
  EXPECT_THROW(Reduce(buf, buf + 8, 4, DType::kFloat32, static_cast<ReduceOp>(9)), Error);
  try {
    Divide(buf, 4, DType::kInt32, 2.0);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
  }
  // n == 0 accepts null pointers.
  Reduce(nullptr, nullptr, 0, DType::kFloat32, ReduceOp::kSum);
  WeightedSum(nullptr, nullptr, 1.0, nullptr, nullptr, 0, 0, DType::kInt8);
  UniformAverage(nullptr, nullptr, nullptr, 0, 0, DType::kFloat16);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, PerDType,
                         ::testing::Combine(::testing::ValuesIn(kAllDTypes), ::testing::Bool()),
                         ParamName);

}  // namespace
}  // namespace starling::ops
