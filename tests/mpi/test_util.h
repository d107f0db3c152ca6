// Helpers for the MPI tests: a context per test, tensors over std::vector storage, and
// deterministic per-rank data every rank can recompute for its references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <starling/starling.h>

namespace starling_test {

#define ASSERT_OK(call)                                                                   \
  do {                                                                                    \
    starling_status_t s_ = (call);                                                        \
    ASSERT_EQ(s_, STARLING_SUCCESS) << #call << ": " << starling_last_error();            \
  } while (0)
#define EXPECT_OK(call)                                                                   \
  do {                                                                                    \
    starling_status_t s_ = (call);                                                        \
    EXPECT_EQ(s_, STARLING_SUCCESS) << #call << ": " << starling_last_error();            \
  } while (0)
// Expects `status` and a last-error message containing `fragment`.
#define EXPECT_ERROR(call, status, fragment)                                              \
  do {                                                                                    \
    starling_status_t s_ = (call);                                                        \
    EXPECT_EQ(s_, (status)) << #call << ": " << starling_last_error();                    \
    EXPECT_NE(std::string(starling_last_error()).find(fragment), std::string::npos)       \
        << #call << ": message was: " << starling_last_error();                           \
  } while (0)

// Owns a topology handle; Matrix() gives its dense weights.
struct Topo {
  starling_topology_t t = nullptr;
  Topo() = default;
  explicit Topo(starling_topology_t raw) : t(raw) {}
  Topo(const Topo&) = delete;
  ~Topo() {
    if (t) starling_topology_free(t);
  }
  // Dense W[src][dst].
  std::vector<std::vector<double>> Matrix(int size) const {
    int n = 0;
    starling_topology_num_edges(t, &n);
    std::vector<int> src(n), dst(n);
    std::vector<double> w(n);
    starling_topology_edges(t, src.data(), dst.data(), w.data(), n);
    std::vector<std::vector<double>> m(size, std::vector<double>(size, 0.0));
    for (int e = 0; e < n; ++e) m[src[e]][dst[e]] = w[e];
    return m;
  }
};

// A context created in SetUp and destroyed in TearDown.
class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(starling_context_create(nullptr, &ctx));
    ASSERT_OK(starling_rank(ctx, &rank));
    ASSERT_OK(starling_size(ctx, &size));
  }
  void TearDown() override {
    if (ctx) EXPECT_OK(starling_context_destroy(ctx));
  }
  starling_context_t ctx = nullptr;
  int rank = 0;
  int size = 1;
};

enum class Kind { kF16, kBF16, kF32, kF64, kI8, kI16, kI32, kI64, kU8 };
inline const char* KindName(Kind k) {
  static const char* names[] = {"float16", "bfloat16", "float32", "float64", "int8",
                                "int16",   "int32",    "int64",   "uint8"};
  return names[static_cast<int>(k)];
}
inline DLDataType DLType(Kind k) {
  switch (k) {
    case Kind::kF16: return {kDLFloat, 16, 1};
    case Kind::kBF16: return {kDLBfloat, 16, 1};
    case Kind::kF32: return {kDLFloat, 32, 1};
    case Kind::kF64: return {kDLFloat, 64, 1};
    case Kind::kI8: return {kDLInt, 8, 1};
    case Kind::kI16: return {kDLInt, 16, 1};
    case Kind::kI32: return {kDLInt, 32, 1};
    case Kind::kI64: return {kDLInt, 64, 1};
    case Kind::kU8: return {kDLUInt, 8, 1};
  }
  return {kDLFloat, 32, 1};
}
inline size_t KindSize(Kind k) { return DLType(k).bits / 8; }
inline bool IsFloat(Kind k) { return k == Kind::kF16 || k == Kind::kBF16 || k == Kind::kF32 || k == Kind::kF64; }
constexpr Kind kAllKinds[] = {Kind::kF16, Kind::kBF16, Kind::kF32, Kind::kF64, Kind::kI8,
                              Kind::kI16, Kind::kI32,  Kind::kI64, Kind::kU8};

