// Element-wise reduction kernels behind every Starling operation (allreduce,
// neighbor averaging, window accumulation).
//
// Arithmetic rules, for all functions below:
//  * float32 and float64 compute in their own type; float16 and bfloat16 are widened
//    to float32, combined, and rounded back once (round-to-nearest-even).
//  * Weights and factors are cast to float for float32/float16/bfloat16 and used as
//    double for float64.
//  * Integer sums in Reduce wrap around (two's complement). Weighted integer results
//    are computed in double, rounded to nearest with ties away from zero (std::llround)
//    and saturated to the dtype's range; NaN becomes 0.
//  * Min/max propagate NaN: if either operand is NaN the result is NaN. +0 and -0
//    compare equal, so either may be returned.
//  * Pointers may be unaligned. Unless a function says otherwise, buffers must not
//    overlap; where aliasing is allowed it means the very same pointer.
//  * n == 0 is a no-op (pointers may then be null).
//
// Errors throw starling::Error(kInvalidArgument): unknown dtype or op, an integer
// dtype for Divide, null buffers with n > 0, k < 0, and overlaps other than the
// allowed exact aliasing (checked per call, from the pointers and n).
//
// Speed: the loops are written for GCC's auto-vectorizer at -O3 (the Release default).
// GCC 12 at -O2 vectorizes none of them (its "very cheap" cost model); add -O3 or
// -fvect-cost-model=dynamic for impl/ops when building with -O2.
#pragma once

#include <cstddef>

#include "impl/common/dtype.h"

namespace starling::ops {

// dst[i] = op(dst[i], src[i]). kAverage is treated as kSum: callers divide at the end.
void Reduce(void* dst, const void* src, size_t n, DType dtype, ReduceOp op);

// out[i] = op(a[i], b[i]). out may be a or b (or both).
void Reduce3(void* out, const void* a, const void* b, size_t n, DType dtype, ReduceOp op);

// data[i] /= divisor, floating dtypes only (float32 divides by float(divisor)). A true
// division, not a multiplication by 1/divisor, so float32/float64 results equal NumPy's
// sum / size bit for bit. (Power-of-two divisors do multiply by the exact reciprocal:
// same bits, cheaper.)
void Divide(void* data, size_t n, DType dtype, double divisor);

// out = self_weight * x + sum_{j<k} w[j] * in[j], accumulated in order j = 0..k-1.
// k may be 0 (in and w may then be null). out may be x, not any in[j].
void WeightedSum(void* out, const void* x, double self_weight, const void* const* in,
                 const double* w, int k, size_t n, DType dtype);

// out = (x + in[0] + ... + in[k-1]) / (k + 1): summed in that order, then divided once.
// Integers: the exact sum, divided and rounded to nearest (ties away from zero).
// out may be x, not any in[j].
void UniformAverage(void* out, const void* x, const void* const* in, int k, size_t n, DType dtype);

// out = factor * x; out may be x.
void Scale(void* out, const void* x, double factor, size_t n, DType dtype);

// out += factor * x. x must not overlap out.
void Axpy(void* out, const void* x, double factor, size_t n, DType dtype);

namespace detail {
// For tests and benchmarks: false makes every function above use its baseline
// (SSE2) kernels even where AVX2/F16C is available. Results are the same either way.
void SetAvx2Enabled(bool enabled);
}  // namespace detail

}  // namespace starling::ops
