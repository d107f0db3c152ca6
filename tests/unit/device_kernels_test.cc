// The device kernels' element code (impl/device/kernels/elementwise.h) run on the host
// (host_kernels.h) against the CPU kernels (impl/ops/reduce.h), on both their AVX2 and
// their baseline code: every result must be the same bits, signed zeros, infinities and
// NaN payloads included. The data mixes ordinary values with NaNs (quiet, signaling,
// negative, with payloads), infinities, subnormals, signed zeros and extreme integers.
//
// One exception, by construction: where two NaNs meet in one addition, which payload
// survives depends on the operand order GCC chose for that CPU loop (x86 keeps the
// first operand's), and differs between the CPU's own loops. So each test runs twice:
// NaNs in one operand only (every NaN result exact), and NaNs everywhere (a NaN where
// the CPU has a NaN is enough). x86 hosts only: other CPUs have other NaN rules.
//
// Also: the 16-bit conversions against impl/common/half.h, the integer casts, the error
// returns, and the x86 NaN rule that the kernels imitate (NanLikeX86).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "impl/common/dtype.h"
#include "impl/common/half.h"
#include "impl/device/kernels/dispatch.h"
#include "impl/device/kernels/elementwise.h"
#include "impl/device/kernels/host_kernels.h"
#include "impl/device/plugin_abi.h"
#include "impl/ops/reduce.h"

namespace starling::device::kernels {
namespace {

const DType kAllDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64, DType::kInt8,
                            DType::kInt16,   DType::kInt32,    DType::kInt64,   DType::kUInt8};
const DType kFloatDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax};
const size_t kSizes[] = {0, 1, 7, 1024, 1025, 4099};

using Bytes = std::vector<uint8_t>;

// ---------------------------------------------------------------- random data

template <typename U>
U RandomBits(std::mt19937_64& rng) {
  return static_cast<U>(rng());
}

// A float32/float64 bit pattern: ordinary values mostly, and every special kind.
template <typename F, typename U>
U RandomFloatBits(std::mt19937_64& rng) {
  constexpr int kMant = std::numeric_limits<F>::digits - 1;  // stored mantissa bits
  constexpr U kExpMask = static_cast<U>(~U(0) >> 1) & ~((U(1) << kMant) - 1);
  constexpr U kSign = U(1) << (8 * sizeof(U) - 1);
  constexpr U kQuiet = U(1) << (kMant - 1);
  const U sign = (rng() & 1) ? kSign : 0;
  const U mant = RandomBits<U>(rng) & ((U(1) << kMant) - 1);
  switch (rng() % 16) {
    case 0: return sign | kExpMask | kQuiet | (mant & 0xff);          // quiet NaN, maybe a payload
    case 1: return sign | kExpMask | ((mant & ~kQuiet) | 1);          // signaling NaN
    case 2: return sign | kExpMask;                                   // infinity
    case 3: return sign | mant;                                       // subnormal
    case 4: return sign;                                              // signed zero
    case 5: return sign | (kExpMask - (U(1) << kMant)) | mant;        // near the largest
    case 6: return RandomBits<U>(rng);                                // anything
    default: {
      std::uniform_real_distribution<double> u(-1000.0, 1000.0);
      F f = static_cast<F>(u(rng));
      U bits;
      std::memcpy(&bits, &f, sizeof bits);
      return bits;
    }
  }
}

// 16-bit floats: any pattern half the time (NaNs, subnormals, infinities among them),
// else a moderate value rounded from float.
uint16_t Random16(std::mt19937_64& rng, DType dtype) {
  if (rng() & 1) return RandomBits<uint16_t>(rng);
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  const float f = u(rng);
  return dtype == DType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
}

template <typename T>
T RandomInt(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0: return std::numeric_limits<T>::min();
    case 1: return std::numeric_limits<T>::max();
    case 2: return static_cast<T>(static_cast<int>(rng() % 7) - 3);
    default: return RandomBits<T>(rng);
  }
}

