#include "impl/compress/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "impl/common/error.h"
#include "impl/common/half.h"
#include "impl/compress/tensor_io.h"

namespace starling::compress {
namespace {

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) (multiply-shift; the bias is below 2^-32 for any tensor size).
uint64_t Below(uint64_t& state, uint64_t bound) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(SplitMix(state)) * bound) >> 64);
}

float SaturateToHalfRange(double v) {
  constexpr double kMax = 65504.0;
  return ToFloatRoundToOdd(v > kMax ? kMax : (v < -kMax ? -kMax : v));  // NaN passes through
}

void PutValue(char* at, double v, bool wide) {
  if (wide) {
    std::memcpy(at, &v, 8);
  } else {
    const float f = static_cast<float>(v);
    std::memcpy(at, &f, 4);
  }
}

double GetValue(const char* at, bool wide) {
  if (wide) {
    double v;
    std::memcpy(&v, at, 8);
    return v;
  }
  float f;
  std::memcpy(&f, at, 4);
  return f;
}

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kFloat16: return "float16";
    case Kind::kBFloat16: return "bfloat16";
    case Kind::kTopK: return "top-k";
    case Kind::kRandomK: return "random-k";
    case Kind::kSign: return "sign";
  }
  return "unknown";
}

Codec::Codec(const Spec& spec, DType dtype, size_t numel)
    : kind_(spec.kind), numel_(numel), wide_(dtype == DType::kFloat64) {
  STARLING_CHECK(IsFloating(dtype), Code::kUnsupported, KindName(kind_), " compression needs a floating-point tensor ",
                 "(float16, bfloat16, float32, float64), got ", DTypeName(dtype),
                 "; send integer tensors uncompressed");
  switch (kind_) {
    case Kind::kFloat16:
    case Kind::kBFloat16:
      bytes_ = numel * 2;
      break;
    case Kind::kTopK:
    case Kind::kRandomK: {
      STARLING_CHECK_ARG(numel <= std::numeric_limits<uint32_t>::max(), KindName(kind_),
                         " indexes elements with 32 bits; the tensor has ", numel, " elements");
      if (spec.k != 0) {
        STARLING_CHECK_ARG(spec.k >= 1 && static_cast<uint64_t>(spec.k) <= numel, KindName(kind_), ": k = ", spec.k,
                           " is out of range for a tensor of ", numel, " elements (1 <= k <= ", numel, ")");
        k_ = static_cast<size_t>(spec.k);
      } else {
        k_ = std::min(numel, static_cast<size_t>(std::ceil(spec.ratio * static_cast<double>(numel))));
      }
      bytes_ = k_ * ValueBytes() + (kind_ == Kind::kTopK ? k_ * 4 : 0);
      break;
    }
    case Kind::kSign:
      bytes_ = 8 + (numel + 7) / 8;
      break;
    case Kind::kNone:
      throw Error(Code::kInternal, "a codec for no compression");
  }
}

std::string Codec::Describe() const {
  if (kind_ == Kind::kTopK || kind_ == Kind::kRandomK) return Str(KindName(kind_), " k=", k_);
  return KindName(kind_);
}

void Codec::Encode(const double* v, uint64_t stream, char* out) const {
  const size_t n = numel_;
  switch (kind_) {
    case Kind::kFloat16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = FloatToHalf(SaturateToHalfRange(v[i]));
      break;
    }
    case Kind::kBFloat16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = FloatToBFloat16(ToFloatRoundToOdd(v[i]));
      break;
    }
    case Kind::kTopK: {
      // Largest magnitude first; ties go to the lower index, so the set is unique.
      std::vector<uint32_t> order(n);
      std::iota(order.begin(), order.end(), 0u);
      // NaN counts as infinitely large, so it is sent (and error feedback cannot hide it).
      auto magnitude = [v](uint32_t i) {
        return std::isnan(v[i]) ? std::numeric_limits<double>::infinity() : std::fabs(v[i]);
      };
      auto before = [&magnitude](uint32_t a, uint32_t b) {
        const double x = magnitude(a), y = magnitude(b);
        return x > y || (x == y && a < b);
      };
      if (k_ < n) std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k_), order.end(), before);
      std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k_));
      for (size_t j = 0; j < k_; ++j) {
        std::memcpy(out + j * 4, &order[j], 4);
        PutValue(out + k_ * 4 + j * ValueBytes(), v[order[j]], wide_);
      }
      break;
    }
    case Kind::kRandomK: {
      std::vector<uint32_t> index(k_);
      RandomIndices(stream, n, k_, index.data());
      for (size_t j = 0; j < k_; ++j) PutValue(out + j * ValueBytes(), v[index[j]], wide_);
      break;
    }
    case Kind::kSign: {
      double total = 0.0;
      for (size_t i = 0; i < n; ++i) total += std::fabs(v[i]);
      const double scale = n == 0 ? 0.0 : total / static_cast<double>(n);
      std::memcpy(out, &scale, 8);
      uint8_t* bits = reinterpret_cast<uint8_t*>(out + 8);
      std::memset(bits, 0, (n + 7) / 8);
      for (size_t i = 0; i < n; ++i)
        if (std::signbit(v[i])) bits[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
      break;
    }
    case Kind::kNone:
      break;
  }
}

