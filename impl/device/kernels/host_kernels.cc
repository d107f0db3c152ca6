// host_kernels.h: the device kernels' element code (elementwise.h) run in a plain loop on
// the CPU, for the emulated device and the unit tests. The dtype/op switch is
// dispatch.h's, the one the CUDA plugin uses.
#include "impl/device/kernels/host_kernels.h"

#include "impl/common/dtype.h"
#include "impl/device/kernels/dispatch.h"
#include "impl/device/plugin_abi.h"

namespace starling::device::kernels {
namespace {

// The ABI's ints are starling::DType's and ReduceOp's: dispatch.h repeats them.
static_assert(kFloat16 == static_cast<int>(DType::kFloat16) && kBFloat16 == static_cast<int>(DType::kBFloat16) &&
              kFloat32 == static_cast<int>(DType::kFloat32) && kFloat64 == static_cast<int>(DType::kFloat64) &&
              kInt8 == static_cast<int>(DType::kInt8) && kInt16 == static_cast<int>(DType::kInt16) &&
              kInt32 == static_cast<int>(DType::kInt32) && kInt64 == static_cast<int>(DType::kInt64) &&
              kUInt8 == static_cast<int>(DType::kUInt8) && kNumDTypes == 9);
static_assert(kSum == static_cast<int>(ReduceOp::kSum) && kAverage == static_cast<int>(ReduceOp::kAverage) &&
              kMin == static_cast<int>(ReduceOp::kMin) && kMax == static_cast<int>(ReduceOp::kMax));
static_assert(kMaxInputs == STARLING_DEVICE_MAX_INPUTS);

struct HostLoop {
  template <class Fn>
  int operator()(const Fn& fn, size_t n) const {
    for (size_t i = 0; i < n; ++i) fn(i);
    return kOk;
  }
};

}  // namespace

int HostReduce(void* dst, const void* src, size_t n, int dtype, int op) {
  return DispatchReduce(HostLoop{}, dst, src, n, dtype, op);
}

int HostDivide(void* data, size_t n, int dtype, double divisor) {
  return DispatchDivide(HostLoop{}, data, n, dtype, divisor);
}

int HostWeightedSum(void* out, const void* x, double self_weight, const void* const* in, const double* w, int k,
                    size_t n, int dtype) {
  return DispatchWeightedSum(HostLoop{}, out, x, self_weight, in, w, k, n, dtype);
}

int HostConvert(void* dst, int dst_dtype, const void* src, int src_dtype, size_t n) {
  return DispatchConvert(HostLoop{}, dst, dst_dtype, src, src_dtype, n);
}

}  // namespace starling::device::kernels
