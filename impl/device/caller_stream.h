// The CUDA stream of the calling thread (starling_set_cuda_stream): operations on CUDA
// tensors start after the work queued on it when they are called. A thread-local
// setting, like CUDA's current device and PyTorch's current stream, rather than one more
// argument on every entry point. NULL: the legacy default stream.
#pragma once

namespace starling::device {

void* CallerStream();
void SetCallerStream(void* stream);

}  // namespace starling::device
