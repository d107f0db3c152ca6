// Blocking calls beside busy processes. Training processes share their cores with
// data loaders and framework threads; a rank waiting for its peer must keep the core
// it has rather than hand it to them. A sched_yield in the wait did exactly that: each
// yield gave a busy process a whole time slice, and small allreduces took 3-15x MPI's
// own (which spins). Starling and MPI_Allreduce are timed here in alternating batches
// on the same ranks, each rank sharing its CPU with a busy process, with exact results.
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace starling_test {
namespace {

// Busy-looping processes (/bin/sh spinning), killed with this process at the latest.
class BusyProcesses {
 public:
  explicit BusyProcesses(int count) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl("/bin/sh", "sh", "-c", "while :; do :; done", static_cast<char*>(nullptr));
        _exit(127);
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~BusyProcesses() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  size_t started() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

template <typename... Parts>
std::string Str(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class Contention : public ContextTest {};

TEST_F(Contention, BlockingAllreduceKeepsPaceWithMpiBesideBusyProcesses) {
  if (size != 2) GTEST_SKIP() << "2 ranks, each sharing its CPU with a busy process";
  // This thread (which makes the blocking calls, and runs them: the engine is idle) and
  // one busy process share one CPU, a different one on each rank where there are two.
  cpu_set_t original, pinned;
  ASSERT_EQ(sched_getaffinity(0, sizeof original, &original), 0);
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &original)) allowed.push_back(cpu);
  ASSERT_FALSE(allowed.empty());
  CPU_ZERO(&pinned);
  CPU_SET(allowed[static_cast<size_t>(rank) % allowed.size()], &pinned);
  ASSERT_EQ(sched_setaffinity(0, sizeof pinned, &pinned), 0);
  struct Restore {
    cpu_set_t set;
    ~Restore() { sched_setaffinity(0, sizeof set, &set); }
  } restore{original};
  BusyProcesses busy(1);  // inherits this thread's affinity
  ASSERT_EQ(busy.started(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it start spinning
  ASSERT_OK(starling_barrier(ctx));

  // One measurement of the three sizes: "" when every size is within the bound, else
  // what was slow.
  auto measure = [&]() -> std::string {
    std::string slow;
    for (const int64_t n : {int64_t{1}, int64_t{1024}, int64_t{65536}}) {
      Buffer in(Kind::kF32, {n}), out(Kind::kF32, {n});
      std::vector<float> raw_out(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) in.set(static_cast<size_t>(i), static_cast<double>(rank + 1) * (i % 97));
      const int calls = n >= 65536 ? 20 : 100;
      std::vector<double> starling_times, mpi_times;
      for (int round = 0; round < 9; ++round) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto start = std::chrono::steady_clock::now();
        for (int c = 0; c < calls; ++c) {
          if (starling_allreduce(ctx, &in.t, &out.t, STARLING_SUM, "busy") != STARLING_SUCCESS)
            return Str(" starling_allreduce failed: ", starling_last_error());
        }
        starling_times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        MPI_Barrier(MPI_COMM_WORLD);
        start = std::chrono::steady_clock::now();
        for (int c = 0; c < calls; ++c)
          MPI_Allreduce(in.bytes(), raw_out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        mpi_times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      for (int64_t i = 0; i < n; ++i) {  // 1 * v + 2 * v, exact in float32
        EXPECT_EQ(out.get(static_cast<size_t>(i)), 3.0 * (i % 97)) << "n " << n << " element " << i;
        EXPECT_EQ(raw_out[static_cast<size_t>(i)], 3.0f * (i % 97));
      }
      const double starling_us = 1e6 * Median(starling_times) / calls;
      const double mpi_us = 1e6 * Median(mpi_times) / calls;
      if (rank == 0) {
        std::printf("float32[%lld]: Starling %.1f us, MPI_Allreduce %.1f us per call\n",
                    static_cast<long long>(n), starling_us, mpi_us);
      }
      // The goal is 2x MPI (plus Starling's fixed cost per call, 1-2 us); the bound
      // leaves room for other jobs on the machine.
      if (starling_us > 3 * mpi_us + 10)
        slow += Str(" float32[", n, "]: ", starling_us, " us against ", mpi_us, " us;");
    }
    return slow;
  };
  // Other jobs on the machine can make one measurement slow; waits that yield made every
  // measurement slow (3-100x at some size: 4 of 4 runs failed). Fail only when 3 in a
  // row are slow on some rank (the ranks agree, as the calls are collective).
  std::string slow;
  for (int attempt = 0; attempt < 3; ++attempt) {
    slow = measure();
    int any_slow = slow.empty() ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, &any_slow, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_slow == 0) break;
    if (rank == 0) std::printf("measurement %d was slow on some rank; measuring again\n", attempt + 1);
  }
  EXPECT_TRUE(slow.empty()) << "blocking allreduce beside busy processes, slower than 3x MPI_Allreduce + 10 us "
                            << "in 3 measurements in a row:" << slow;
}

}  // namespace
}  // namespace starling_test
