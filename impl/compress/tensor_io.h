// Floating-point tensors as float64 vectors: the compressors' working precision.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "impl/common/tensor.h"

namespace starling::compress {

// double -> float rounded to odd: a later rounding to float16 or bfloat16 (which keep
// at most 11 of float's 24 bits) then gives the correctly rounded result of the double;
// rounding to nearest twice could land one unit off on halfway cases.
inline float ToFloatRoundToOdd(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) bits -= 1;  // toward zero
  bits |= 1u;                                                        // then odd
  std::memcpy(&f, &bits, 4);
  return f;
}

// dst[i] = double(t[i]) for a float16/bfloat16/float32/float64 tensor.
void LoadDoubles(const TensorView& t, double* dst);
// t[i] = src[i] rounded to t's dtype (to nearest).
void StoreDoubles(const double* src, const TensorView& t);

}  // namespace starling::compress
