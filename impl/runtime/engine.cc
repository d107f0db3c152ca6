#include "impl/runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "impl/common/logging.h"
#include "impl/runtime/context.h"

namespace starling::runtime {
namespace {
using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Submissions closer together than this form a burst: the progress thread lets the
// burst finish before running fusable work, so it travels as one group.
constexpr int64_t kBurstGapNs = 10'000;
constexpr int64_t kMaxBurstWaitNs = 200'000;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

Engine::Engine(Context& context)
    : context_(context),
      spin_seconds_(context.config().spin_microseconds * 1e-6),
      fusion_threshold_(context.config().fusion_threshold) {}

Engine::~Engine() { Stop(); }

void Engine::Start() { thread_ = std::thread([this] { ThreadMain(); }); }

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // A caller may still be running an operation on its own thread (Execute or Wait);
  // the context's resources must outlive it.
  std::lock_guard<std::mutex> wait_for_executor(exec_mutex_);
}

void Engine::Abort() {
  std::deque<std::unique_ptr<Op>> drained;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    drained.swap(queue_);
    queued_.store(0, std::memory_order_release);
  }
  queue_cv_.notify_all();
  for (auto& op : drained) {
    context_.stats().operations.fetch_add(1, std::memory_order_relaxed);
    op->request->Complete(Code::kAborted,
                          Str(op->Describe(), ": aborted before it ran (starling_context_abort)"));
  }
}

void Engine::FailQueued() {
  std::deque<std::unique_ptr<Op>> drained;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    drained.swap(queue_);
    queued_.store(0, std::memory_order_release);
  }
  for (auto& op : drained) RunOne(*op);  // fails at once: the context is not usable
}

std::unique_lock<std::mutex> Engine::Quiesce() {
  FailQueued();
  std::unique_lock<std::mutex> lock(exec_mutex_);  // the running operation fails fast
  FailQueued();  // what was submitted meanwhile
  return lock;
}

std::unique_lock<std::mutex> Engine::Drain() {
  std::unique_lock<std::mutex> lock(exec_mutex_);
  RunQueued(nullptr);
  return lock;
}

void Engine::RefuseWhenStopped(const Op& op) const {
  if (!stopping_.load()) return;
  if (context_.left()) context_.CheckUsable();  // a shrink took this rank out: says so
  Fail(Code::kShutdown, op.Describe(), ": the context is being destroyed");
}

std::shared_ptr<Request> Engine::Submit(std::unique_ptr<Op> op) {
  std::shared_ptr<Request> request = op->request;
  if (Timeline* timeline = context_.timeline()) timeline->Instant(op->TimelineLane(), "ENQUEUE");
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    RefuseWhenStopped(*op);
    STARLING_CHECK(!context_.aborted(), Code::kAborted, op->Describe(),
                   ": the context was aborted (starling_context_abort); destroy it");
    queue_.push_back(std::move(op));
    queued_.fetch_add(1, std::memory_order_release);
    last_submit_ns_.store(NowNs(), std::memory_order_relaxed);
    wake = thread_sleeping_;
  }
  if (wake) queue_cv_.notify_one();
  return request;
}

// The application's thread is blocked in Starling from here until the scope ends
// (starling_stats_t.blocked_ns).
class Engine::BlockedTime {
 public:
  explicit BlockedTime(Stats& stats) : stats_(stats), start_(NowNs()) {}
  ~BlockedTime() { stats_.blocked_ns.fetch_add(static_cast<uint64_t>(NowNs() - start_), std::memory_order_relaxed); }

 private:
  Stats& stats_;
  int64_t start_;
};

std::shared_ptr<Request> Engine::Execute(std::unique_ptr<Op> op) {
  BlockedTime blocked(context_.stats());
  if (exec_mutex_.try_lock()) {
    std::shared_ptr<Request> request = op->request;
    if (stopping_.load()) {
      exec_mutex_.unlock();
      RefuseWhenStopped(*op);
    }
    RunQueued(nullptr);  // earlier submissions first
    RunOne(*op);
    exec_mutex_.unlock();
    WakeThreadIfWorkLeft();
    return request;
  }
  std::shared_ptr<Request> request = Submit(std::move(op));
  WaitUntilDone(*request);
  return request;
}