// Independent float16/bfloat16 encoders for the tests (round to nearest even).
inline uint16_t EncodeBF16(double value) {
  float f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
inline double DecodeBF16(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline double DecodeF16(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v;
  if (exponent == 0) v = std::ldexp(mantissa, -24);
  else if (exponent == 31) v = mantissa ? NAN : INFINITY;
  else v = std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -v : v;
}
inline uint16_t EncodeF16(double value) {
  // Exhaustive nearest search is too slow; values in tests are exactly representable
  // (multiples of 1/64 below 64) so a direct construction suffices.
  uint16_t best = 0;
  double best_err = INFINITY;
  const int sign = value < 0;
  const double a = std::fabs(value);
  for (int e = 0; e < 31; ++e) {
    const double scale = e == 0 ? std::ldexp(1.0, -24) : std::ldexp(1.0, e - 25);
    const double base = e == 0 ? 0 : 1024;
    double m = std::nearbyint(a / scale - base);
    if (m < 0 || m > 1023) continue;
    const double err = std::fabs((base + m) * scale - a);
    if (err < best_err) {
      best_err = err;
      best = static_cast<uint16_t>((e << 10) | static_cast<int>(m));
    }
  }
  return static_cast<uint16_t>(best | (sign << 15));
}

// A typed buffer with a DLTensor view.
struct Buffer {
  Kind kind;
  std::vector<int64_t> shape;
  std::vector<uint64_t> storage;  // 8-byte aligned
  DLTensor t{};

  Buffer(Kind k, std::vector<int64_t> s) : kind(k), shape(std::move(s)) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    storage.assign((n * KindSize(k) + 7) / 8 + 1, 0);
    t.data = storage.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = DLType(k);
    t.shape = shape.data();
    t.strides = nullptr;
    t.byte_offset = 0;
  }
  Buffer(const Buffer&) = delete;
  size_t numel() const {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }
  char* bytes() { return reinterpret_cast<char*>(storage.data()); }
  double get(size_t i) const {
    const char* p = reinterpret_cast<const char*>(storage.data()) + i * KindSize(kind);
    switch (kind) {
      case Kind::kF16: { uint16_t v; std::memcpy(&v, p, 2); return DecodeF16(v); }
      case Kind::kBF16: { uint16_t v; std::memcpy(&v, p, 2); return DecodeBF16(v); }
      case Kind::kF32: { float v; std::memcpy(&v, p, 4); return v; }
      case Kind::kF64: { double v; std::memcpy(&v, p, 8); return v; }
      case Kind::kI8: return static_cast<int8_t>(*p);
      case Kind::kI16: { int16_t v; std::memcpy(&v, p, 2); return v; }
      case Kind::kI32: { int32_t v; std::memcpy(&v, p, 4); return v; }
      case Kind::kI64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
      case Kind::kU8: return static_cast<uint8_t>(*p);
    }
    return 0;
  }
  void set(size_t i, double value) {
    char* p = bytes() + i * KindSize(kind);
    switch (kind) {
      case Kind::kF16: { uint16_t v = EncodeF16(value); std::memcpy(p, &v, 2); break; }
      case Kind::kBF16: { uint16_t v = EncodeBF16(value); std::memcpy(p, &v, 2); break; }
      case Kind::kF32: { float v = static_cast<float>(value); std::memcpy(p, &v, 4); break; }
      case Kind::kF64: std::memcpy(p, &value, 8); break;
      case Kind::kI8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(value); break;
      case Kind::kI16: { int16_t v = static_cast<int16_t>(value); std::memcpy(p, &v, 2); break; }
      case Kind::kI32: { int32_t v = static_cast<int32_t>(value); std::memcpy(p, &v, 4); break; }
      case Kind::kI64: { int64_t v = static_cast<int64_t>(value); std::memcpy(p, &v, 8); break; }
      case Kind::kU8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(value); break;
    }
  }
};

// Deterministic test value of element i on rank r: small multiples of 1/8 for floats
// (exact in every float type), small integers for integer types (no overflow when
// summed over 4 ranks, uint8 stays non-negative).
inline double Value(Kind k, int r, size_t i, int salt = 0) {
  const uint64_t h = (i * 2654435761u + static_cast<uint64_t>(r) * 40503u + static_cast<uint64_t>(salt) * 97u) % 64;
  if (k == Kind::kU8) return static_cast<double>(h % 50);
  if (!IsFloat(k)) return static_cast<double>(static_cast<int>(h % 41) - 20);
  return (static_cast<double>(h) - 31.0) / 8.0;
}

// Element i of op over every rank's Value(k, r, i, salt), in float64 (the reference
// for allreduce and reduce_scatter).
inline double ReducedValue(Kind k, starling_reduce_op_t op, int size, size_t i, int salt) {
  double acc = Value(k, 0, i, salt);
  for (int r = 1; r < size; ++r) {
    const double v = Value(k, r, i, salt);
    if (op == STARLING_SUM || op == STARLING_AVERAGE) acc += v;
    if (op == STARLING_MIN) acc = std::min(acc, v);
    if (op == STARLING_MAX) acc = std::max(acc, v);
  }
  return op == STARLING_AVERAGE ? acc / size : acc;
}

// Tolerance for comparing against a float64 reference of magnitude `scale`.
inline double Tolerance(Kind k, double scale) {
  switch (k) {
    case Kind::kF16: return 2e-3 * scale + 1e-3;
    case Kind::kBF16: return 1.6e-2 * scale + 1e-2;
    case Kind::kF32: return 1e-6 * scale;
    case Kind::kF64: return 1e-12 * scale;
    default: return 0;  // integers: exact
  }
}

// Overwrites a window's tensor with its buffer for `source` (weight 1, self 0): the
// only way to read a buffer through the API. Resets every version to 0.
// Update arguments that weigh this rank's tensor by self_weight and one in-neighbor's
// buffer, *source's, by *weight (the arguments keep the two pointers).
inline starling_window_update_args_t OneSourceUpdate(const int* source, const double* weight, double self_weight) {
  starling_window_update_args_t u = STARLING_WINDOW_UPDATE_ARGS_INIT;
  u.use_weights = 1;
  u.self_weight = self_weight;
  u.num_ranks = 1;
  u.ranks = source;
  u.weights = weight;
  return u;
}

inline void ReadBuffer(starling_window_t win, int source) {
  const double one = 1.0;
  const starling_window_update_args_t u = OneSourceUpdate(&source, &one, 0.0);
  EXPECT_OK(starling_window_update(win, &u));
}

}  // namespace starling_test
