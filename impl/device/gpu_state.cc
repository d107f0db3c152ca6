#include "impl/device/gpu_state.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "impl/common/error.h"
#include "impl/device/caller_stream.h"
#include "impl/runtime/engine.h"

namespace starling::device {
namespace {
// Blocks are rounded up to a size class so that tensors of similar sizes reuse each
// other's blocks: from 64 KiB, eight classes per doubling (at most 12.5% unused, where
// powers of two waste up to half: 6 GiB of scratch would take 8 GiB).
size_t BlockSize(size_t bytes) {
  constexpr size_t kMin = 64 << 10;
  if (bytes <= kMin) return kMin;
  size_t power = kMin;
  while (power * 2 < bytes) power <<= 1;  // power < bytes <= 2 * power
  const size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

thread_local int t_bound_device = -1;  // BindOwnedThread's device on this thread
}  // namespace

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    data_ = other.data_;
    capacity_ = other.capacity_;
    device_ = other.device_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
  }
  return *this;
}

void PooledBuffer::Release() {
  if (owner_ && data_) owner_->Give(data_, capacity_, device_);
  owner_ = nullptr;
  data_ = nullptr;
}

GpuState::~GpuState() {
  if (plugin_ == nullptr) return;
  const starling_device_plugin_t& p = **plugin_;
  // Best effort: errors while tearing down have nowhere to go.
  // Abort, not destroy: it never waits for peers (every operation already finished,
  // or failed and must not hang the teardown). A communicator an operation aborted
  // already is gone: TakeNcclComm gives NULL then.
  AbortNccl("the context is being destroyed");
  for (void* stream : {copy_stream_, copy_back_stream_, nccl_stream_}) {
    if (stream == nullptr || (stream == nccl_stream_ && nccl_stream_abandoned_)) continue;
    p.stream_synchronize(stream);
    p.stream_destroy(stream);
  }
  for (void* e : events_) p.event_destroy(e);
  for (const Block& b : free_pinned_) p.host_free(b.data);
  for (const Block& b : free_device_) p.device_free(b.data);
}

const Plugin& GpuState::Admit(const TensorView& view, const char* what) {
  const Plugin* loaded = nullptr;
  try {
    loaded = &Load();
  } catch (const Error& e) {
    Fail(e.code(), what, " is on cuda:", view.device, ": ", e.what());
  }
  const Plugin& plugin = *loaded;
  std::lock_guard<std::mutex> lock(mutex_);
  if (device_ < 0) {
    int count = 0;
    plugin.Check(plugin->device_count(&count), "device_count");
    STARLING_CHECK_ARG(view.device < count, what, " is on cuda:", view.device, " but this process sees ", count,
                       " GPU", count == 1 ? "" : "s");
    plugin_ = &plugin;
    device_ = view.device;
  }
  STARLING_CHECK_ARG(view.device == device_, what, " is on cuda:", view.device, " but this context uses cuda:",
                     device_, " (fixed by its first CUDA tensor); one context drives one GPU per rank");
  if (view.bytes == 0) return plugin;
  int kind = STARLING_MEMORY_HOST, owner = -1;
  plugin.Check(plugin->pointer_kind(view.data, &kind, &owner), "pointer_kind");
  const char* kind_name = kind == STARLING_MEMORY_PINNED ? "pinned host memory" : "host memory";
  STARLING_CHECK_ARG(kind == STARLING_MEMORY_DEVICE || kind == STARLING_MEMORY_MANAGED, what,
                     " says it is on cuda:", view.device, " but its data pointer is ", kind_name,
                     " (fix the DLPack device, or pass the tensor as CPU memory)");
  STARLING_CHECK_ARG(owner == view.device, what, " says it is on cuda:", view.device,
                     " but its memory belongs to cuda:", owner);
  return plugin;
}

std::string GpuState::PathDescription() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device_ < 0) return "none (no CUDA tensor used yet)";
  switch (path_.load()) {
    case GpuPath::kNccl:
      return Str("nccl on cuda:", device_, ": ", path_reason_, " (", (*plugin_)->nccl_describe(), "; ",
                 (*plugin_)->describe(), ")");
    case GpuPath::kStaged:
      return Str("staged on cuda:", device_, ": ", path_reason_, " (", (*plugin_)->describe(), ")");
    case GpuPath::kUnset:
      break;
  }
  return Str("staged on cuda:", device_, " until the first collective operation on CUDA tensors chooses the path (",
             (*plugin_)->describe(), ")");
}

void GpuState::SetPath(GpuPath path, std::string reason, void* nccl_comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  path_reason_ = std::move(reason);
  nccl_comm_.store(nccl_comm, std::memory_order_release);
  path_.store(path, std::memory_order_release);
}

