// The element types Starling moves and reduces, and their mapping from DLPack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <dlpack/dlpack.h>

namespace starling {

enum class DType : uint8_t {
  kFloat16 = 0,
  kBFloat16 = 1,
  kFloat32 = 2,
  kFloat64 = 3,
  kInt8 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kUInt8 = 8,
};
constexpr int kNumDTypes = 9;

// Reductions of the classic collectives.
enum class ReduceOp : uint8_t { kSum = 0, kAverage = 1, kMin = 2, kMax = 3 };

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);  // "float32", "bfloat16", ...
bool IsFloating(DType dtype);
const char* ReduceOpName(ReduceOp op);

// The Starling dtype of a DLPack type, or nullopt if unsupported (lanes != 1, bool,
// complex, unusual widths...).
std::optional<DType> FromDLDataType(DLDataType type);
DLDataType ToDLDataType(DType dtype);
// DLPack 1.0's kDLBool (NumPy 2 and PyTorch 2 export bool arrays with it), absent from
// the DLPack 0.6 header Starling builds with: the code is part of the stable ABI.
constexpr uint8_t kDLPackBoolCode = 6;
bool IsDLBool(DLDataType type);
// Human-readable DLPack type ("float32", "int8x4", "complex64", "bool", "code7bits16").
const char* DescribeDLDataType(DLDataType type, char* buffer, size_t size);

}  // namespace starling
