// Run at 2 ranks with STARLING_STALL_WARNING_SECONDS=0.5 and STARLING_LOG_LEVEL=warn,
// once with STARLING_TIMEOUT_SECONDS=1.5 (the Timeout tests) and once without (the
// Stall tests, --gtest_filter=Stall.*). A rank that never shows up, is stopped
// (SIGSTOP) or loops forever in the application turns into a TIMEOUT error naming it
// (after a stall warning, which says whether its process is stopped or running); the
// context then refuses further work instead of hanging, and destroying it still works.
// Without a timeout, the stall warning names the silent rank and its state.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "test_util.h"

namespace starling_test {
namespace {

std::string CaptureStderr(const std::function<void()>& body) {
  char path[] = "/tmp/starling_stderr_XXXXXX";
  const int fd = mkstemp(path);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  body();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  unlink(path);
  return text.str();
}

bool TimeoutConfigured() {
  const char* value = std::getenv("STARLING_TIMEOUT_SECONDS");
  return value != nullptr && std::atof(value) > 0;
}

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Every rank's pid (the test processes share a host).
std::vector<int> AllPids() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<int> pids(static_cast<size_t>(size));
  const int mine = static_cast<int>(getpid());
  MPI_Allgather(&mine, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return pids;
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'T', ...), or '?'.
char ProcessState(int pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

// Waits (up to 10 s) until `pid` is stopped.
bool WaitUntilStopped(int pid) {
  const auto start = Clock::now();
  while (Since(start) < 10) {
    if (ProcessState(pid) == 'T') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Keeps this thread busy for `seconds` without calling Starling (an application stuck
// in a loop).
void BusyLoop(double seconds) {
  const auto start = Clock::now();
  volatile uint64_t sink = 0;
  while (Since(start) < seconds) sink = sink + 1;
}

// A context (ContextTest) and a small tensor per test. Timeout tests run only with
// STARLING_TIMEOUT_SECONDS set, Stall tests only without it (ctest runs both ways).
template <bool kWithTimeout>
class PeerWaitTest : public ContextTest {
 protected:
  void SetUp() override {
    if (TimeoutConfigured() != kWithTimeout)
      GTEST_SKIP() << (kWithTimeout ? "needs STARLING_TIMEOUT_SECONDS" : "runs without STARLING_TIMEOUT_SECONDS");
    ContextTest::SetUp();
  }
  Buffer x{Kind::kF32, {4}};
};
using Timeout = PeerWaitTest<true>;
using Stall = PeerWaitTest<false>;

TEST_F(Timeout, AbsentPeerBecomesAnErrorNotAHang) {
  if (rank == 0) {
    starling_status_t status = STARLING_SUCCESS;
    std::string message;
    const auto start = std::chrono::steady_clock::now();
    const std::string log = CaptureStderr([&] {
      status = starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "lonely");
      message = starling_last_error();
    });
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(status, STARLING_ERR_TIMEOUT);
    EXPECT_NE(message.find("allreduce 'lonely'"), std::string::npos) << message;
    EXPECT_NE(message.find("rank(s) 1"), std::string::npos) << message;
    EXPECT_GT(took, 1.4);
    EXPECT_LT(took, 5.0);
    EXPECT_NE(log.find("[starling][rank 0] W"), std::string::npos) << log;
    EXPECT_NE(log.find("has waited"), std::string::npos) << log;
    // The context is now unusable and says so immediately.
    EXPECT_ERROR(starling_barrier(ctx), STARLING_ERR_TRANSPORT, "unusable");
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // never calls the allreduce
  }
}

// Rank 1's process is stopped (SIGSTOP, as by a debugger or Ctrl-Z) before the call;
// rank 0 continues it (SIGCONT) after its timeout so the job can end.
TEST_F(Timeout, StoppedPeerTimesOutNamingItAndItsState) {
  const std::vector<int> pids = AllPids();
  if (rank == 0) {
    ASSERT_TRUE(WaitUntilStopped(pids[1])) << "rank 1 did not stop";
    starling_status_t status = STARLING_SUCCESS;
    std::string message;
    const auto start = Clock::now();
    const std::string log = CaptureStderr([&] {
      status = starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "to_stopped");
      message = starling_last_error();
    });
    const double took = Since(start);
    kill(pids[1], SIGCONT);
    EXPECT_EQ(status, STARLING_ERR_TIMEOUT);
    EXPECT_NE(message.find("allreduce 'to_stopped'"), std::string::npos) << message;
    EXPECT_NE(message.find("rank(s) 1"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1 (pid " + std::to_string(pids[1]) + " on host "), std::string::npos) << message;
    EXPECT_NE(message.find("is stopped"), std::string::npos) << message;
    EXPECT_GT(took, 1.4);
    EXPECT_LT(took, 5.0);
    EXPECT_NE(log.find("has waited"), std::string::npos) << log;
    EXPECT_NE(log.find("is stopped"), std::string::npos) << log;
    EXPECT_ERROR(starling_barrier(ctx), STARLING_ERR_TRANSPORT, "unusable");
  } else {
    kill(getpid(), SIGSTOP);  // resumes when rank 0 sends SIGCONT; never calls the allreduce
  }
}

// Rank 1's application thread loops for 3 s without calling Starling.
TEST_F(Timeout, BusyPeerTimesOutNamingItAsRunning) {
  if (rank == 0) {
    const auto start = Clock::now();
    EXPECT_ERROR(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "to_busy"), STARLING_ERR_TIMEOUT, "rank(s) 1");
    const std::string message = starling_last_error();
    EXPECT_NE(message.find("rank 1 (pid "), std::string::npos) << message;
    EXPECT_NE(message.find("is running"), std::string::npos) << message;
    EXPECT_GT(Since(start), 1.4);
    EXPECT_LT(Since(start), 5.0);
  } else {
    BusyLoop(3.0);
  }
}

// Rank 0's own process is paused while it waits (here SIGSTOP from rank 1; a virtual
// machine paused by its host, a computer that slept or a debugger do the same) for 4 s,
// longer than the 1.5 s timeout. Its peers could not be heard while it did not run, so
// the pause does not count: once continued, it completes the allreduce with rank 1.
TEST_F(Timeout, PausedWaiterDoesNotBlameItsPeers) {
  const std::vector<int> pids = AllPids();
  for (size_t i = 0; i < 4; ++i) x.set(i, 1.0);
  if (rank == 0) {
    const auto start = Clock::now();
    EXPECT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "after_pause"));
    EXPECT_GT(Since(start), 3.9);  // it really was paused
    EXPECT_EQ(x.get(0), 2.0);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 is waiting by now
    kill(pids[0], SIGSTOP);
    ASSERT_TRUE(WaitUntilStopped(pids[0])) << "rank 0 did not stop";
    std::this_thread::sleep_for(std::chrono::seconds(4));
    kill(pids[0], SIGCONT);
    EXPECT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "after_pause"));
    EXPECT_EQ(x.get(0), 2.0);
  }
}

// Without a timeout the operation waits; the warning names the stopped rank and says
// it is stopped. Rank 0 continues rank 1 after 2 s and the allreduce then completes.
TEST_F(Stall, WarningNamesAStoppedPeer) {
  const std::vector<int> pids = AllPids();
  for (size_t i = 0; i < 4; ++i) x.set(i, 1.0);
  if (rank == 0) {
    ASSERT_TRUE(WaitUntilStopped(pids[1])) << "rank 1 did not stop";
    std::thread resume([&] {
      std::this_thread::sleep_for(std::chrono::seconds(2));
      kill(pids[1], SIGCONT);
    });
    starling_status_t status = STARLING_ERR_INTERNAL;
    const std::string log = CaptureStderr([&] { status = starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "late"); });
    resume.join();
    EXPECT_EQ(status, STARLING_SUCCESS) << starling_last_error();
    EXPECT_EQ(x.get(0), 2.0);
    EXPECT_NE(log.find("allreduce 'late'"), std::string::npos) << log;
    EXPECT_NE(log.find("rank(s) 1 (not heard from)"), std::string::npos) << log;
    EXPECT_NE(log.find("rank 1 (pid " + std::to_string(pids[1]) + " on host "), std::string::npos) << log;
    EXPECT_NE(log.find("is stopped (SIGSTOP"), std::string::npos) << log;
  } else {
    kill(getpid(), SIGSTOP);
    EXPECT_OK(starling_allreduce(ctx, &x.t, &x.t, STARLING_SUM, "late"));
  }
}

// The same with an application thread that loops for 2 s: the warning says "running".
TEST_F(Stall, WarningNamesABusyPeer) {
  if (rank == 0) {
    starling_status_t status = STARLING_ERR_INTERNAL;
    const std::string log = CaptureStderr([&] { status = starling_barrier(ctx); });
    EXPECT_EQ(status, STARLING_SUCCESS) << starling_last_error();
    EXPECT_NE(log.find("rank(s) 1 (not heard from)"), std::string::npos) << log;
    EXPECT_NE(log.find("rank 1 (pid "), std::string::npos) << log;
    EXPECT_NE(log.find("is running"), std::string::npos) << log;
  } else {
    BusyLoop(2.0);
    EXPECT_OK(starling_barrier(ctx));
  }
}

}  // namespace
}  // namespace starling_test
