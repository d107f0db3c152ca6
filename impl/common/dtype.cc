#include "impl/common/dtype.h"

#include <cstdio>

namespace starling {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: return 2;
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat64: case DType::kInt64: return 8;
    case DType::kInt8: case DType::kUInt8: return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
  }
  return "unknown";
}

bool IsFloating(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "unknown";
}

std::optional<DType> FromDLDataType(DLDataType type) {
  if (type.lanes != 1) return std::nullopt;
  switch (type.code) {
    case kDLFloat:
      if (type.bits == 16) return DType::kFloat16;
      if (type.bits == 32) return DType::kFloat32;
      if (type.bits == 64) return DType::kFloat64;
      return std::nullopt;
    case kDLBfloat:
      if (type.bits == 16) return DType::kBFloat16;
      return std::nullopt;
    case kDLInt:
      if (type.bits == 8) return DType::kInt8;
      if (type.bits == 16) return DType::kInt16;
      if (type.bits == 32) return DType::kInt32;
      if (type.bits == 64) return DType::kInt64;
      return std::nullopt;
    case kDLUInt:
      if (type.bits == 8) return DType::kUInt8;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

DLDataType ToDLDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return {kDLFloat, 16, 1};
    case DType::kBFloat16: return {kDLBfloat, 16, 1};
    case DType::kFloat32: return {kDLFloat, 32, 1};
    case DType::kFloat64: return {kDLFloat, 64, 1};
    case DType::kInt8: return {kDLInt, 8, 1};
    case DType::kInt16: return {kDLInt, 16, 1};
    case DType::kInt32: return {kDLInt, 32, 1};
    case DType::kInt64: return {kDLInt, 64, 1};
    case DType::kUInt8: return {kDLUInt, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

const char* DescribeDLDataType(DLDataType type, char* buffer, size_t size) {
  const char* base = nullptr;
  if (IsDLBool(type)) {
    std::snprintf(buffer, size, "bool");
    return buffer;
  }
  // DLPack 1.1's narrow floats (PyTorch 2 exports float8 with them), absent from the
  // DLPack 0.6 header: codes 7-17 of the stable ABI.
  static const char* const kNarrowFloats[] = {
      "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
      "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"};
  if (type.code >= 7 && type.code < 7 + sizeof kNarrowFloats / sizeof kNarrowFloats[0] && type.lanes == 1) {
    std::snprintf(buffer, size, "%s", kNarrowFloats[type.code - 7]);
    return buffer;
  }
  switch (type.code) {
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLFloat: base = "float"; break;
    case kDLBfloat: base = "bfloat"; break;
    case kDLComplex: base = "complex"; break;
    case kDLOpaqueHandle: base = "opaque"; break;
    default: break;
  }
  if (base == nullptr) {
    std::snprintf(buffer, size, "code%dbits%d", static_cast<int>(type.code), static_cast<int>(type.bits));
  } else if (type.lanes == 1) {
    std::snprintf(buffer, size, "%s%d", base, static_cast<int>(type.bits));
  } else {
    std::snprintf(buffer, size, "%s%dx%d", base, static_cast<int>(type.bits), static_cast<int>(type.lanes));
  }
  return buffer;
}

bool IsDLBool(DLDataType type) { return type.code == kDLPackBoolCode && type.bits == 8 && type.lanes == 1; }

}  // namespace starling
