// DLPack descriptors built from fuzzer bytes, and an independent oracle (128-bit
// arithmetic, no shared code with the library) that says which ones the library must
// reject and which byte range an accepted one covers. Every data pointer points into a
// harness-owned arena, so an accepted descriptor can only reach memory the harness
// owns or, when the library wrongly accepts an overflowing one, crash under ASan.
#pragma once

#include <cstdint>
#include <cstring>

#include <dlpack/dlpack.h>

namespace starling_fuzz {

// The fixed layout a fuzzer input is read as (zero-padded when shorter). Shapes and
// strides repeat their four entries for larger ndim.
struct TensorRecipe {
  uint8_t device_type;  // DLDeviceType (1: CPU)
  uint8_t dtype_code;
  uint8_t dtype_bits;
  uint8_t dtype_lanes;
  int8_t ndim;
  uint8_t flags;        // kHasStrides, kNullData, kNullShape
  uint16_t data_offset; // where data points in the arena
  uint64_t byte_offset;
  int64_t shape[4];
  int64_t strides[4];
};
constexpr uint8_t kHasStrides = 1, kNullData = 2, kNullShape = 4;

constexpr int kMaxNdim = 70;  // beyond the library's 64

// Harness-owned storage of one descriptor.
struct Descriptor {
  DLTensor tensor{};
  int64_t shape[kMaxNdim];
  int64_t strides[kMaxNdim];
};

inline void Build(const TensorRecipe& r, char* arena, size_t arena_bytes, Descriptor* d) {
  for (int i = 0; i < kMaxNdim; ++i) {
    d->shape[i] = r.shape[i % 4];
    d->strides[i] = r.strides[i % 4];
  }
  DLTensor& t = d->tensor;
  t.data = (r.flags & kNullData) ? nullptr : arena + r.data_offset % arena_bytes;
  const int32_t device_type = r.device_type;  // any value, as a C caller may pass
  std::memcpy(&t.device.device_type, &device_type, sizeof device_type);
  t.device.device_id = 0;
  t.ndim = r.ndim;
  t.dtype = {r.dtype_code, r.dtype_bits, r.dtype_lanes};
  t.shape = (r.flags & kNullShape) ? nullptr : d->shape;
  t.strides = (r.flags & kHasStrides) ? d->strides : nullptr;
  t.byte_offset = r.byte_offset;
}

using u128 = unsigned __int128;
constexpr u128 kLimit = (u128{1} << 63) - 1;  // the library's documented bound

struct Verdict {
  bool must_reject = false;  // breaks a documented rule
  bool must_accept = false;  // follows every rule (alignment included)
  u128 begin = 0, end = 0;   // bytes [begin, end) an accepted descriptor covers
};

inline bool SupportedDType(DLDataType t) {
  if (t.lanes != 1) return false;
  switch (t.code) {
    case kDLFloat: return t.bits == 16 || t.bits == 32 || t.bits == 64;
    case kDLBfloat: return t.bits == 16;
    case kDLInt: return t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64;
    case kDLUInt: return t.bits == 8;
    default: return false;
  }
}

inline Verdict Judge(const DLTensor& t) {
  Verdict v;
  // CPU memory, and CUDA device or managed memory (ViewOf marks it; impl/device checks
  // the pointer itself).
  const bool known = t.device.device_type == kDLCPU || t.device.device_type == kDLCUDAHost ||
                   t.device.device_type == kDLROCMHost || t.device.device_type == kDLCUDA ||
                   t.device.device_type == kDLCUDAManaged;
  if (!known || !SupportedDType(t.dtype) || t.ndim < 0 || t.ndim > 64 || (t.ndim > 0 && t.shape == nullptr))
    return {true};
  // The product of the non-zero dimensions, in bytes, saturating past the limit.
  u128 extent = t.dtype.bits / 8;
  bool empty = false;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) return {true};
    if (t.shape[i] == 0) empty = true;
    else if (extent <= kLimit) extent *= static_cast<u128>(t.shape[i]);
  }
  if (extent > kLimit) return {true};
  const u128 bytes = empty ? 0 : extent;
  // Row-major strides (in elements) where they matter: dimensions of extent 1 may
  // carry any stride, and an empty tensor's strides are never used.
  if (t.strides != nullptr && !empty) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expected) return {true};
      expected *= t.shape[i];
    }
  }
  if (t.data == nullptr) {
    v.must_reject = bytes > 0;
  } else {
    v.begin = static_cast<u128>(reinterpret_cast<uintptr_t>(t.data)) + t.byte_offset;
    v.end = v.begin + bytes;
    v.must_reject = v.end > kLimit;
  }
  v.must_accept = !v.must_reject && (bytes == 0 || v.begin % (t.dtype.bits / 8) == 0);
  return v;
}

// True if calling the library with this descriptor cannot touch memory outside
// [arena, arena + arena_bytes): it must be rejected, is empty, or lies inside.
inline bool SafeToCall(const Verdict& v, const char* arena, size_t arena_bytes) {
  const u128 lo = reinterpret_cast<uintptr_t>(arena);
  return v.must_reject || v.begin == v.end || (v.begin >= lo && v.end <= lo + arena_bytes);
}

}  // namespace starling_fuzz
