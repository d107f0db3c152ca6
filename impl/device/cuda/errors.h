// The CUDA plugin's error reporting: every table function returns 0 or nonzero, and on
// failure leaves a message for the calling thread (last_error), naming the call that
// failed and why: "cudaMemcpyAsync: invalid argument".
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace starling::device::cuda {

// Sets this thread's message; returns 1 (the failure status) for `return Fail(...)`.
int Fail(std::string message);

// 0 when err is cudaSuccess, else Fail("<call>: <CUDA's error string>"). Also clears
// the runtime's per-thread last error, so that the cudaGetLastError after a later
// kernel launch reports that launch and not this call.
int Check(cudaError_t err, const char* call);

// This thread's last message ("no error" before any failure).
const char* LastError();

}  // namespace starling::device::cuda
