#include "stream.h"

#include <chrono>
#include <map>
#include <random>
#include <vector>

#include "common.h"

namespace starling::emu {

std::string StreamState::WaitFor(uint64_t point) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= point; });
  return error_;
}

bool StreamState::Reached(uint64_t point, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  *error = error_;
  return completed_ >= point;
}

std::string StreamState::Error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Stream::Stream(int device, bool legacy)
    : legacy_(legacy), state_(std::make_shared<StreamState>(device, legacy ? nullptr : this)) {
  worker_ = std::thread([this] { Run(); });
}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(state_->mu_);
    stopping_ = true;
  }
  state_->cv_.notify_all();
  worker_.join();
}

int Stream::Submit(const char* fn, Task task, uint64_t* point) {
  {
    std::lock_guard<std::mutex> lock(state_->mu_);
    if (!state_->error_.empty())
      return Fail("%s: stream %p failed earlier: %s", fn, handle(), state_->error_.c_str());
    queue_.push_back(std::move(task));
    ++state_->enqueued_;
    if (point != nullptr) *point = state_->enqueued_;
  }
  state_->cv_.notify_all();
  return 0;
}

int Stream::Point(const char* fn, uint64_t* point) {
  std::lock_guard<std::mutex> lock(state_->mu_);
  if (!state_->error_.empty())
    return Fail("%s: stream %p failed earlier: %s", fn, handle(), state_->error_.c_str());
  *point = state_->enqueued_;
  return 0;
}

int Stream::Synchronize(const char* fn) {
  uint64_t point;
  {
    std::lock_guard<std::mutex> lock(state_->mu_);
    point = state_->enqueued_;
  }
  const std::string error = state_->WaitFor(point);
  if (!error.empty()) return Fail("%s: stream %p failed: %s", fn, handle(), error.c_str());
  return 0;
}

void Stream::Run() {
  // Per worker, so that streams do not draw the same delays in lockstep.
  std::minstd_rand rng(std::random_device{}() ^ static_cast<unsigned>(reinterpret_cast<uintptr_t>(this)));
  const int delay_us = GetSettings().delay_us;
  for (;;) {
    Task task;
    bool skip;
    {
      std::unique_lock<std::mutex> lock(state_->mu_);
      state_->cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
      skip = !state_->error_.empty();  // after a failure, later work is not run
    }
    std::string error;
    if (!skip) {
      if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % (delay_us + 1u)));
      error = task();
    }
    task = nullptr;  // release what the task held (buffers, communicators) before signalling
    {
      std::lock_guard<std::mutex> lock(state_->mu_);
      if (!error.empty() && state_->error_.empty()) state_->error_ = error;
      ++state_->completed_;
    }
    state_->cv_.notify_all();
  }
}

namespace {

struct StreamRegistry {
  std::mutex mu;
  std::map<void*, std::shared_ptr<Stream>> created;
  std::map<int, std::shared_ptr<Stream>> legacy;  // by device, made on first use
};

// Never destroyed: a destructor at exit would join workers that may be mid-task.
StreamRegistry& Streams() {
  static StreamRegistry* registry = new StreamRegistry;
  return *registry;
}

}  // namespace

std::shared_ptr<Stream> ResolveStream(const char* fn, void* handle, int null_device) {
  StreamRegistry& reg = Streams();
  std::lock_guard<std::mutex> lock(reg.mu);
  if (handle == nullptr) {
    const int device = null_device >= 0 ? null_device : CurrentDevice();
    UseDevice(device);
    auto& legacy = reg.legacy[device];
    if (!legacy) legacy = std::make_shared<Stream>(device, true);
    return legacy;
  }
  auto it = reg.created.find(handle);
  if (it == reg.created.end()) {
    Fail("%s: %p is not a live emulated stream (destroyed, or never created?)", fn, handle);
    return nullptr;
  }
  UseDevice(it->second->device());
  return it->second;
}

int CreateStream(const char* fn, int device, void** handle) {
  if (handle == nullptr) return Fail("%s: stream is NULL", fn);
  if (!ValidDevice(device)) return Fail("%s: invalid device %d (%d emulated)", fn, device, GetSettings().devices);
  UseDevice(device);
  auto stream = std::make_shared<Stream>(device, false);
  StreamRegistry& reg = Streams();
  std::lock_guard<std::mutex> lock(reg.mu);
  *handle = stream->handle();
  reg.created.emplace(*handle, std::move(stream));
  return 0;
}

int DestroyStream(const char* fn, void* handle) {
  if (handle == nullptr) return Fail("%s: the legacy default stream cannot be destroyed", fn);
  std::shared_ptr<Stream> stream;
  {
    StreamRegistry& reg = Streams();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.created.find(handle);
    if (it == reg.created.end()) return Fail("%s: %p is not a live emulated stream", fn, handle);
    stream = std::move(it->second);
    reg.created.erase(it);
  }
  UseDevice(stream->device());
  // cudaStreamDestroy returns at once and lets queued work finish; here the queued work
  // finishes before we return: the worker is joined when the last reference goes, which
  // is here or in a concurrent call that resolved the handle just before (never in a
  // worker: tasks and events hold only the StreamState).
  stream.reset();
  return 0;
}

void SynchronizeAllStreams() {
  std::vector<std::shared_ptr<Stream>> all;
  {
    StreamRegistry& reg = Streams();
    std::lock_guard<std::mutex> lock(reg.mu);
    for (auto& [handle, s] : reg.created) all.push_back(s);
    for (auto& [device, s] : reg.legacy) all.push_back(s);
  }
  for (auto& s : all) s->Synchronize("synchronize");
}

}  // namespace starling::emu
