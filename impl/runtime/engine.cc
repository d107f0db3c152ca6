#include "impl/runtime/engine.h"

#include <chrono>
#include <new>

#include "impl/common/logging.h"
#include "impl/runtime/context.h"

namespace starling::runtime {
namespace {
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

Engine::Engine(Context& context)
    : context_(context), spin_seconds_(context.config().spin_microseconds * 1e-6) {}

Engine::~Engine() { Stop(); }

void Engine::Start() { thread_ = std::thread([this] { ThreadMain(); }); }

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Request> Engine::Submit(std::unique_ptr<Op> op) {
  std::shared_ptr<Request> request = op->request;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    STARLING_CHECK(!stopping_, Code::kShutdown, op->Describe(), ": the context is being destroyed");
    queue_.push_back(std::move(op));
    queued_.fetch_add(1, std::memory_order_release);
    wake = thread_sleeping_;
  }
  if (wake) queue_cv_.notify_one();
  return request;
}

std::shared_ptr<Request> Engine::Execute(std::unique_ptr<Op> op) {
  if (exec_mutex_.try_lock()) {
    std::shared_ptr<Request> request = op->request;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      if (stopping_) {
        exec_mutex_.unlock();
        Fail(Code::kShutdown, op->Describe(), ": the context is being destroyed");
      }
    }
    RunQueued(nullptr);  // earlier submissions first
    RunOne(*op);
    exec_mutex_.unlock();
    WakeThreadIfWorkLeft();
    return request;
  }
  std::shared_ptr<Request> request = Submit(std::move(op));
  Wait(*request);
  return request;
}

void Engine::Wait(Request& request) {
  const auto start = Clock::now();
  while (!request.done()) {
    if (queued_.load(std::memory_order_acquire) > 0 && exec_mutex_.try_lock()) {
      RunQueued(&request);
      exec_mutex_.unlock();
      WakeThreadIfWorkLeft();
      continue;
    }
    // Someone else is executing (or the queue is empty and our op runs now): spin a
    // little for latency, then sleep in short slices so we can take over the queue if
    // the executor leaves before our operation ran.
    if (SecondsSince(start) < spin_seconds_) {
      std::this_thread::yield();
    } else {
      request.SleepUntilDone(0.001);
    }
  }
}

void Engine::SetBackgroundPoll(std::function<void()> poll, double interval_seconds) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    poll_ = std::move(poll);
    poll_interval_ = interval_seconds;
  }
  queue_cv_.notify_all();
}

void Engine::RunQueued(const Request* until) {
  while (until == nullptr || !until->done()) {
    std::unique_ptr<Op> op;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      if (queue_.empty()) return;
      op = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_release);
    }
    RunOne(*op);
  }
}

void Engine::RunOne(Op& op) {
  Code code = Code::kOk;
  std::string message;
  try {
    context_.CheckUsable();
    op.Run(context_);
  } catch (const Error& e) {
    code = e.code();
    message = Str(op.Describe(), ": ", e.what());
  } catch (const std::bad_alloc&) {
    code = Code::kOutOfMemory;
    message = Str(op.Describe(), ": out of memory");
  } catch (const std::exception& e) {
    code = Code::kInternal;
    message = Str(op.Describe(), ": internal error: ", e.what());
  }
  if (code == Code::kTimeout || code == Code::kTransport) context_.MarkBroken(message);
  if (code != Code::kOk) STARLING_LOG(LogLevel::kError, message);
  op.request->Complete(code, std::move(message));
}

void Engine::WakeThreadIfWorkLeft() {
  if (queued_.load(std::memory_order_acquire) == 0) return;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    wake = thread_sleeping_ && !queue_.empty();
  }
  if (wake) queue_cv_.notify_one();
}

void Engine::ThreadMain() {
  for (;;) {
    std::function<void()> poll;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      if (queue_.empty()) {
        if (stopping_) return;
        // Spin briefly before sleeping: bursts of nonblocking submissions then skip
        // the wake-up latency.
        lock.unlock();
        const auto spin_start = Clock::now();
        while (queued_.load(std::memory_order_acquire) == 0 && SecondsSince(spin_start) < spin_seconds_)
          std::this_thread::yield();
        lock.lock();
      }
      if (queue_.empty() && !stopping_) {
        thread_sleeping_ = true;
        if (poll_) {
          queue_cv_.wait_for(lock, std::chrono::duration<double>(poll_interval_));
        } else {
          queue_cv_.wait(lock, [this] { return !queue_.empty() || stopping_ || poll_; });
        }
        thread_sleeping_ = false;
      }
      poll = poll_;
    }
    if (!exec_mutex_.try_lock()) {
      // A caller is executing; it wakes us if it leaves work behind. Re-check soon.
      std::unique_lock<std::mutex> lock(queue_mutex_);
      thread_sleeping_ = true;
      queue_cv_.wait_for(lock, std::chrono::microseconds(200));
      thread_sleeping_ = false;
      continue;
    }
    RunQueued(nullptr);
    if (poll) {
      try {
        poll();
      } catch (const std::exception& e) {
        STARLING_LOG(LogLevel::kError, "background poll failed: ", e.what());
      }
    }
    exec_mutex_.unlock();
  }
}

}  // namespace starling::runtime