template <typename T>
void FillWith(Bytes& b, size_t n, std::mt19937_64& rng, T (*gen)(std::mt19937_64&)) {
  b.resize(n * sizeof(T));
  for (size_t i = 0; i < n; ++i) {
    const T v = gen(rng);
    std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
  }
}

bool IsNaNAt(const uint8_t* p, DType dtype) {
  uint64_t v = 0;
  std::memcpy(&v, p, DTypeSize(dtype));
  switch (dtype) {
    case DType::kFloat16: return (v & 0x7fff) > 0x7c00;
    case DType::kBFloat16: return (v & 0x7fff) > 0x7f80;
    case DType::kFloat32: return (v & 0x7fffffff) > 0x7f800000;
    case DType::kFloat64: return (v & 0x7fffffffffffffff) > 0x7ff0000000000000;
    default: return false;
  }
}

// n random elements; with_nans false replaces every NaN by zero.
Bytes RandomBuffer(DType dtype, size_t n, std::mt19937_64& rng, bool with_nans = true) {
  Bytes b;
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
      b.resize(2 * n);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t v = Random16(rng, dtype);
        std::memcpy(b.data() + 2 * i, &v, 2);
      }
      break;
    case DType::kFloat32: FillWith<uint32_t>(b, n, rng, RandomFloatBits<float, uint32_t>); break;
    case DType::kFloat64: FillWith<uint64_t>(b, n, rng, RandomFloatBits<double, uint64_t>); break;
    case DType::kInt8: FillWith<int8_t>(b, n, rng, RandomInt<int8_t>); break;
    case DType::kInt16: FillWith<int16_t>(b, n, rng, RandomInt<int16_t>); break;
    case DType::kInt32: FillWith<int32_t>(b, n, rng, RandomInt<int32_t>); break;
    case DType::kInt64: FillWith<int64_t>(b, n, rng, RandomInt<int64_t>); break;
    case DType::kUInt8: FillWith<uint8_t>(b, n, rng, RandomInt<uint8_t>); break;
  }
  if (!with_nans) {
    const size_t size = DTypeSize(dtype);
    for (size_t off = 0; off < b.size(); off += size) {
      if (IsNaNAt(b.data() + off, dtype)) std::memset(b.data() + off, 0, size);
    }
  }
  return b;
}

// ---------------------------------------------------------------- bitwise comparison

std::string Hex(const uint8_t* p, size_t elem) {
  uint64_t v = 0;
  std::memcpy(&v, p, elem);
  char msg[32];
  std::snprintf(msg, sizeof msg, "0x%llx", static_cast<unsigned long long>(v));
  return msg;
}

// "" when equal, else the first differing element in hex.
std::string FirstDifference(const Bytes& got, const Bytes& want, size_t elem) {
  if (got.size() != want.size()) return "sizes differ";
  for (size_t off = 0; off < got.size(); off += elem) {
    if (std::memcmp(got.data() + off, want.data() + off, elem) != 0) {
      return "element " + std::to_string(off / elem) + ": got " + Hex(got.data() + off, elem) + ", want " +
             Hex(want.data() + off, elem);
    }
  }
  return "";
}

std::string Where(DType d, size_t n) { return std::string(DTypeName(d)) + " n=" + std::to_string(n); }

// What may differ from the CPU: nothing, or the payload of a NaN (header comment).
enum class Nans { kExact, kAnyPayload };

