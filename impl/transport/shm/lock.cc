#include "impl/transport/shm/lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "impl/common/error.h"

namespace starling::transport::shm {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

void SharedLock::Lock(const WaitPolicy& policy, const std::function<void()>& check, const char* what) {
  if (TryLock()) return;
  const Clock::time_point start = Clock::now();
  while (Since(start) < policy.spin_seconds) {
    if (state.load(std::memory_order_relaxed) == 0 && TryLock()) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  // Mark it contended (2) while taking it: whoever unlocks then wakes a sleeper.
  while (state.exchange(2, std::memory_order_acquire) != 0) {
    if (check) check();
    const double waited = Since(start);
    double slice = policy.slice_seconds > 0 ? policy.slice_seconds : 0.01;
    if (policy.timeout_seconds > 0) {
      STARLING_CHECK(waited < policy.timeout_seconds, Code::kTimeout, "waited ", waited, " s for ", what,
                     " (a lock in shared memory; limit ", policy.timeout_seconds, " s)");
      slice = std::min(slice, policy.timeout_seconds - waited);
    }
    FutexWait(state, 2, slice);
  }
}

void SharedLock::Unlock() {
  if (state.exchange(0, std::memory_order_release) == 2)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

}  // namespace starling::transport::shm
