#include "impl/transport/shm/lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace starling::transport::shm {

void SharedLock::Lock(const WaitPolicy& policy, const std::function<void()>& check, const char* what) {
  if (TryLock()) return;
  const SlicedWait wait(policy, check, what);
  while (wait.Spinning()) {
    if (state.load(std::memory_order_relaxed) == 0 && TryLock()) return;
    CpuRelax();
  }
  // Mark it contended (2) while taking it: whoever unlocks then wakes a sleeper.
  while (state.exchange(2, std::memory_order_acquire) != 0) FutexWait(state, 2, wait.NextSleep());
}

void SharedLock::Unlock() {
  if (state.exchange(0, std::memory_order_release) == 2)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

}  // namespace starling::transport::shm
