// A mutex that threads of different processes can share: a word in shared memory
// (0 free, 1 held, 2 held with sleepers, as in Drepper's "Futexes Are Tricky"), taken
// with a brief spin, then sleeps on a shared futex. A process that dies holding it
// leaves it held: waiters find out through `check` (the failure probes), never hang.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "impl/transport/shm/futex.h"

namespace starling::transport::shm {

struct SharedLock {
  std::atomic<uint32_t> state{0};

  // Takes it if free (acquire ordering).
  bool TryLock() {
    uint32_t expected = 0;
    return state.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  // Takes it, waiting under `policy`; between sleeps `check` (may be empty) may end the
  // wait by throwing. Throws Error(kTimeout) naming `what` after policy.timeout_seconds.
  void Lock(const WaitPolicy& policy, const std::function<void()>& check, const char* what);
  // Releases it (release ordering) and wakes a sleeper, if any.
  void Unlock();
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared locks must be lock-free");

}  // namespace starling::transport::shm