// got against the CPU kernels' result, which `run(out)` computes into a copy of init,
// once on their AVX2 code and once on their baseline (SSE2) code. "" when equal.
template <class Run>
std::string DifferenceFromCpu(const Bytes& got, const Bytes& init, DType dtype, Nans nans, Run run) {
  const size_t elem = DTypeSize(dtype);
  for (bool avx2 : {true, false}) {
    Bytes want = init;
    ops::detail::SetAvx2Enabled(avx2);
    run(want);
    ops::detail::SetAvx2Enabled(true);
    if (got.size() != want.size()) return "sizes differ";
    for (size_t off = 0; off < got.size(); off += elem) {
      if (std::memcmp(got.data() + off, want.data() + off, elem) == 0) continue;
      if (nans == Nans::kAnyPayload && IsNaNAt(got.data() + off, dtype) && IsNaNAt(want.data() + off, dtype)) continue;
      return "element " + std::to_string(off / elem) + ": got " + Hex(got.data() + off, elem) + ", want " +
             Hex(want.data() + off, elem) + (avx2 ? " (AVX2)" : " (baseline)");
    }
  }
  return "";
}

// ---------------------------------------------------------------- reduce / divide

TEST(DeviceKernels, ReduceMatchesCpu) {
  std::mt19937_64 rng(1);
  // NaNs in dst only, in src only (exact), in both (any payload).
  const bool dst_nans[] = {true, false, true}, src_nans[] = {false, true, true};
  for (DType d : kAllDTypes) {
    for (ReduceOp op : kAllOps) {
      for (size_t n : kSizes) {
        for (int t = 0; t < 3; ++t) {
          const Nans nans = dst_nans[t] && src_nans[t] ? Nans::kAnyPayload : Nans::kExact;
          const Bytes a = RandomBuffer(d, n, rng, dst_nans[t]), b = RandomBuffer(d, n, rng, src_nans[t]);
          Bytes got = a;
          ASSERT_EQ(HostReduce(got.data(), b.data(), n, static_cast<int>(d), static_cast<int>(op)), 0);
          ASSERT_EQ(DifferenceFromCpu(got, a, d, nans, [&](Bytes& out) { ops::Reduce(out.data(), b.data(), n, d, op); }),
                    "")
              << Where(d, n) << " " << ReduceOpName(op) << " case " << t;
        }
        // dst == src: a NaN meets itself, and x86 keeps it whatever the order.
        const Bytes a = RandomBuffer(d, n, rng);
        Bytes got = a;
        ASSERT_EQ(HostReduce(got.data(), got.data(), n, static_cast<int>(d), static_cast<int>(op)), 0);
        ASSERT_EQ(DifferenceFromCpu(got, a, d, Nans::kExact,
                                    [&](Bytes& out) { ops::Reduce(out.data(), out.data(), n, d, op); }),
                  "")
            << Where(d, n) << " aliased " << ReduceOpName(op);
      }
    }
  }
}

TEST(DeviceKernels, DivideMatchesCpu) {
  std::mt19937_64 rng(2);
  // Powers of two (the exact-reciprocal path, a subnormal reciprocal among them), others,
  // zero, a negative, one beyond float's range, NaN.
  const double divisors[] = {1.0, 2.0, 4.0, 0.5, 0x1p-130, 0x1p127, 3.0, 7.0, 10.0, 0.1, 0.0, -6.0, 1e300};
  for (DType d : kFloatDTypes) {
    for (size_t n : kSizes) {
      const Bytes a = RandomBuffer(d, n, rng);
      for (double divisor : divisors) {
        Bytes got = a;
        ASSERT_EQ(HostDivide(got.data(), n, static_cast<int>(d), divisor), 0);
        ASSERT_EQ(DifferenceFromCpu(got, a, d, Nans::kExact,
                                    [&](Bytes& out) { ops::Divide(out.data(), n, d, divisor); }),
                  "")
            << Where(d, n) << " / " << divisor;
      }
      // A NaN divisor meets the NaNs of the data.
      Bytes got = a;
      ASSERT_EQ(HostDivide(got.data(), n, static_cast<int>(d), std::nan("")), 0);
      ASSERT_EQ(DifferenceFromCpu(got, a, d, Nans::kAnyPayload,
                                  [&](Bytes& out) { ops::Divide(out.data(), n, d, std::nan("")); }),
                "")
          << Where(d, n) << " / NaN";
    }
  }
}

