// A context's GPU state, created by its first CUDA tensor: the device it uses, the
// engine's copy stream, pooled pinned host buffers and pooled events. Attached to the
// context as an extension (Context::Extension<GpuState>()).
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "impl/common/tensor.h"
#include "impl/device/device.h"

namespace starling::device {

// Page-locked host memory or device memory from the plugin, returned to its pool on
// destruction.
class GpuState;
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(GpuState* owner, char* data, size_t capacity, bool device)
      : owner_(owner), data_(data), capacity_(capacity), device_(device) {}
  PooledBuffer(PooledBuffer&& other) noexcept { *this = std::move(other); }
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;
  ~PooledBuffer() { Release(); }
  char* data() const { return data_; }
  // Forgets the memory without returning it: for buffers MPI may still write after an
  // abort (kept until the process exits, like impl/common/quarantine).
  void Abandon() { owner_ = nullptr, data_ = nullptr; }

 private:
  void Release();
  GpuState* owner_ = nullptr;
  char* data_ = nullptr;
  size_t capacity_ = 0;
  bool device_ = false;
};

// How a context moves CUDA tensors, chosen by its first collective CUDA operation.
enum class GpuPath { kUnset, kStaged, kNccl };

class GpuState {
 public:
  GpuState() = default;
  ~GpuState();
  GpuState(const GpuState&) = delete;
  GpuState& operator=(const GpuState&) = delete;

  // Loads the plugin and checks `view` (a CUDA tensor named `what`): its memory really
  // is device (or managed) memory of its device, and that device is the context's (set
  // by the first CUDA tensor). Throws kUnsupported / kInvalidArgument naming the tensor.
  const Plugin& Admit(const TensorView& view, const char* what);

  const Plugin& plugin() const { return *plugin_; }
  // "none (no CUDA tensor used yet)" or "staged on cuda:0: <why>".
  std::string PathDescription();
  int device() const { return device_; }
  // The engine's streams for staging copies, host-to-device and back (only used under
  // the execution lock): two, so that a pipelined op's copies in and out overlap.
  void* copy_stream();
  void* copy_back_stream();
  // Pooled events: taken and given back by any thread.
  void* TakeEvent();
  void GiveEvent(void* event);
  // A pooled event recorded on the calling thread's stream (starling_set_cuda_stream;
  // NULL: the legacy stream of this GPU), for Starling's streams to wait on, so an
  // operation starts after the caller's queued work. Refuses (kInvalidUsage) a stream
  // being captured into a CUDA graph: Starling's operations wait from the host, which a
  // capture cannot record and which would invalidate it. Give the event back.
  void* RecordCallerStream();
  // Pinned memory of at least `bytes`; any thread.
  PooledBuffer TakePinned(size_t bytes);
  // Device memory of at least `bytes` on the context's GPU (NCCL path scratch). Free
  // pooled blocks beyond the scratch cap go back to the device; when the device is out of
  // memory, every free pooled block does, and the allocation is tried once more.
  PooledBuffer TakeDevice(size_t bytes);
  // STARLING_GPU_SCRATCH_BYTES: what the NCCL path's ops split their work to fit, and
  // the most free device memory the pool keeps.
  size_t scratch_cap() const { return scratch_cap_.load(std::memory_order_relaxed); }
  void set_scratch_cap(size_t bytes) { scratch_cap_.store(bytes, std::memory_order_relaxed); }
  // Device bytes held by the pool (in use or free), for tests and stats.
  size_t pooled_device_bytes();

  // On threads Starling owns (the progress thread), makes the context's device current
  // once, so that no CUDA call there runs on CUDA's implicit device 0 (which would
  // create a context, and take memory, on GPU 0). Application threads are left alone.
  void BindOwnedThread();

  // --- the path (impl/device/gpu_path.cc decides it, once) ---
  GpuPath path() const { return path_.load(std::memory_order_acquire); }
  void SetPath(GpuPath path, std::string reason, void* nccl_comm);
  // The NCCL communicator and the engine's NCCL stream (NCCL path only). nccl_comm()
  // is NULL once the communicator was aborted.
  void* nccl_comm() const { return nccl_comm_.load(std::memory_order_acquire); }
  void* nccl_stream();
  // Takes the communicator (NULL if already taken): whoever gets it is the only one to
  // abort or destroy it (a second ncclCommAbort is a use after free).
  void* TakeNcclComm() { return nccl_comm_.exchange(nullptr, std::memory_order_acq_rel); }
  // Takes and aborts the communicator, on a helper thread that may take at most
  // kAbortSeconds (NCCL's abort can block on its peers); the NCCL path then fails every
  // later operation with `why`. Returns false when the abort did not finish in time
  // (the NCCL stream is then left alone).
  bool AbortNccl(const std::string& why);
  // Why the NCCL path is unusable ("" while it is usable).
  std::string NcclFailure();
  static constexpr double kAbortSeconds = 10;
  std::mutex setup_mutex;  // held while EnsurePath runs the choice

  std::atomic<uint64_t> staged_bytes{0};  // bytes copied between device and host

 private:
  friend class PooledBuffer;
  void Give(char* data, size_t capacity, bool device);
  PooledBuffer Take(size_t bytes, bool device);
  // mutex_ held: frees free pooled device blocks until at most `keep` bytes stay free.
  void TrimDevicePool(size_t keep);

  std::mutex mutex_;
  const Plugin* plugin_ = nullptr;
  int device_ = -1;
  void* copy_stream_ = nullptr;
  void* copy_back_stream_ = nullptr;
  std::vector<void*> events_;
  struct Block {
    char* data;
    size_t capacity;
  };
  std::vector<Block> free_pinned_;
  std::vector<Block> free_device_;
  size_t device_bytes_ = 0;       // pooled device memory, in use or free (mutex_)
  std::atomic<size_t> scratch_cap_{64u << 20};
  std::atomic<GpuPath> path_{GpuPath::kUnset};
  std::string path_reason_;  // guarded by mutex_
  std::atomic<void*> nccl_comm_{nullptr};
  std::string nccl_failure_;      // guarded by mutex_
  bool nccl_stream_abandoned_ = false;  // an abort that never returned may still use it
  void* nccl_stream_ = nullptr;
};

}  // namespace starling::device
