#include "impl/compress/tensor_io.h"

#include <cstring>

#include "impl/common/error.h"
#include "impl/common/half.h"

namespace starling::compress {

void LoadDoubles(const TensorView& t, double* dst) {
  const size_t n = t.numel;
  switch (t.dtype) {
    case DType::kFloat16:
      for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(static_cast<const uint16_t*>(t.data)[i]);
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(static_cast<const uint16_t*>(t.data)[i]);
      break;
    case DType::kFloat32:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<const float*>(t.data)[i];
      break;
    case DType::kFloat64:
      if (n > 0) std::memcpy(dst, t.data, n * sizeof(double));
      break;
    default:
      throw Error(Code::kInternal, Str("LoadDoubles of ", DTypeName(t.dtype)));
  }
}

void StoreDoubles(const double* src, const TensorView& t) {
  const size_t n = t.numel;
  switch (t.dtype) {
    case DType::kFloat16:
      for (size_t i = 0; i < n; ++i) static_cast<uint16_t*>(t.data)[i] = FloatToHalf(ToFloatRoundToOdd(src[i]));
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < n; ++i)
        static_cast<uint16_t*>(t.data)[i] = FloatToBFloat16(ToFloatRoundToOdd(src[i]));
      break;
    case DType::kFloat32:
      for (size_t i = 0; i < n; ++i) static_cast<float*>(t.data)[i] = static_cast<float>(src[i]);
      break;
    case DType::kFloat64:
      if (n > 0) std::memcpy(t.data, src, n * sizeof(double));
      break;
    default:
      throw Error(Code::kInternal, Str("StoreDoubles of ", DTypeName(t.dtype)));
  }
}

}  // namespace starling::compress
