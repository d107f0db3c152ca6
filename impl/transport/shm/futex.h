// Waiting on a word in shared memory: a brief spin, then sleeps on a futex that other
// processes can wake. std::atomic::wait is no use here: it sleeps on process-private
// futexes (FUTEX_PRIVATE_FLAG), which a writer in another process never wakes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

namespace starling::transport::shm {

// A 32-bit counter that waiters in any process sleep on, on a cache line of its own
// (128 bytes: adjacent-line prefetch pairs 64-byte lines). Lives in shared memory, so it
// must be address-free: std::atomic<uint32_t> is, being lock-free.
struct alignas(128) SharedCounter {
  std::atomic<uint32_t> value{0};
  // Processes asleep (or about to be) on `value`: Set() skips the wake system call
  // while nobody sleeps.
  std::atomic<uint32_t> sleepers{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared counters must be lock-free");
static_assert(sizeof(SharedCounter) == 128, "one counter per 128-byte line");

// Stores `value` with release ordering (everything written before is visible to a
// waiter that sees it) and wakes every sleeper. The store and the sleepers load are
// sequentially consistent, pairing with Wait's increment-then-recheck: either the
// waker sees the sleeper, or the sleeper sees the new value (and the kernel's own
// compare in FUTEX_WAIT closes the rest).
void Set(SharedCounter& counter, uint32_t value);

struct WaitPolicy {
  double spin_seconds = 50e-6;   // busy-polls this long before the first sleep
  double slice_seconds = 0.01;   // longest single sleep: `check` runs between slices
  double timeout_seconds = 0.0;  // 0: no limit; else Error(kTimeout) after this long
  // Gives the core away (sched_yield) between polls of the spin: where ranks outnumber
  // cores, the peer awaited may need this very core.
  bool yield = false;
};

// Busy-wait hint to the CPU (frees the core's resources for its sibling thread).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// The shape of every wait on shared memory: spin for policy.spin_seconds, then sleep in
// slices of at most policy.slice_seconds, calling `check` (may be empty) before each,
// which ends the wait by throwing (abort, a dead peer); Error(kTimeout) naming `what`
// once policy.timeout_seconds (if > 0) has passed. Lives inside one wait: it refers to
// the caller's `check`.
class SlicedWait {
 public:
  SlicedWait(const WaitPolicy& policy, const std::function<void()>& check, const char* what);
  // True while the spin lasts.
  bool Spinning() const;
  // Runs the check and the limit; returns how long the next sleep may be.
  double NextSleep() const;

 private:
  WaitPolicy policy_;
  const std::function<void()>& check_;
  const char* what_;
  std::chrono::steady_clock::time_point start_;
};

// Waits until done(value) holds for the counter's value (loaded with acquire
// ordering, pairing with Set's release) and returns that value. Between sleeps it
// calls `check` (may be empty), which ends the wait by throwing (abort, a dead peer).
// Throws Error(kTimeout) naming `what` once policy.timeout_seconds has passed.
uint32_t WaitUntil(SharedCounter& counter, const std::function<bool(uint32_t)>& done, const WaitPolicy& policy,
                   const std::function<void()>& check, const char* what);

// The raw calls (shared futexes: no FUTEX_PRIVATE_FLAG). Wait returns at once if the
// word no longer holds `expected`; also on a wake, a signal or after `seconds`.
void FutexWait(std::atomic<uint32_t>& word, uint32_t expected, double seconds);
void FutexWakeAll(std::atomic<uint32_t>& word);

// Wrap-safe order of 32-bit sequence numbers: a is at or after b.
inline bool AtOrAfter(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

}  // namespace starling::transport::shm
