// Validated views of DLPack tensors. Every tensor crossing the C ABI is checked here,
// on the caller's thread, before anything is queued.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "impl/common/dtype.h"

namespace starling {

struct TensorView {
  void* data = nullptr;  // start of the elements (byte_offset applied)
  int device = -1;       // CUDA device index for device (or managed) memory; -1: host memory
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  size_t numel = 0;
  size_t bytes = 0;

  int ndim() const { return static_cast<int>(shape.size()); }
  bool on_device() const { return device >= 0; }
  int64_t first_dim() const { return shape.empty() ? 1 : shape[0]; }
  // Bytes of one slice along dimension 0 (the product of the other dimensions).
  size_t row_bytes() const;
  std::string Describe() const;  // "float32[4, 3]"
};

// Checks `tensor` (named `what` in messages): non-NULL, CPU or CUDA memory (CUDA and
// CUDA-managed tensors get `device` set; impl/device checks their pointers), supported dtype
// with lanes 1, ndim in [0, 64], non-negative shape whose byte size fits in 2^63 - 1
// (checked without overflow), data non-NULL unless empty, data + byte_offset + bytes
// inside the address space, row-major contiguous, aligned to the element size. Throws
// Error naming the problem (kInvalidArgument, or kUnsupported for dtype and device).
// Nothing is read through `data`: a pointer to unmapped memory cannot be detected.
TensorView ViewOf(const DLTensor* tensor, const char* what);

// Input/output pairs: the same memory (in place) or disjoint; anything else is an error.
void CheckInOut(const TensorView& in, const TensorView& out, const char* in_name,
                const char* out_name);
// dtype and shape equal, else kInvalidArgument naming both.
void CheckSameLayout(const TensorView& a, const TensorView& b, const char* a_name,
                     const char* b_name);

std::string DescribeDevice(DLDevice device);

// A hash of every dimension but the first (and of ndim): what gathered tensors must
// share, compared across ranks.
uint32_t TrailingShapeHash(const TensorView& t);

}  // namespace starling
