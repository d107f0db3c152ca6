#include "impl/device/cuda/errors.h"

#include <utility>

namespace starling::device::cuda {
namespace {
thread_local std::string t_last_error = "no error";
}  // namespace

int Fail(std::string message) {
  t_last_error = std::move(message);
  return 1;
}

int Check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return 0;
  cudaGetLastError();  // clear it (sticky errors stay: they poison the context anyway)
  return Fail(std::string(call) + ": " + cudaGetErrorString(err));
}

const char* LastError() { return t_last_error.c_str(); }

}  // namespace starling::device::cuda
