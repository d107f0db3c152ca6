// The process probes behind peer failure detection, on real child processes: running,
// stopped (SIGSTOP), a zombie (exited, not yet reaped), gone (reaped), a reused pid; and
// which processes share this machine's CPUs (a child with a host name of its own).
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "impl/common/process.h"

namespace starling {
namespace {

// A child that sleeps until killed; its identity as another rank would see it.
struct Child {
  pid_t pid = -1;
  ProcessIdentity identity;
  Child() {
    pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
    // The child's identity as its own ThisProcess() would report it: this process's
    // host key (same host, same pid namespace) and the child's pid and start time.
    identity = ThisProcess();
    identity.pid = pid;
    identity.start_ticks = StartTicksOf(pid);
  }
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  static uint64_t StartTicksOf(pid_t pid);
};

ProcessState WaitFor(const ProcessIdentity& id, ProcessState want) {
  ProcessState state = Probe(id);
  for (int i = 0; i < 200 && state != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    state = Probe(id);
  }
  return state;
}

uint64_t Child::StartTicksOf(pid_t pid) {
  // /proc/<pid>/stat field 22, read independently of process.cc.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  char line[1024] = {};
  const size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  line[n] = '\0';
  const char* p = std::strrchr(line, ')');
  if (!p) return 0;
  p += 2;
  for (int field = 3; field < 22 && p; ++field) {
    p = std::strchr(p, ' ');
    if (p) ++p;
  }
  return p ? std::strtoull(p, nullptr, 10) : 0;
}

TEST(Process, ThisProcessIsRunningAndProbeable) {
  const ProcessIdentity self = ThisProcess();
  EXPECT_EQ(self.pid, getpid());
  EXPECT_NE(self.host_key, 0u);
  EXPECT_GT(self.start_ticks, 0u);
  EXPECT_TRUE(ProbeableFrom(self, self));
  EXPECT_EQ(Probe(self), ProcessState::kRunning);
  EXPECT_NE(DescribeProcess(self).find("pid " + std::to_string(getpid()) + " on host "), std::string::npos);
}

TEST(Process, OtherHostsAreNotProbeable) {
  const ProcessIdentity self = ThisProcess();
  ProcessIdentity other = self;
  other.host_key ^= 1;
  EXPECT_FALSE(ProbeableFrom(self, other));
  ProcessIdentity unknown = self;
  unknown.host_key = 0;
  EXPECT_FALSE(ProbeableFrom(unknown, unknown));
}

// A container or network-namespace "host" on this machine: another host name, so not
// probeable, but the same kernel and CPUs (whether waits may spin counts such ranks).
TEST(Process, HostsOfOneMachineShareItsKernel) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    ProcessIdentity other;  // all zero: unshare or sethostname failed
    static const char kName[] = "starling-test-other-host";
    if (unshare(CLONE_NEWUTS) == 0 && sethostname(kName, sizeof kName - 1) == 0) other = ThisProcess();
    const ssize_t written = write(fds[1], &other, sizeof other);
    _exit(written == static_cast<ssize_t>(sizeof other) ? 0 : 1);
  }
  ASSERT_GT(pid, 0);
  close(fds[1]);
  ProcessIdentity other;
  const ssize_t got = read(fds[0], &other, sizeof other);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof other));
  if (other.pid == 0) GTEST_SKIP() << "cannot give a child a host name of its own here (needs CAP_SYS_ADMIN)";
  const ProcessIdentity self = ThisProcess();
  EXPECT_STREQ(other.host, "starling-test-other-host");
  EXPECT_NE(other.host_key, self.host_key);
  EXPECT_FALSE(ProbeableFrom(self, other));
  EXPECT_NE(self.kernel_key, 0u);
  EXPECT_EQ(other.kernel_key, self.kernel_key);
  EXPECT_TRUE(SameKernel(self, other));
  ProcessIdentity elsewhere = other;
  elsewhere.kernel_key ^= 1;  // another machine (or VM): another boot id
  EXPECT_FALSE(SameKernel(self, elsewhere));
  ProcessIdentity unknown = self;
  unknown.kernel_key = 0;
  EXPECT_FALSE(SameKernel(unknown, unknown));
}

TEST(Process, StoppedZombieGoneAndReusedPids) {
  Child child;
  ASSERT_GT(child.pid, 0);
  ASSERT_GT(child.identity.start_ticks, 0u);
  EXPECT_EQ(Probe(child.identity), ProcessState::kRunning);
  kill(child.pid, SIGSTOP);
  EXPECT_EQ(WaitFor(child.identity, ProcessState::kStopped), ProcessState::kStopped);
  kill(child.pid, SIGCONT);
  EXPECT_EQ(WaitFor(child.identity, ProcessState::kRunning), ProcessState::kRunning);
  // Same pid, other start time: a reused pid is a gone process.
  ProcessIdentity reused = child.identity;
  reused.start_ticks += 1;
  EXPECT_EQ(Probe(reused), ProcessState::kGone);
  // Killed but not reaped: a zombie is gone.
  kill(child.pid, SIGKILL);
  EXPECT_EQ(WaitFor(child.identity, ProcessState::kGone), ProcessState::kGone);
  waitpid(child.pid, nullptr, 0);
  EXPECT_EQ(Probe(child.identity), ProcessState::kGone);
  child.pid = -1;
  EXPECT_STREQ(StateName(ProcessState::kStopped), "stopped");
}

// The watch behind shared-memory window writes: a living (even stopped) process is not
// exited; a killed one is at once, before its parent reaps it; a reused pid too.
TEST(Process, WatchSeesAnExitBeforeTheReap) {
  Child child;
  ASSERT_GT(child.pid, 0);
  ProcessWatch watch(child.identity);
  EXPECT_FALSE(watch.Exited());
  kill(child.pid, SIGSTOP);
  EXPECT_EQ(WaitFor(child.identity, ProcessState::kStopped), ProcessState::kStopped);
  EXPECT_FALSE(watch.Exited()) << "a stopped process has not exited";
  kill(child.pid, SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!watch.Exited() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(watch.Exited()) << "a zombie (killed, not yet reaped) has exited";
  ProcessWatch moved = std::move(watch);
  EXPECT_TRUE(moved.Exited());
  waitpid(child.pid, nullptr, 0);
  EXPECT_TRUE(moved.Exited());
  ProcessWatch late(child.identity);  // begun after the exit
  EXPECT_TRUE(late.Exited());
  child.pid = -1;
  ProcessIdentity reused = ThisProcess();
  reused.start_ticks += 1;
  EXPECT_TRUE(ProcessWatch(reused).Exited()) << "a reused pid";
  EXPECT_FALSE(ProcessWatch(ThisProcess()).Exited());
}

}  // namespace
}  // namespace starling
