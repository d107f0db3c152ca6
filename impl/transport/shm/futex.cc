#include "impl/transport/shm/futex.h"

#include <sched.h>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <ctime>

#include "impl/common/error.h"

namespace starling::transport::shm {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

uint32_t* Word(std::atomic<uint32_t>& word) { return reinterpret_cast<uint32_t*>(&word); }

}  // namespace

void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, double seconds) {
  if (!(seconds > 0)) return;
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(seconds);
  timeout.tv_nsec = static_cast<long>((seconds - std::floor(seconds)) * 1e9);
  // EAGAIN (the word changed), EINTR and ETIMEDOUT all mean: look again.
  syscall(SYS_futex, Word(word), FUTEX_WAIT, expected, &timeout, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) { syscall(SYS_futex, Word(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

void Set(SharedCounter& counter, uint32_t value) {
  counter.value.store(value, std::memory_order_seq_cst);  // release for the data written before
  if (counter.sleepers.load(std::memory_order_seq_cst) != 0) FutexWakeAll(counter.value);
}

SlicedWait::SlicedWait(const WaitPolicy& policy, const std::function<void()>& check, const char* what)
    : policy_(policy), check_(check), what_(what), start_(Clock::now()) {}

bool SlicedWait::Spinning() const { return Since(start_) < policy_.spin_seconds; }

double SlicedWait::NextSleep() const {
  if (check_) check_();
  const double waited = Since(start_);
  double slice = policy_.slice_seconds > 0 ? policy_.slice_seconds : 0.01;
  if (policy_.timeout_seconds > 0) {
    STARLING_CHECK(waited < policy_.timeout_seconds, Code::kTimeout, "waited ", waited, " s for ", what_,
                   " in shared memory (limit ", policy_.timeout_seconds, " s)");
    slice = std::min(slice, policy_.timeout_seconds - waited);
  }
  return slice;
}

uint32_t WaitUntil(SharedCounter& counter, const std::function<bool(uint32_t)>& done, const WaitPolicy& policy,
                   const std::function<void()>& check, const char* what) {
  uint32_t value = counter.value.load(std::memory_order_acquire);
  if (done(value)) return value;
  const SlicedWait wait(policy, check, what);
  // The clock is read every 8 polls: a poll stays a load, not a system clock read.
  for (unsigned polls = 1;; ++polls) {
    if (policy.yield) sched_yield();
    else CpuRelax();
    value = counter.value.load(std::memory_order_acquire);
    if (done(value)) return value;
    if (polls % 8 == 0 && !wait.Spinning()) break;
  }
  for (;;) {
    const double slice = wait.NextSleep();
    // Announce the sleep, then look once more: a Set() between the two is seen here,
    // a later one sees the sleeper (both sides sequentially consistent).
    counter.sleepers.fetch_add(1, std::memory_order_seq_cst);
    value = counter.value.load(std::memory_order_seq_cst);
    if (!done(value)) FutexWait(counter.value, value, slice);
    counter.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    value = counter.value.load(std::memory_order_acquire);
    if (done(value)) return value;
  }
}

}  // namespace starling::transport::shm
