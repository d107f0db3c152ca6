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

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    data_ = other.data_;
    capacity_ = other.capacity_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
  }
  return *this;
}

void PinnedBuffer::Release() {
  if (owner_ && data_) owner_->GivePinned(data_, capacity_);
  owner_ = nullptr;
  data_ = nullptr;
}

GpuState::~GpuState() {
  if (plugin_ == nullptr) return;
  const starling_device_plugin_t& p = **plugin_;
  // Best effort: errors while tearing down have nowhere to go.
  if (copy_stream_) {
    p.stream_synchronize(copy_stream_);
    p.stream_destroy(copy_stream_);
  }
  for (void* e : events_) p.event_destroy(e);
  for (const Block& b : free_pinned_) p.host_free(b.data);
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
  return Str("staged on cuda:", device_, ": pinned host copies and the MPI algorithms (device plugin: ",
             (*plugin_)->describe(), ")");
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

PinnedBuffer GpuState::TakePinned(size_t bytes) {
  const size_t size = BlockSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = free_pinned_.end();
  for (auto it = free_pinned_.begin(); it != free_pinned_.end(); ++it) {
    if (it->capacity >= size && (best == free_pinned_.end() || it->capacity < best->capacity)) best = it;
  }
  if (best != free_pinned_.end()) {
    const Block block = *best;
    free_pinned_.erase(best);
    return PinnedBuffer(this, block.data, block.capacity);
  }
  void* data = nullptr;
  if ((*plugin_)->host_alloc(size, &data) != 0)
    Fail(Code::kOutOfMemory, "could not allocate ", size, " bytes of pinned host memory for staging: ",
         (*plugin_)->last_error());
  return PinnedBuffer(this, static_cast<char*>(data), size);
}

void GpuState::GivePinned(char* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_pinned_.push_back({data, capacity});
}

}  // namespace starling::device
