// The kernel entries of the table and the asynchronous copy: argument checks at the call
// (a host pointer where device memory is needed fails here, loudly), then a task on the
// stream that runs the shared kernel code (impl/device/kernels/host_kernels.h) or memmove.
#pragma once

#include <cstddef>

namespace starling::emu {

int MemcpyAsync(void* dst, const void* src, size_t bytes, void* stream);
int Reduce(void* dst, const void* src, size_t n, int dtype, int op, void* stream);
int Divide(void* data, size_t n, int dtype, double divisor, void* stream);
int WeightedSum(void* out, const void* x, double self_weight, const void* const* in, const double* w, int k, size_t n,
                int dtype, void* stream);
int Convert(void* dst, int dst_dtype, const void* src, int src_dtype, size_t n, void* stream);

}  // namespace starling::emu
