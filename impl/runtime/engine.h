// The progress engine of one context: an ordered queue of operations and an
// execution lock. Operations run one at a time, in submission order, on whichever
// thread holds the lock:
//  - the context's progress thread, which sleeps while there is nothing to do and
//    runs nonblocking work in the background;
//  - a caller making a blocking call or waiting on a request while the progress
//    thread is not executing: it runs the queue itself instead of paying two thread
//    wake-ups (about 50 us on these machines, against 1-3 us for a small MPI message).
// Either way each operation runs exactly once, in order, with the same code.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "impl/runtime/op.h"

namespace starling::runtime {

class Context;

class Engine {
 public:
  explicit Engine(Context& context);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void Start();
  // Drains the queue (every submitted operation runs) and joins the progress thread,
  // then waits for a caller still executing an operation. Later submissions fail with
  // Code::kShutdown.
  void Stop();
  // Context::Abort: completes every queued operation with kAborted now and wakes the
  // progress thread; the running operation fails in its wait loop. Later submissions
  // fail with kAborted. Any thread.
  void Abort();

  // starling_context_repair (the context is failed): completes every queued operation
  // with the context's error, waits for the running one to fail, and returns the
  // execution lock: nothing runs until it is released.
  std::unique_lock<std::mutex> Quiesce();
  // Runs every queued operation (in order) and returns the execution lock, held: on a
  // usable context, nothing else runs until it is released (starling_context_grow).
  std::unique_lock<std::mutex> Drain();

  // Queues `op` and returns its request. Throws Error(kShutdown) after Stop(),
  // Error(kAborted) after Abort().
  std::shared_ptr<Request> Submit(std::unique_ptr<Op> op);
  // Throws once Stop() ran: kShutdown, or the context's own error when a shrink took
  // this rank out of it.
  void RefuseWhenStopped(const Op& op) const;
  // Runs `op` and returns its finished request: on this thread when nothing else is
  // executing (after any queued operations, to keep the order), else via the queue.
  std::shared_ptr<Request> Execute(std::unique_ptr<Op> op);
  // Blocks until `request` is done, running queued operations while nobody else does.
  void Wait(Request& request);

  // True on any context's progress thread (a thread Starling owns: it may set that
  // thread's CUDA device, which no application code relies on).
  static bool OnProgressThread();

  // Background polling (windows): while set, the progress thread calls `poll` (without
  // the execution lock). `poll` returns true when it did work; the thread then
  // polls again soon, else it backs off to at most `max_interval_seconds`.
  void SetBackgroundPoll(std::function<bool()> poll, double max_interval_seconds);
  // A periodic duty (the failure detector's answers to pings): while set, the progress
  // thread calls `tick` (without the execution lock) at least every `interval_seconds`,
  // also while it has nothing else to do. Set before Start().
  void SetTick(std::function<void()> tick, double interval_seconds);

 private:
  class BlockedTime;
  void WaitUntilDone(Request& request);
  void ThreadMain();
  // Runs queued operations until the queue is empty or `until` is done. Execution
  // lock held.
  void RunQueued(const Request* until);
  void RunOne(Op& op);
  void FailQueued();  // Quiesce: each queued op completes with the context's error
  // Runs a fused group (group[0] first) and completes every member's request.
  void RunFused(const std::vector<std::unique_ptr<Op>>& group);
  // Moves into `group` the queued ops that can fuse with group[0]. Queue lock held.
  void CollectFusable(std::vector<std::unique_ptr<Op>>& group);
  // Completes `op`'s request from the exception in flight (or success if none).
  void Complete(Op& op, Code code, std::string message);
  void WakeThreadIfWorkLeft();
  // Progress thread: true while a burst of fusable submissions is still arriving.
  bool BurstInProgress();

  Context& context_;
  std::mutex exec_mutex_;  // held while an operation (or a background poll) runs

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<std::unique_ptr<Op>> queue_;  // guarded by queue_mutex_
  std::atomic<size_t> queued_{0};          // queue_.size(), readable without the lock
  std::atomic<bool> stopping_{false};      // written under queue_mutex_, read anywhere
  bool thread_sleeping_ = false;           // guarded by queue_mutex_
  std::function<bool()> poll_;             // guarded by queue_mutex_
  double poll_max_interval_ = 0;           // guarded by queue_mutex_
  std::function<void()> tick_;             // set before Start
  double tick_interval_ = 0;
  double spin_seconds_ = 0;
  size_t fusion_threshold_ = 0;
  std::atomic<int64_t> last_submit_ns_{0};  // monotonic ns of the last submission
  std::thread thread_;
};

}  // namespace starling::runtime
