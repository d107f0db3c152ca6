#include "impl/device/host_access.h"

namespace starling::device {

HostAccess::~HostAccess() {
  if (stream_ == nullptr) return;
  gpu_.plugin()->stream_synchronize(stream_);  // best effort: nowhere to report
  gpu_.plugin()->stream_destroy(stream_);
}

void* HostAccess::Stream() {
  if (stream_ == nullptr)
    gpu_.plugin().Check(gpu_.plugin()->stream_create(gpu_.device(), &stream_), "stream_create");
  return stream_;
}

void HostAccess::ToHost(void* dst, bool after_caller) {
  if (tensor_.bytes == 0) return;
  const Plugin& p = gpu_.plugin();
  gpu_.BindOwnedThread();
  std::lock_guard<std::mutex> lock(mutex_);
  void* stream = Stream();
  if (after_caller) {
    void* event = gpu_.RecordCallerStream();
    const int waited = p->stream_wait_event(stream, event);
    gpu_.GiveEvent(event);  // CUDA keeps the recorded point for the wait already queued
    p.Check(waited, "waiting for the caller's stream (starling_set_cuda_stream)");
  }
  p.Check(p->memcpy_async(dst, tensor_.data, tensor_.bytes, stream), "memcpy_async");
  p.Check(p->stream_synchronize(stream), "stream_synchronize");
  gpu_.staged_bytes.fetch_add(tensor_.bytes, std::memory_order_relaxed);
}

void HostAccess::FromHost(const void* src) {
  if (tensor_.bytes == 0) return;
  const Plugin& p = gpu_.plugin();
  gpu_.BindOwnedThread();
  std::lock_guard<std::mutex> lock(mutex_);
  void* stream = Stream();
  p.Check(p->memcpy_async(tensor_.data, src, tensor_.bytes, stream), "memcpy_async");
  p.Check(p->stream_synchronize(stream), "stream_synchronize");
  gpu_.staged_bytes.fetch_add(tensor_.bytes, std::memory_order_relaxed);
}

}  // namespace starling::device
