// Synchronous copies between one CUDA tensor and host memory, on a stream of its own:
// for code that works on host memory while the data lives on the GPU (windows backed by
// device memory: their initial contents, the snapshots served to remote gets, and
// updates, which combine the neighbor buffers through pinned host memory).
#pragma once

#include <memory>
#include <mutex>

#include "impl/common/tensor.h"
#include "impl/device/gpu_state.h"

namespace starling::device {

class HostAccess {
 public:
  // Shares the GpuState: a window (and with it this object) may be destroyed after the
  // context's other extensions.
  HostAccess(std::shared_ptr<GpuState> gpu, const TensorView& tensor) : owner_(std::move(gpu)), gpu_(*owner_),
                                                                          tensor_(tensor) {}
  ~HostAccess();
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

  // dst = the tensor, once the work queued on the calling thread's stream is done when
  // `after_caller` (else as the device memory is now). Returns when dst is written.
  void ToHost(void* dst, bool after_caller);
  // tensor = src; returns when the device memory is written.
  void FromHost(const void* src);
  GpuState& gpu() { return gpu_; }

 private:
  void* Stream();
  std::shared_ptr<GpuState> owner_;
  GpuState& gpu_;
  TensorView tensor_;
  std::mutex mutex_;  // the stream is used by the caller's thread and the window service
  void* stream_ = nullptr;
};

}  // namespace starling::device