void Engine::Wait(Request& request) {
  BlockedTime blocked(context_.stats());
  WaitUntilDone(request);
}

void Engine::WaitUntilDone(Request& request) {
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

void Engine::SetBackgroundPoll(std::function<bool()> poll, double max_interval_seconds) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    poll_ = std::move(poll);
    poll_max_interval_ = max_interval_seconds;
  }
  queue_cv_.notify_all();
}

void Engine::SetTick(std::function<void()> tick, double interval_seconds) {
  tick_ = std::move(tick);
  tick_interval_ = interval_seconds;
}

void Engine::RunQueued(const Request* until) {
  while (until == nullptr || !until->done()) {
    if (queued_.load(std::memory_order_acquire) == 0) return;  // the common case, without the lock
    std::vector<std::unique_ptr<Op>> group;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      if (queue_.empty()) return;
      group.push_back(std::move(queue_.front()));
      queue_.pop_front();
      CollectFusable(group);
      queued_.fetch_sub(group.size(), std::memory_order_release);
    }
    if (group.size() == 1) {
      RunOne(*group[0]);
    } else {
      RunFused(group);
    }
  }
}

void Engine::CollectFusable(std::vector<std::unique_ptr<Op>>& group) {
  constexpr size_t kMaxGroup = 256;
  const std::string& key = group[0]->fusion_key();
  if (key.empty() || fusion_threshold_ == 0) return;
  size_t bytes = group[0]->fusion_bytes();
  while (!queue_.empty() && group.size() < kMaxGroup && queue_.front()->fusion_key() == key &&
         bytes + queue_.front()->fusion_bytes() <= fusion_threshold_) {
    bytes += queue_.front()->fusion_bytes();
    group.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

namespace {
// The status of the exception in flight, prefixed with the op's description.
std::pair<Code, std::string> Classify(const Op& op) {
  try {
    throw;
  } catch (const Error& e) {
    return {e.code(), Str(op.Describe(), ": ", e.what())};
  } catch (const std::bad_alloc&) {
    return {Code::kOutOfMemory, Str(op.Describe(), ": out of memory")};
  } catch (const std::exception& e) {
    return {Code::kInternal, Str(op.Describe(), ": internal error: ", e.what())};
  }
}
}  // namespace

void Engine::RunOne(Op& op) {
  Timeline* timeline = context_.timeline();
  const std::string lane = timeline ? op.TimelineLane() : std::string();
  if (timeline) timeline->Begin(lane, "RUN", op.Describe());
  try {
    context_.CheckUsable();
    context_.ClearRunningKind();
    op.Run(context_);
    if (timeline) timeline->End(lane);
    Complete(op, Code::kOk, {});
  } catch (...) {
    if (timeline) timeline->End(lane);
    auto [code, message] = Classify(op);
    Complete(op, code, std::move(message));
  }
}

void Engine::RunFused(const std::vector<std::unique_ptr<Op>>& group) {
  std::vector<Op*> members;
  for (const auto& op : group) members.push_back(op.get());
  context_.stats().fusion_groups.fetch_add(1, std::memory_order_relaxed);
  context_.stats().fused_operations.fetch_add(group.size(), std::memory_order_relaxed);
  STARLING_LOG_DEBUG("fused ", group.size(), " operations starting with ", group[0]->Describe());
  Timeline* timeline = context_.timeline();
  if (timeline)
    for (Op* op : members) timeline->Begin(op->TimelineLane(), Str("RUN (fused, ", group.size(), " operations)"));
  auto end_spans = [&] {
    if (timeline)
      for (Op* op : members) timeline->End(op->TimelineLane());
  };
  try {
    context_.CheckUsable();
    context_.ClearRunningKind();
    group[0]->RunGroup(context_, members);
    end_spans();
  } catch (...) {
    end_spans();
    auto [code, message] = Classify(*group[0]);
    for (const auto& op : group) Complete(*op, code, message);
    return;
  }
  for (const auto& op : group) {
    if (op->failure) {
      Complete(*op, op->failure->code(), Str(op->Describe(), ": ", op->failure->what()));
    } else {
      Complete(*op, Code::kOk, {});
    }
  }
}

void Engine::Complete(Op& op, Code code, std::string message) {
  Stats& stats = context_.stats();
  stats.operations.fetch_add(1, std::memory_order_relaxed);
  stats.scratch_bytes.store(context_.scratch().bytes_held(), std::memory_order_relaxed);
  if (code == Code::kTimeout || code == Code::kTransport || code == Code::kPeerFailed)
    context_.MarkBroken(message, code == Code::kPeerFailed ? Code::kPeerFailed : Code::kTransport);
  if (code != Code::kOk) STARLING_LOG(LogLevel::kError, message);
  op.request->Complete(code, std::move(message));
}

bool Engine::BurstInProgress() {
  const int64_t now = NowNs();
  const int64_t last = last_submit_ns_.load(std::memory_order_relaxed);
  if (now - last >= kBurstGapNs) return false;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  if (queue_.empty() || queue_.front()->fusion_key().empty()) return false;
  size_t bytes = 0;
  for (const auto& op : queue_) bytes += op->fusion_bytes();
  return bytes < fusion_threshold_;
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

namespace {
thread_local bool t_progress_thread = false;
}  // namespace

bool Engine::OnProgressThread() { return t_progress_thread; }

void Engine::ThreadMain() {
  t_progress_thread = true;
  // Background polls back off geometrically while nothing arrives, from a few
  // microseconds up to the configured maximum, and reset after any work.
  constexpr double kMinPollInterval = 20e-6;
  double interval = kMinPollInterval;
  Clock::time_point next_tick = Clock::now();
  const auto tick_interval = std::chrono::duration<double>(tick_interval_);
  for (;;) {
    if (tick_ && Clock::now() >= next_tick) {
      tick_();
      next_tick = Clock::now() + std::chrono::duration_cast<Clock::duration>(tick_interval);
    }
    std::function<bool()> poll;
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
          queue_cv_.wait_for(lock, std::chrono::duration<double>(tick_ ? std::min(interval, tick_interval_) : interval));
        } else {
          interval = kMinPollInterval;
          const auto woken = [this] { return !queue_.empty() || stopping_ || poll_; };
          if (tick_) {
            queue_cv_.wait_until(lock, next_tick, woken);
          } else {
            queue_cv_.wait(lock, woken);
          }
        }
        thread_sleeping_ = false;
      }
      poll = poll_;
      if (poll) interval = std::min(interval * 2, poll_max_interval_);
    }
    // Let a burst of fusable submissions finish (bounded) so it fuses into one group.
    const int64_t burst_start = NowNs();
    while (fusion_threshold_ > 0 && BurstInProgress() && NowNs() - burst_start < kMaxBurstWaitNs)
      std::this_thread::yield();
    // Window requests are served without the execution lock: the application's own
    // operations are never held up by it.
    if (poll && !context_.aborted()) {
      try {
        if (poll()) interval = kMinPollInterval;
      } catch (const std::exception& e) {
        STARLING_LOG(LogLevel::kError, "window service failed: ", e.what());
      }
    }
    if (queued_.load(std::memory_order_acquire) == 0) continue;
    if (!exec_mutex_.try_lock()) {
      // A caller is executing; it wakes us if it leaves work behind. Re-check soon.
      std::unique_lock<std::mutex> lock(queue_mutex_);
      thread_sleeping_ = true;
      queue_cv_.wait_for(lock, std::chrono::microseconds(200));
      thread_sleeping_ = false;
      continue;
    }
    RunQueued(nullptr);
    exec_mutex_.unlock();
  }
}

}  // namespace starling::runtime
