// Compressors: how a tensor of doubles becomes a compact byte string and back. The
// encoded size depends only on the compressor and the element count, so every rank
// knows every peer's message size in advance (it is part of the call's signature).
// Decoding is deterministic: all ranks decode the same bytes to the same doubles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "impl/common/dtype.h"

namespace starling::compress {

enum class Kind : uint8_t { kNone = 0, kFloat16 = 1, kBFloat16 = 2, kTopK = 3, kRandomK = 4, kSign = 5 };
const char* KindName(Kind kind);  // "float16", "top-k", ...

// The C options, copied and checked (Spec::Check) on the caller's thread.
struct Spec {
  Kind kind = Kind::kNone;
  int64_t k = 0;        // 0: use ratio
  double ratio = 0.0;
  uint64_t seed = 0;
  bool error_feedback = false;
  double gamma = 1.0;
};

// A compressor bound to one tensor's dtype and element count.
class Codec {
 public:
  // Throws kUnsupported (not a floating dtype) or kInvalidArgument (k, ratio, size).
  Codec(const Spec& spec, DType dtype, size_t numel);

  Kind kind() const { return kind_; }
  size_t numel() const { return numel_; }
  size_t k() const { return k_; }           // elements kept (top-k, random-k)
  size_t bytes() const { return bytes_; }   // encoded size
  // "top-k k=10", for messages.
  std::string Describe() const;

  // `stream` identifies one call (random-k's indices derive from it; see StreamId).
  void Encode(const double* values, uint64_t stream, char* out) const;
  // acc[i] += scale * decoded[i] (scale -1 turns a value into its residual).
  void DecodeAdd(const char* in, uint64_t stream, double* acc, double scale = 1.0) const;
  // What ranks must agree on for one call: kind, k, and random-k's stream.
  uint32_t Fingerprint(uint64_t stream) const;

 private:
  size_t ValueBytes() const { return wide_ ? 8 : 4; }

  Kind kind_;
  size_t numel_;
  size_t k_ = 0;
  size_t bytes_ = 0;
  bool wide_;  // top-k / random-k values as float64 (float64 tensors)
};

// random-k's stream for (seed, name, step): equal on every rank for the same call.
uint64_t StreamId(uint64_t seed, const std::string& name, uint64_t step);

// The k distinct indices random-k keeps for `stream`, ascending.
void RandomIndices(uint64_t stream, size_t numel, size_t k, uint32_t* out);

}  // namespace starling::compress