// ---------------------------------------------------------------- weighted sum

// HostWeightedSum into a new buffer and into x itself, against the CPU.
void CheckWeightedSum(DType d, size_t n, const Bytes& x, const std::vector<const void*>& in, const std::vector<double>& w,
                      double sw, Nans nans) {
  const int k = static_cast<int>(in.size());
  Bytes got(x.size());
  ASSERT_EQ(HostWeightedSum(got.data(), x.data(), sw, in.data(), w.data(), k, n, static_cast<int>(d)), 0);
  ASSERT_EQ(DifferenceFromCpu(got, Bytes(x.size()), d, nans,
                              [&](Bytes& out) {
                                ops::WeightedSum(out.data(), x.data(), sw, in.data(), w.data(), k, n, d);
                              }),
            "")
      << Where(d, n) << " k=" << k << " sw=" << sw;
  got = x;  // out == x
  ASSERT_EQ(HostWeightedSum(got.data(), got.data(), sw, in.data(), w.data(), k, n, static_cast<int>(d)), 0);
  ASSERT_EQ(DifferenceFromCpu(got, x, d, nans,
                              [&](Bytes& out) {
                                ops::WeightedSum(out.data(), out.data(), sw, in.data(), w.data(), k, n, d);
                              }),
            "")
      << Where(d, n) << " aliased k=" << k << " sw=" << sw;
}

TEST(DeviceKernels, WeightedSumMatchesCpu) {
  std::mt19937_64 rng(3);
  const int ks[] = {0, 1, 3, 32};
  const double self_weights[] = {1.0, 0.5, -0.3, 0.0, 2.0, 1e10};
  // 1.0 (no rounding of w * x), fractions, negatives, a large one (saturation).
  const double weights[] = {1.0, 0.25, 1.0 / 3.0, -1.5, 0.1, 1e12, -2.0};
  for (DType d : kAllDTypes) {
    for (size_t n : kSizes) {
      for (int k : ks) {
        for (bool input_nans : {false, true}) {  // NaNs in x only (exact), or everywhere
          const Bytes x = RandomBuffer(d, n, rng);
          std::vector<Bytes> inputs;
          std::vector<const void*> in;
          std::vector<double> w;
          for (int j = 0; j < k; ++j) inputs.push_back(RandomBuffer(d, n, rng, input_nans));
          for (int j = 0; j < k; ++j) {
            in.push_back(inputs[j].data());
            w.push_back(weights[rng() % 7]);
          }
          for (double sw : self_weights) {
            ASSERT_NO_FATAL_FAILURE(CheckWeightedSum(d, n, x, in, w, sw, input_nans ? Nans::kAnyPayload : Nans::kExact));
          }
        }
      }
    }
  }
}

// The CUDA plugin's launcher for aligned buffers, on the host: WeightedSumFn::Packed for
// every whole 16-byte pack, then one element at a time.
struct PackedLaunch {
  template <class Codec>
  int operator()(const WeightedSumFn<Codec>& fn, size_t n) const {
    const size_t count = Pack16<typename Codec::Storage>::kCount, packs = n / count;
    for (size_t p = 0; p < packs; ++p) fn.Packed(p);
    for (size_t i = packs * count; i < n; ++i) fn(i);
    return kOk;
  }
};

