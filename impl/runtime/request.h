// The state behind a starling_request_t: pending until its operation finishes, then a
// final status and message that never change.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>

#include "impl/common/error.h"

namespace starling::runtime {

class Request {
 public:
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Valid once done().
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Sets the final status once and wakes every waiter.
  void Complete(Code code, std::string message);
  // Sleeps until done() or `max_seconds` passed; returns done().
  bool SleepUntilDone(double max_seconds);
  // True the first time only: a request's result is delivered to one wait.
  bool MarkWaited() { return !waited_.exchange(true); }

 private:
  std::atomic<bool> done_{false};
  std::atomic<bool> waited_{false};
  Code code_ = Code::kOk;
  std::string message_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int sleepers_ = 0;  // guarded by mutex_
};

}  // namespace starling::runtime
