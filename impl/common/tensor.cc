#include "impl/common/tensor.h"

#include <cstring>

#include "impl/common/checked.h"
#include "impl/common/error.h"

namespace starling {
namespace {
constexpr int kMaxDims = 64;

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += Str(i ? ", " : "", shape[i]);
  return s + "]";
}

// DLPack producers may use device types newer than this header (DLPack 1.x adds 14
// to 17), which C++ must not load as a DLDeviceType: read the field's bytes.
int32_t DeviceTypeOf(const DLDevice& device) {
  static_assert(sizeof(device.device_type) == sizeof(int32_t), "DLDeviceType is an int32");
  int32_t type;
  std::memcpy(&type, &device.device_type, sizeof type);
  return type;
}
}  // namespace

size_t TensorView::row_bytes() const {
  size_t n = DTypeSize(dtype);
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

std::string TensorView::Describe() const { return DTypeName(dtype) + ShapeText(shape); }

std::string DescribeDevice(DLDevice device) {
  const char* name = "unknown";
  switch (DeviceTypeOf(device)) {
    case kDLCPU: name = "cpu"; break;
    case kDLCUDA: name = "cuda"; break;
    case kDLCUDAHost: name = "cuda_host"; break;
    case kDLOpenCL: name = "opencl"; break;
    case kDLVulkan: name = "vulkan"; break;
    case kDLMetal: name = "metal"; break;
    case kDLVPI: name = "vpi"; break;
    case kDLROCM: name = "rocm"; break;
    case kDLROCMHost: name = "rocm_host"; break;
    case kDLCUDAManaged: name = "cuda_managed"; break;
    default: break;
  }
  return Str(name, ":", device.device_id);
}

TensorView ViewOf(const DLTensor* tensor, const char* what) {
  STARLING_CHECK_ARG(tensor != nullptr, what, " must not be NULL");
  // Pinned CUDA/ROCm host memory is ordinary CPU-addressable memory. CUDA device and
  // managed memory is staged or moved by impl/device.
  const int32_t device = DeviceTypeOf(tensor->device);
  const bool cuda = device == kDLCUDA || device == kDLCUDAManaged;
  STARLING_CHECK(cuda || device == kDLCPU || device == kDLCUDAHost || device == kDLROCMHost, Code::kUnsupported,
                 what, " is on device ", DescribeDevice(tensor->device),
                 "; Starling moves CPU and CUDA memory (copy the tensor to one of them first)");
  STARLING_CHECK_ARG(!cuda || tensor->device.device_id >= 0, what, " has a negative CUDA device index ",
                     tensor->device.device_id);
  const auto dtype = FromDLDataType(tensor->dtype);
  if (!dtype) {
    char buffer[48];
    Fail(Code::kUnsupported, what, " has dtype ", DescribeDLDataType(tensor->dtype, buffer, sizeof buffer),
         IsDLBool(tensor->dtype) ? ", which is not supported (convert it to uint8, whose min and max are logical "
                                   "and and or)" : "",
         "; supported: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8");
  }
  STARLING_CHECK_ARG(tensor->ndim >= 0 && tensor->ndim <= kMaxDims, what, " has ndim ", tensor->ndim,
                     " (must be between 0 and ", kMaxDims, ")");
  STARLING_CHECK_ARG(tensor->ndim == 0 || tensor->shape != nullptr, what, " has ndim ", tensor->ndim,
                     " but a NULL shape");

  TensorView view;
  view.dtype = *dtype;
  if (cuda) view.device = tensor->device.device_id;
  view.shape.assign(tensor->shape, tensor->shape + tensor->ndim);  // read the caller's shape once
  const size_t elem = DTypeSize(view.dtype);
  // The product of the non-zero dimensions, in bytes, must fit: then numel, bytes,
  // row_bytes() and the strides below cannot overflow, even when a zero dimension makes
  // the tensor empty.
  uint64_t extent = elem;
  for (int i = 0; i < tensor->ndim; ++i) {
    const int64_t d = view.shape[i];
    STARLING_CHECK_ARG(d >= 0, what, " has a negative dimension ", d, " at index ", i);
    if (d > 0 && !BytesFit(extent, d, &extent)) {
      Fail(Code::kInvalidArgument, what, ": shape ", ShapeText(view.shape), " of ", DTypeName(view.dtype),
           " has a byte size that overflows (the limit is 2^63 - 1 bytes)");
    }
  }
  size_t numel = 1;
  for (int64_t d : view.shape) numel *= static_cast<size_t>(d);
  view.numel = numel;
  view.bytes = numel * elem;

  // Row-major contiguity; dimensions of extent 1 may carry any stride.
  if (tensor->strides != nullptr && numel > 0) {
    int64_t expected = 1;
    for (int i = tensor->ndim - 1; i >= 0; --i) {
      if (view.shape[i] != 1 && tensor->strides[i] != expected) {
        Fail(Code::kInvalidArgument, what, " is not contiguous (stride ", tensor->strides[i],
             " at dimension ", i, ", expected ", expected,
             "); pass a contiguous copy (e.g. .contiguous() / np.ascontiguousarray)");
      }
      expected *= view.shape[i];
    }
  }

  STARLING_CHECK_ARG(numel == 0 || tensor->data != nullptr, what, " has NULL data but ", numel, " elements");
  if (tensor->data == nullptr) return view;  // empty, nothing is ever read or written
  // [data + byte_offset, + bytes) must lie inside the address space.
  const uint64_t base = reinterpret_cast<uintptr_t>(tensor->data);
  uint64_t address = 0, end = 0;
  if (!AddFits(base, tensor->byte_offset, &address) || !AddFits(address, view.bytes, &end) || end > kMaxBytes) {
    Fail(Code::kInvalidArgument, what, ": data 0x", std::hex, base, std::dec, " + byte_offset ",
         tensor->byte_offset, " + ", view.bytes, " bytes runs past the end of the address space");
  }
  STARLING_CHECK_ARG(numel == 0 || address % elem == 0, what, " is misaligned: address 0x", std::hex, address,
                     std::dec, " is not a multiple of its element size ", elem);
  view.data = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
  return view;
}

uint32_t TrailingShapeHash(const TensorView& t) {
  uint32_t h = 2166136261u ^ static_cast<uint32_t>(t.ndim());
  for (int i = 1; i < t.ndim(); ++i) {
    const auto d = static_cast<uint64_t>(t.shape[i]);
    h = (h ^ static_cast<uint32_t>(d)) * 16777619u;
    h = (h ^ static_cast<uint32_t>(d >> 32)) * 16777619u;
  }
  return h;
}

void CheckInOut(const TensorView& in, const TensorView& out, const char* in_name, const char* out_name) {
  if (in.data == out.data || in.bytes == 0 || out.bytes == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(in.data);
  const auto b = reinterpret_cast<uintptr_t>(out.data);
  const bool disjoint = a + in.bytes <= b || b + out.bytes <= a;
  STARLING_CHECK_ARG(disjoint, in_name, " and ", out_name,
                     " partially overlap; pass the same tensor (in place) or separate memory");
}

void CheckSameLayout(const TensorView& a, const TensorView& b, const char* a_name, const char* b_name) {
  STARLING_CHECK_ARG(a.dtype == b.dtype && a.shape == b.shape, a_name, " is ", a.Describe(), " but ", b_name,
                     " is ", b.Describe(), "; they must have the same dtype and shape");
}

}  // namespace starling
