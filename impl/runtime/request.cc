#include "impl/runtime/request.h"

#include <chrono>

namespace starling::runtime {

void Request::Complete(Code code, std::string message) {
  code_ = code;
  message_ = std::move(message);
  done_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mutex_);
  if (sleepers_ > 0) cv_.notify_all();
}

bool Request::SleepUntilDone(double max_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  ++sleepers_;
  cv_.wait_for(lock, std::chrono::duration<double>(max_seconds), [this] { return done(); });
  --sleepers_;
  return done();
}

}  // namespace starling::runtime
