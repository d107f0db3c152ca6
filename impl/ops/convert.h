// Bulk conversions between the 16-bit float formats and float32, used by the
// reduction kernels to work on float16/bfloat16 in float32 blocks.
//
// The float16 routines pick an F16C/AVX2 implementation at run time when the CPU has
// it; it gives the same bits as the portable one (see impl/common/half.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace starling::ops {

void HalfToFloatN(const uint16_t* src, float* dst, size_t n);
void FloatToHalfN(const float* src, uint16_t* dst, size_t n);
void BFloat16ToFloatN(const uint16_t* src, float* dst, size_t n);
void FloatToBFloat16N(const float* src, uint16_t* dst, size_t n);

// The individual implementations, exposed so tests can check that they agree.
namespace detail {
bool HasF16C();  // CPU supports F16C and AVX2 (and the OS saves the AVX state)
void HalfToFloatPortable(const uint16_t* src, float* dst, size_t n);
void FloatToHalfPortable(const float* src, uint16_t* dst, size_t n);
// Only call when HasF16C().
void HalfToFloatF16C(const uint16_t* src, float* dst, size_t n);
void FloatToHalfF16C(const float* src, uint16_t* dst, size_t n);
}  // namespace detail

}  // namespace starling::ops
