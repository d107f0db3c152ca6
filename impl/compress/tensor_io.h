// Floating-point tensors as float64 vectors: the compressors' working precision.
#pragma once

#include <vector>

#include "impl/common/tensor.h"

namespace starling::compress {

// dst[i] = double(t[i]) for a float16/bfloat16/float32/float64 tensor.
void LoadDoubles(const TensorView& t, double* dst);
// t[i] = src[i] rounded to t's dtype (to nearest).
void StoreDoubles(const double* src, const TensorView& t);

}  // namespace starling::compress
