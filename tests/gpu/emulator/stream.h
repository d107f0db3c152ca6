// Emulated streams: each is an in-order worker thread draining a task queue. Copies,
// kernels, event waits and NCCL operations are tasks; a task runs only after every task
// queued before it on the same stream, and (with STARLING_EMU_DELAY_US) after a random
// sleep, so that work which forgot to wait for a stream reads stale data in CI instead of
// passing by luck.
//
// Stream NULL is the legacy default stream of the calling thread's current device: one
// shared worker per device. Real CUDA also makes the legacy stream wait for (and be waited
// on by) every *blocking* stream of the device; that implicit synchronization is not
// emulated, since the plugin's streams are created non-blocking (stream_create) and never
// take part in it on a GPU either.
//
// A task that fails (a failing kernel, an NCCL error) makes the stream sticky-failed, as a
// CUDA error does: later tasks are skipped and every call on the stream returns the error.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace starling::emu {

// How far a stream has got: shared with the events recorded on it, which may outlive it.
class StreamState {
 public:
  StreamState(int device, const void* handle) : device_(device), handle_(handle) {}
  int device() const { return device_; }
  const void* handle() const { return handle_; }  // for messages
  // Waits until the first `point` tasks have run; returns the stream's sticky error.
  std::string WaitFor(uint64_t point);
  bool Reached(uint64_t point, std::string* error);
  std::string Error();
  // Stream capture (starling_emu_stream_begin_capture): kNotCapturing, kCapturing, or
  // kInvalidated once something used a captured event the way CUDA then refuses.
  enum Capture : int { kNotCapturing = 0, kCapturing = 1, kInvalidated = 2 };
  std::atomic<int> capture{kNotCapturing};

 private:
  friend class Stream;
  const int device_;
  const void* const handle_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  std::string error_;  // the first failure, sticky
};

class Stream {
 public:
  // A task returns "" on success, else the failure message.
  using Task = std::function<std::string()>;

  Stream(int device, bool legacy);
  ~Stream();  // runs what is queued, then stops the worker
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return state_->device(); }
  void* handle() { return legacy_ ? nullptr : this; }
  const std::shared_ptr<StreamState>& state() const { return state_; }

  // Queues task; fails (naming fn) instead if the stream has failed. *point, if given,
  // receives the number of tasks queued so far, this one included.
  int Submit(const char* fn, Task task, uint64_t* point = nullptr);
  // The number of tasks queued so far (what an event record captures); fails, naming fn,
  // if the stream has failed.
  int Point(const char* fn, uint64_t* point);
  // Waits for every task queued so far; returns 0 or the sticky error.
  int Synchronize(const char* fn);

 private:
  void Run();

  const bool legacy_;
  std::shared_ptr<StreamState> state_;
  std::deque<Task> queue_;  // guarded by state_->mu_
  bool stopping_ = false;
  std::thread worker_;
};

// The stream behind a handle (NULL: the legacy stream of the current device, or of
// `null_device` when given), or nullptr after Fail(fn: ...) for a handle that is not a
// live stream. Counts a context on the stream's device (common.h UseDevice).
std::shared_ptr<Stream> ResolveStream(const char* fn, void* handle, int null_device = -1);
int CreateStream(const char* fn, int device, void** handle);
int DestroyStream(const char* fn, void* handle);
// Waits for everything queued so far on every stream (what cudaFree implies).
void SynchronizeAllStreams();

}  // namespace starling::emu