bool GpuState::AbortNccl(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (nccl_failure_.empty()) nccl_failure_ = why;
  }
  void* comm = TakeNcclComm();
  if (comm == nullptr) return true;
  // NCCL's abort may wait for the other ranks of this node (it frees memory they may
  // still use), and they may be stuck: give it a deadline, then leave it running.
  struct Done {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  const starling_device_plugin_t* p = &**plugin_;  // the plugin stays loaded for good
  std::thread([p, comm, done] {
    p->nccl_comm_abort(comm);
    std::lock_guard<std::mutex> lock(done->mutex);
    done->done = true;
    done->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(done->mutex);
  const bool finished = done->cv.wait_for(lock, std::chrono::duration<double>(kAbortSeconds), [&] { return done->done; });
  if (!finished) {
    std::lock_guard<std::mutex> state(mutex_);
    nccl_stream_abandoned_ = true;
  }
  return finished;
}

std::string GpuState::NcclFailure() {
  std::lock_guard<std::mutex> lock(mutex_);
  return nccl_failure_;
}

void GpuState::BindOwnedThread() {
  if (t_bound_device == device_ || !runtime::Engine::OnProgressThread()) return;
  plugin_->Check((*plugin_)->set_device(device_), "set_device");
  t_bound_device = device_;
}

size_t GpuState::pooled_device_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_bytes_;
}

void* GpuState::nccl_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (nccl_stream_ == nullptr) plugin_->Check((*plugin_)->stream_create(device_, &nccl_stream_), "stream_create");
  return nccl_stream_;
}

void* GpuState::copy_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (copy_stream_ == nullptr) plugin_->Check((*plugin_)->stream_create(device_, &copy_stream_), "stream_create");
  return copy_stream_;
}

void* GpuState::copy_back_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (copy_back_stream_ == nullptr)
    plugin_->Check((*plugin_)->stream_create(device_, &copy_back_stream_), "stream_create");
  return copy_back_stream_;
}

void* GpuState::TakeEvent() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!events_.empty()) {
    void* e = events_.back();
    events_.pop_back();
    return e;
  }
  void* e = nullptr;
  plugin_->Check((*plugin_)->event_create(device_, &e), "event_create");
  return e;
}

void GpuState::GiveEvent(void* event) {
  if (event == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(event);
}

void* GpuState::RecordCallerStream() {
  const Plugin& p = plugin();
  void* stream = CallerStream();
  int capturing = 0;
  p.Check(p->stream_is_capturing(stream, device_, &capturing), "stream_is_capturing on the caller's stream");
  if (capturing != 0)
    Fail(Code::kInvalidUsage, "the caller's CUDA stream", stream == nullptr ? " (the legacy stream)" : "",
         " is being captured into a CUDA graph: Starling's operations cannot be captured (they wait for the GPU "
         "from the host); call them outside the capture");
  void* event = TakeEvent();
  if (p->event_record(event, stream) != 0) {
    const std::string why = p->last_error();
    GiveEvent(event);
    Fail(Code::kDevice, "event_record on the caller's stream (starling_set_cuda_stream): ", why);
  }
  return event;
}

PooledBuffer GpuState::TakePinned(size_t bytes) { return Take(bytes, false); }
PooledBuffer GpuState::TakeDevice(size_t bytes) { return Take(bytes, true); }

PooledBuffer GpuState::Take(size_t bytes, bool device) {
  const size_t size = BlockSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Block>& pool = device ? free_device_ : free_pinned_;
  auto best = pool.end();
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    if (it->capacity >= size && (best == pool.end() || it->capacity < best->capacity)) best = it;
  }
  if (best != pool.end()) {
    const Block block = *best;
    pool.erase(best);
    return PooledBuffer(this, block.data, block.capacity, device);
  }
  void* data = nullptr;
  const starling_device_plugin_t& p = **plugin_;
  int rc = device ? p.device_alloc(device_, size, &data) : p.host_alloc(device_, size, &data);
  if (rc != 0 && device && !free_device_.empty()) {  // out of memory: give back what the pool keeps, retry
    TrimDevicePool(0);
    rc = p.device_alloc(device_, size, &data);
  }
  if (rc != 0)
    Fail(Code::kOutOfMemory, "could not allocate ", size, device ? " bytes of device memory on cuda:" : " bytes of ",
         device ? Str(device_) : std::string("pinned host memory"),
         device ? " for the NCCL path's scratch (STARLING_GPU_SCRATCH_BYTES bounds it): "
                : " for CUDA tensors' staging: ",
         p.last_error());
  if (device) device_bytes_ += size;
  return PooledBuffer(this, static_cast<char*>(data), size, device);
}

void GpuState::Give(char* data, size_t capacity, bool device) {
  std::lock_guard<std::mutex> lock(mutex_);
  (device ? free_device_ : free_pinned_).push_back({data, capacity});
  if (device) TrimDevicePool(scratch_cap());
}

void GpuState::TrimDevicePool(size_t keep) {
  size_t free_bytes = 0;
  for (const Block& b : free_device_) free_bytes += b.capacity;
  // Largest first: they are the ones an unusual tensor left behind.
  std::sort(free_device_.begin(), free_device_.end(),
            [](const Block& a, const Block& b) { return a.capacity > b.capacity; });
  while (free_bytes > keep && !free_device_.empty()) {
    const Block b = free_device_.front();
    free_device_.erase(free_device_.begin());
    (*plugin_)->device_free(b.data);  // best effort: a failure leaks it, nothing worse
    free_bytes -= b.capacity;
    device_bytes_ -= b.capacity;
  }
}

}  // namespace starling::device