// Packed must give every element's bits exactly as the one-element code (NaN payloads
// included: the same operations in the same order), out apart from x and out == x.
TEST(DeviceKernels, WeightedSumPackedMatchesOneElementAtATime) {
  std::mt19937_64 rng(6);
  const double weights[] = {0.25, 1.0 / 3.0, -1.5, 0.1, 1e12, -2.0, 1.0};
  for (DType d : kAllDTypes) {
    for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1025}, size_t{4099}}) {
      for (int k : {0, 1, 3, 32}) {
        const Bytes x = RandomBuffer(d, n, rng);
        std::vector<Bytes> inputs;
        std::vector<const void*> in;
        std::vector<double> w;
        for (int j = 0; j < k; ++j) inputs.push_back(RandomBuffer(d, n, rng));
        for (int j = 0; j < k; ++j) {
          in.push_back(inputs[j].data());
          w.push_back(weights[rng() % 7]);
        }
        for (double sw : {1.0, 0.3}) {
          for (bool in_place : {false, true}) {
            // The reference in the same aliasing: apart, sw == 1 still multiplies (a
            // signaling NaN comes out quiet), in place it does not.
            Bytes want = x, want_apart(x.size()), got = x, out(x.size());
            ASSERT_EQ(HostWeightedSum(in_place ? want.data() : want_apart.data(), want.data(), sw, in.data(), w.data(),
                                      k, n, static_cast<int>(d)),
                      0);
            if (!in_place) want = want_apart;
            void* target = in_place ? got.data() : out.data();
            std::vector<const void*> buffers = in;
            buffers.push_back(got.data());
            buffers.push_back(out.data());
            for (const void* p : buffers)
              ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << "the packs need 16-byte aligned buffers";
            ASSERT_EQ(DispatchWeightedSum(PackedLaunch{}, target, got.data(), sw, in.data(), w.data(), k, n,
                                          static_cast<int>(d)),
                      kOk);
            ASSERT_EQ(std::memcmp(target, want.data(), want.size()), 0)
                << Where(d, n) << " k=" << k << " sw=" << sw << (in_place ? " out == x" : "");
          }
        }
      }
    }
  }
}

// Weights that make NaN (inf * 0) and infinities: integers get 0 and saturate.
TEST(DeviceKernels, WeightedSumSpecialWeights) {
  std::mt19937_64 rng(4);
  const double inf = HUGE_VAL, nan = std::nan("");
  const double weights[][2] = {{inf, 1.0}, {-inf, 0.0}, {nan, 1.0}, {0.0, nan}, {1e308, 1e308}, {-0.0, -0.0}};
  for (DType d : kAllDTypes) {
    const size_t n = 1025;
    const Bytes x = RandomBuffer(d, n, rng), y = RandomBuffer(d, n, rng);
    for (const auto& sw_w : weights) {
      ASSERT_NO_FATAL_FAILURE(CheckWeightedSum(d, n, x, {y.data()}, {sw_w[1]}, sw_w[0], Nans::kAnyPayload));
    }
  }
}

// ---------------------------------------------------------------- conversions

TEST(DeviceKernels, SixteenBitConversionsMatchHalfH) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto v = static_cast<uint16_t>(h);
    ASSERT_EQ(FloatBits(kernels::HalfToFloat(v)), FloatBits(starling::HalfToFloat(v))) << std::hex << h;
    ASSERT_EQ(FloatBits(kernels::BFloat16ToFloat(v)), FloatBits(starling::BFloat16ToFloat(v))) << std::hex << h;
  }
  // Every exponent and sign (the high 16 bits) with low halves around the rounding
  // points of both formats (ties, one either side, odd kept bits), plus random ones.
  std::mt19937_64 rng(5);
  const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2fff, 0x3000,
                           0x3001, 0x7fff, 0x8000, 0x8001, 0x9000, 0xb000, 0xffff};
  for (uint32_t hi = 0; hi <= 0xffff; ++hi) {
    for (int r = 0; r < 20; ++r) {
      const uint32_t low = r < 16 ? lows[r] : static_cast<uint32_t>(rng() & 0xffff);
      const float f = FloatFromBits(hi << 16 | low);
      ASSERT_EQ(kernels::FloatToHalf(f), starling::FloatToHalf(f)) << std::hex << (hi << 16 | low);
      ASSERT_EQ(kernels::FloatToBFloat16(f), starling::FloatToBFloat16(f)) << std::hex << (hi << 16 | low);
    }
  }
}

