// Open MPI's mpirun can hang, or crash, in its own teardown after every rank has ended:
// Open MPI 4.1 with PMIx 4 deadlocks in PMIx_server_finalize in about 1 job in 60 where
// ranks exit with errors at the same moment (gdb: the main thread joins PMIx's progress
// thread, which waits on a mutex), leaving the ranks as zombies. The job then never ends.
// TeardownWatch sees that state: mpirun has had processes below it, and none of them
// has been alive (only zombies, or none) for a while.
#ifndef STARLING_IMPL_LAUNCHER_TEARDOWN_WATCH_H_
#define STARLING_IMPL_LAUNCHER_TEARDOWN_WATCH_H_

#include <sys/types.h>

#include <chrono>

namespace starling::launcher {

class TeardownWatch {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TeardownWatch(pid_t mpirun) : root_(mpirun) {}
  // Walks /proc (call it about once a second). True once mpirun has had descendants and
  // none has been alive for `grace`.
  bool Stuck(Clock::duration grace);
  // A failure seen among the zombies below mpirun, as an exit status, or 0 if none of
  // those seen failed: a non-zero exit (1-255) before a death by a signal (128 +
  // signal), which is mostly mpirun's own SIGTERM or SIGKILL to the ranks that were
  // still running when the first failed.
  int failure_status() const { return exit_failure_ != 0 ? exit_failure_ : signal_failure_; }

 private:
  pid_t root_;
  bool had_descendants_ = false;
  bool idle_ = false;
  Clock::time_point idle_since_{};
  int exit_failure_ = 0;
  int signal_failure_ = 0;
};

}  // namespace starling::launcher

#endif  // STARLING_IMPL_LAUNCHER_TEARDOWN_WATCH_H_