void Codec::DecodeAdd(const char* in, uint64_t stream, double* acc, double scale) const {
  const size_t n = numel_;
  switch (kind_) {
    case Kind::kFloat16: {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        acc[i] += scale * HalfToFloat(h);
      }
      break;
    }
    case Kind::kBFloat16: {
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        acc[i] += scale * BFloat16ToFloat(h);
      }
      break;
    }
    case Kind::kTopK: {
      for (size_t j = 0; j < k_; ++j) {
        uint32_t i;
        std::memcpy(&i, in + j * 4, 4);
        // A peer's bytes are trusted only as far as bounds: a bad index is dropped.
        if (i < n) acc[i] += scale * GetValue(in + k_ * 4 + j * ValueBytes(), wide_);
      }
      break;
    }
    case Kind::kRandomK: {
      std::vector<uint32_t> index(k_);
      RandomIndices(stream, n, k_, index.data());
      for (size_t j = 0; j < k_; ++j) acc[index[j]] += scale * GetValue(in + j * ValueBytes(), wide_);
      break;
    }
    case Kind::kSign: {
      double magnitude;
      std::memcpy(&magnitude, in, 8);
      magnitude *= scale;
      const uint8_t* bits = reinterpret_cast<const uint8_t*>(in + 8);
      for (size_t i = 0; i < n; ++i) acc[i] += ((bits[i >> 3] >> (i & 7)) & 1u) ? -magnitude : magnitude;
      break;
    }
    case Kind::kNone:
      break;
  }
}

uint32_t Codec::Fingerprint(uint64_t stream) const {
  uint64_t state = static_cast<uint64_t>(kind_) * 0x100000001b3ull ^ (static_cast<uint64_t>(k_) << 8);
  if (kind_ == Kind::kRandomK) state ^= stream * 0x9e3779b97f4a7c15ull;
  const uint64_t h = SplitMix(state);
  return static_cast<uint32_t>(h ^ (h >> 32));
}

uint64_t StreamId(uint64_t seed, const std::string& name, uint64_t step) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  uint64_t state = seed ^ (h * 0x9e3779b97f4a7c15ull);
  uint64_t mixed = SplitMix(state);
  state = mixed ^ step;
  return SplitMix(state);
}

void RandomIndices(uint64_t stream, size_t numel, size_t k, uint32_t* out) {
  if (k == 0) return;
  if (k == numel) {
    std::iota(out, out + k, 0u);
    return;
  }
  // Floyd's sampling: k distinct indices, each subset equally likely, in O(k) draws.
  std::vector<uint64_t> taken((numel + 63) / 64, 0);
  auto test_and_set = [&](size_t i) {
    const uint64_t bit = uint64_t{1} << (i & 63);
    const bool was = (taken[i >> 6] & bit) != 0;
    taken[i >> 6] |= bit;
    return was;
  };
  uint64_t state = stream;
  for (size_t j = numel - k; j < numel; ++j) {
    const size_t t = static_cast<size_t>(Below(state, j + 1));
    if (test_and_set(t)) test_and_set(j);
  }
  size_t w = 0;
  for (size_t word = 0; word < taken.size(); ++word)
    for (uint64_t bits = taken[word]; bits != 0; bits &= bits - 1)
      out[w++] = static_cast<uint32_t>(word * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
}

}  // namespace starling::compress