template <typename D, typename S>
Bytes Cast(const Bytes& src, D (*conv)(S)) {
  const size_t n = src.size() / sizeof(S);
  Bytes out(n * sizeof(D));
  for (size_t i = 0; i < n; ++i) {
    S s;
    std::memcpy(&s, src.data() + i * sizeof(S), sizeof(S));
    const D d = conv(s);
    std::memcpy(out.data() + i * sizeof(D), &d, sizeof(D));
  }
  return out;
}

TEST(DeviceKernels, ConvertMatchesReference) {
  std::mt19937_64 rng(6);
  struct Case {
    DType dst, src;
    Bytes (*reference)(const Bytes&);
  };
  const Case cases[] = {
      {DType::kFloat32, DType::kFloat16, [](const Bytes& s) { return Cast<float, uint16_t>(s, starling::HalfToFloat); }},
      {DType::kFloat16, DType::kFloat32, [](const Bytes& s) { return Cast<uint16_t, float>(s, starling::FloatToHalf); }},
      {DType::kFloat32, DType::kBFloat16,
       [](const Bytes& s) { return Cast<float, uint16_t>(s, starling::BFloat16ToFloat); }},
      {DType::kBFloat16, DType::kFloat32,
       [](const Bytes& s) { return Cast<uint16_t, float>(s, starling::FloatToBFloat16); }},
      {DType::kInt32, DType::kInt16,
       [](const Bytes& s) { return Cast<int32_t, int16_t>(s, [](int16_t v) { return static_cast<int32_t>(v); }); }},
      {DType::kInt16, DType::kInt32,
       [](const Bytes& s) { return Cast<int16_t, int32_t>(s, [](int32_t v) { return static_cast<int16_t>(v); }); }},
  };
  for (size_t n : kSizes) {
    for (const Case& c : cases) {
      const Bytes src = RandomBuffer(c.src, n, rng);
      Bytes got(n * DTypeSize(c.dst));
      ASSERT_EQ(HostConvert(got.data(), static_cast<int>(c.dst), src.data(), static_cast<int>(c.src), n), 0);
      ASSERT_EQ(FirstDifference(got, c.reference(src), DTypeSize(c.dst)), "")
          << DTypeName(c.src) << " -> " << Where(c.dst, n);
    }
    for (DType d : kAllDTypes) {  // equal dtypes: a bit copy (signaling NaNs stay so)
      const Bytes src = RandomBuffer(d, n, rng);
      Bytes got(src.size());
      ASSERT_EQ(HostConvert(got.data(), static_cast<int>(d), src.data(), static_cast<int>(d), n), 0);
      ASSERT_EQ(FirstDifference(got, src, DTypeSize(d)), "") << Where(d, n);
    }
  }
}

// ---------------------------------------------------------------- errors

