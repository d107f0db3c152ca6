#include "impl/device/gpu_state.h"

#include <algorithm>

#include "impl/common/error.h"

namespace starling::device {
namespace {
// Pinned blocks are rounded up to a power of two from 64 KiB so that tensors of
// similar sizes reuse each other's blocks.
size_t BlockSize(size_t bytes) {
  size_t size = 64 << 10;
  while (size < bytes) size <<= 1;
  return size;
}
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
  // or failed and must not hang the teardown).
  if (nccl_comm_) p.nccl_comm_abort(nccl_comm_);
  for (void* stream : {copy_stream_, nccl_stream_}) {
    if (stream == nullptr) continue;
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
  nccl_comm_ = nccl_comm;
  path_.store(path, std::memory_order_release);
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
  if ((device ? p.device_alloc(device_, size, &data) : p.host_alloc(size, &data)) != 0)
    Fail(Code::kOutOfMemory, "could not allocate ", size, device ? " bytes of device memory on cuda:" : " bytes of ",
         device ? Str(device_) : std::string("pinned host memory"), " for CUDA tensors' staging: ", p.last_error());
  return PooledBuffer(this, static_cast<char*>(data), size, device);
}

void GpuState::Give(char* data, size_t capacity, bool device) {
  std::lock_guard<std::mutex> lock(mutex_);
  (device ? free_device_ : free_pinned_).push_back({data, capacity});
}

}  // namespace starling::device
