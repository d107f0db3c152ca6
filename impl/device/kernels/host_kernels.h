// The device kernels' element code (impl/device/kernels/elementwise.h, written once as
// __host__ __device__), run on the CPU: the emulated device executes these on its stream
// workers, and the unit tests compare them bit for bit with impl/ops/reduce.h. The
// arguments and semantics are those of the plugin table's kernels (plugin_abi.h).
// Each returns 0, or nonzero for an unsupported dtype/op/conversion.
#pragma once

#include <cstddef>

namespace starling::device::kernels {

int HostReduce(void* dst, const void* src, size_t n, int dtype, int op);
int HostDivide(void* data, size_t n, int dtype, double divisor);
int HostWeightedSum(void* out, const void* x, double self_weight, const void* const* in, const double* w, int k,
                    size_t n, int dtype);
int HostConvert(void* dst, int dst_dtype, const void* src, int src_dtype, size_t n);

}  // namespace starling::device::kernels