TEST(DeviceKernels, ErrorsReturnNonzero) {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
  const int f32 = static_cast<int>(DType::kFloat32), sum = static_cast<int>(ReduceOp::kSum);
  EXPECT_NE(HostReduce(a, b, 4, 9, sum), 0);
  EXPECT_NE(HostReduce(a, b, 4, -1, sum), 0);
  EXPECT_NE(HostReduce(a, b, 4, f32, 4), 0);
  EXPECT_NE(HostReduce(a, b, 0, f32, 4), 0);  // bad op even with nothing to do
  EXPECT_NE(HostReduce(nullptr, b, 4, f32, sum), 0);
  EXPECT_EQ(HostReduce(nullptr, nullptr, 0, f32, sum), 0);
  EXPECT_NE(HostDivide(a, 4, static_cast<int>(DType::kInt32), 2.0), 0);
  EXPECT_NE(HostDivide(a, 4, 42, 2.0), 0);
  EXPECT_NE(HostDivide(nullptr, 4, f32, 2.0), 0);

  std::vector<const void*> in(STARLING_DEVICE_MAX_INPUTS + 1, b);
  std::vector<double> w(STARLING_DEVICE_MAX_INPUTS + 1, 0.5);
  EXPECT_EQ(HostWeightedSum(a, a, 1.0, in.data(), w.data(), STARLING_DEVICE_MAX_INPUTS, 4, f32), 0);
  EXPECT_NE(HostWeightedSum(a, a, 1.0, in.data(), w.data(), STARLING_DEVICE_MAX_INPUTS + 1, 4, f32), 0);
  EXPECT_NE(HostWeightedSum(a, a, 1.0, in.data(), w.data(), -1, 4, f32), 0);
  EXPECT_NE(HostWeightedSum(a, a, 1.0, in.data(), w.data(), 1, 4, 9), 0);
  EXPECT_NE(HostWeightedSum(a, a, 1.0, nullptr, w.data(), 1, 4, f32), 0);
  EXPECT_NE(HostWeightedSum(a, a, 1.0, in.data(), nullptr, 1, 4, f32), 0);
  in[0] = nullptr;
  EXPECT_NE(HostWeightedSum(a, a, 1.0, in.data(), w.data(), 1, 4, f32), 0);
  a[3] = 4.0f;
  EXPECT_EQ(HostWeightedSum(a, a, 2.0, nullptr, nullptr, 0, 4, f32), 0);
  EXPECT_EQ(a[3], 8.0f);

  const int f16 = static_cast<int>(DType::kFloat16), f64 = static_cast<int>(DType::kFloat64);
  const int i8 = static_cast<int>(DType::kInt8), i32 = static_cast<int>(DType::kInt32);
  EXPECT_NE(HostConvert(a, f64, b, f32, 2), 0);  // not one of the conversions
  EXPECT_NE(HostConvert(a, f16, b, static_cast<int>(DType::kBFloat16), 2), 0);
  EXPECT_NE(HostConvert(a, i32, b, i8, 2), 0);
  EXPECT_NE(HostConvert(a, 11, b, f32, 2), 0);
  EXPECT_NE(HostConvert(nullptr, f32, b, f32, 2), 0);
}

// ---------------------------------------------------------------- the GPU's NaN rule

// The device code computes a NaN result with CUDA (canonical 0x7fffffff) and repairs it
// with NanLikeX86; check that rule against this x86 host's own float arithmetic.
#if defined(__x86_64__)
TEST(DeviceKernels, NanRuleMatchesX86) {
  std::mt19937_64 rng(7);
  auto canonical = [](float r) { return r == r ? r : FloatFromBits(0x7fffffffu); };
  auto canonical64 = [](double r) { return r == r ? r : DoubleFromBits(0x7fffffffffffffffull); };
  for (int t = 0; t < 200000; ++t) {
    volatile float a = FloatFromBits(RandomFloatBits<float, uint32_t>(rng));
    volatile float b = FloatFromBits(RandomFloatBits<float, uint32_t>(rng));
    const float x = a, y = b;
    ASSERT_EQ(FloatBits(NanLikeX86(canonical(x + y), x, y)), FloatBits(a + b)) << std::hex << FloatBits(x) << " + " << FloatBits(y);
    ASSERT_EQ(FloatBits(NanLikeX86(canonical(x * y), x, y)), FloatBits(a * b));
    ASSERT_EQ(FloatBits(NanLikeX86(canonical(x / y), x, y)), FloatBits(a / b));
    volatile double c = DoubleFromBits(RandomFloatBits<double, uint64_t>(rng));
    volatile double e = DoubleFromBits(RandomFloatBits<double, uint64_t>(rng));
    const double u = c, v = e;
    ASSERT_EQ(DoubleBits(NanLikeX86(canonical64(u + v), u, v)), DoubleBits(c + e));
    ASSERT_EQ(DoubleBits(NanLikeX86(canonical64(u * v), u, v)), DoubleBits(c * e));
    ASSERT_EQ(DoubleBits(NanLikeX86(canonical64(u / v), u, v)), DoubleBits(c / e));
  }
}
#endif

}  // namespace
}  // namespace starling::device::kernels
