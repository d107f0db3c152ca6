// starlingrun: runs a program as N ranks under Open MPI's mpirun (see --help).
// This file holds the process control: mpirun runs as a child in its own process
// group, so that a timeout or a forwarded signal reaches mpirun and every rank it
// started on this machine, and nothing is left behind.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <starling/starling.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "impl/launcher/command.h"
#include "impl/launcher/rank_watch.h"
#include "impl/launcher/session_dir.h"
#include "impl/launcher/teardown_watch.h"

namespace starling::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// How long mpirun gets to stop its ranks after SIGTERM or a forwarded signal.
constexpr std::chrono::seconds kGrace{5};
// How long mpirun may outlive every process it started before it counts as hung in its
// own teardown (teardown_watch.h). A healthy mpirun exits well within a second.
constexpr std::chrono::seconds kTeardownGrace{5};

int UsageError(const std::string& message) {
  std::fprintf(stderr, "starlingrun: %s\nsee starlingrun --help\n", message.c_str());
  return kExitUsage;
}

void IgnoreSignal(int) {}  // signals are taken with sigtimedwait; the handler never runs

const char* SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

// Child side of the fork: own process group, then exec mpirun. Never returns.
[[noreturn]] void ExecMpirun(const std::vector<std::string>& command, const sigset_t& old_mask,
                             pid_t launcher) {
  setpgid(0, 0);
#ifdef __linux__
  // If the launcher itself is killed (SIGKILL, OOM), mpirun still stops its ranks.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) _exit(kExitCannotRun);
#endif
  (void)launcher;
  // mpirun keeps this pid: a session directory left under it by a killed mpirun would
  // stop it from starting (session_dir.h). The launcher is single-threaded, so the
  // allocations this needs are safe after fork.
  RemoveStaleSessionDir(SessionDirFor(getpid()));
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int err = errno;
  std::fprintf(
      stderr, "starlingrun: cannot run '%s': %s%s\n", argv[0], std::strerror(err),
      err == ENOENT ? " (is Open MPI installed? STARLING_MPIRUN names the mpirun to use)" : "");
  _exit(kExitCannotRun);
}

// Runs the command and waits for it. Returns the launcher's exit status.
// watch_ranks (--fault-tolerant): report ranks that die while the job goes on; marks:
// the directory where ranks that exit normally leave a file (empty: none).
int Supervise(const std::vector<std::string>& command, double timeout_seconds, bool watch_ranks, int num_proc,
              const std::string& marks) {
  // Take SIGINT, SIGTERM, SIGHUP and SIGCHLD synchronously: install a handler (a
  // background job of a non-interactive shell starts with SIGINT ignored, and an
  // ignored signal would be lost), then block them and wait with sigtimedwait.
  // SIGHUP stays ignored when it was (nohup), for mpirun too.
  sigset_t watched;
  sigemptyset(&watched);
  struct sigaction action {};
  action.sa_handler = IgnoreSignal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
    struct sigaction previous {};
    sigaction(sig, nullptr, &previous);
    if (sig == SIGHUP && previous.sa_handler == SIG_IGN) continue;
    sigaction(sig, &action, nullptr);
    sigaddset(&watched, sig);
  }
  sigset_t old_mask;
  sigprocmask(SIG_BLOCK, &watched, &old_mask);

  const pid_t launcher = getpid();
  std::fflush(nullptr);  // nothing buffered may be written twice
  pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "starlingrun: cannot start mpirun: fork: %s\n", std::strerror(errno));
    return kExitCannotRun;
  }
  if (child == 0) ExecMpirun(command, old_mask, launcher);
  // Also here: whichever of parent and child runs first, the group exists before
  // the parent ever signals it.
  setpgid(child, child);

  const bool has_deadline = timeout_seconds > 0;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(has_deadline ? timeout_seconds : 0));
  bool stopping = false;  // we asked mpirun to stop (timeout or signal)
  bool killed = false;    // and then sent SIGKILL
  int stop_status = 0;    // our exit status once stopping
  Clock::time_point kill_at;

  auto stop = [&](int sig, int status) {
    stopping = true;
    stop_status = status;
    kill_at = Clock::now() + kGrace;
    killpg(child, sig);
  };
  auto kill_all = [&]() {
    killed = true;
    killpg(child, SIGKILL);
  };

  int wait_status = 0;
  RankWatch watch(child, num_proc, marks);
  TeardownWatch teardown(child);
  bool teardown_hung = false;
  Clock::time_point next_teardown_check = Clock::now();
  for (;;) {
    pid_t done = waitpid(child, &wait_status, WNOHANG);
    if (done == child) break;
    if (watch_ranks) {
      for (const std::string& line : watch.Poll()) std::fprintf(stderr, "starlingrun: %s\n", line.c_str());
    }
    if (done < 0 && errno != EINTR) {
      std::fprintf(stderr, "starlingrun: waitpid: %s\n", std::strerror(errno));
      kill_all();
      return 1;
    }

    Clock::time_point now = Clock::now();
    if (!stopping && now >= next_teardown_check) {
      next_teardown_check = now + std::chrono::milliseconds(500);
      if (teardown.Stuck(kTeardownGrace)) {
        std::fprintf(stderr,
                     "starlingrun: every rank ended %lld s ago but mpirun has not exited (Open MPI's "
                     "launcher can hang in its own teardown); stopping it\n",
                     static_cast<long long>(kTeardownGrace.count()));
        teardown_hung = true;
        stopping = true;
        kill_all();
      }
    }
    if (has_deadline && !stopping && now >= deadline) {
      std::fprintf(stderr, "starlingrun: timeout: still running after %g s; stopping all ranks\n",
                   timeout_seconds);
      stop(SIGTERM, kExitTimeout);
    } else if (stopping && !killed && now >= kill_at) {
      std::fprintf(stderr, "starlingrun: ranks still running %lld s later; killing them\n",
                   static_cast<long long>(kGrace.count()));
      kill_all();
    }

    // Sleep until a signal or the next deadline (at most 0.5 s: the teardown check).
    // Watching ranks: often enough to see a dead rank's exit status before mpirun reaps it.
    Clock::duration nap = watch_ranks ? Clock::duration(std::chrono::milliseconds(5)) : std::chrono::milliseconds(500);
    if (has_deadline && !stopping) nap = std::min(nap, deadline - now);
    if (stopping && !killed) nap = std::min(nap, kill_at - now);
    nap = std::max(nap, Clock::duration::zero());
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(nap).count();
    struct timespec ts {};
    ts.tv_sec = static_cast<time_t>(ns / 1000000000);
    ts.tv_nsec = static_cast<long>(ns % 1000000000);
    int sig = sigtimedwait(&watched, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (!stopping) {
        std::fprintf(stderr, "starlingrun: got %s; stopping all ranks\n", SignalName(sig));
        stop(sig, 128 + sig);
      } else if (!killed) {
        kill_all();  // asked twice: stop waiting
      }
    }
  }
  // mpirun is gone; after a stop, remove any rank that outlived it. While a member
  // remains, the kernel does not hand the group's id to another process.
  if (stopping) killpg(child, SIGKILL);

  if (teardown_hung) {
    // mpirun's status is lost: the ranks' first failure seen, else 1 (not success:
    // a rank that failed may have been reaped unseen).
    const int status = teardown.failure_status() != 0 ? teardown.failure_status() : 1;
    std::fprintf(stderr, "starlingrun: exit status %d (%s)\n", status,
                 teardown.failure_status() != 0 ? "a rank's" : "mpirun's own status is lost");
    return status;
  }
  if (stopping) return stop_status;
  if (watch_ranks) {
    for (const std::string& line : watch.Finish()) std::fprintf(stderr, "starlingrun: %s\n", line.c_str());
  }
  if (watch_ranks && watch.died() > 0 && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
    std::fprintf(stderr, "starlingrun: %d rank(s) died; the survivors finished\n", watch.died());
  }
  // Open MPI 5's prterun exits 137 by itself (not killed) once a process that a grow
  // started (MPI_Comm_spawn) was killed, even when every other process finished well:
  // then the job did what a fault-tolerant job should.
  if (watch_ranks && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 137 && watch.SurvivorsSucceeded()) {
    std::fprintf(stderr,
                 "starlingrun: mpirun exited 137 (Open MPI's status once a process started by a grow was killed), "
                 "but every other process exited with status 0: exit status 0\n");
    return 0;
  }
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) {
    // Not our doing: say so, as a shell would for its own child (Open MPI 4.1's mpirun
    // can crash in its teardown once its ranks have ended, their errors already shown).
    const int sig = WTERMSIG(wait_status);
    std::fprintf(stderr, "starlingrun: mpirun died of signal %d (%s); exit status %d\n", sig, strsignal(sig),
                 128 + sig);
    return 128 + sig;
  }
  return 1;
}

// The Open MPI major version of `mpirun` (`mpirun --version`), 0 if unknown: Open MPI
// 5's launcher takes different flags, and only it has ULFM.
int MpiMajorVersion(const std::string& mpirun) {
  const std::string line = FormatCommandLine({mpirun, "--version"}) + " 2>/dev/null";
  FILE* pipe = popen(line.c_str(), "r");
  if (pipe == nullptr) return 0;
  std::string text;
  char buffer[256];
  while (text.size() < 4096 && std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  pclose(pipe);
  return ParseOpenMpiMajor(text);
}

std::string VersionString() {
  int v = starling_get_version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

// --print-config: the table as the ranks will see it, so the launcher's defaults and
// -x values are applied to this process before the library reads its environment.
int PrintConfig(const Options& options) {
  for (const auto& [name, value] : RankEnvironmentOverrides(options, CurrentEnvironment())) {
    setenv(name.c_str(), value.c_str(), 1);
  }
  std::string table = starling_config_string();
  if (!table.empty() && table.back() != '\n') table += '\n';
  std::fputs(table.c_str(), stdout);
  return 0;
}

// `starlingrun start|stop ...`: ipyparallel engines as the ranks of one job, for
// notebooks. That part is Python (starling.interactive, which runs this launcher for
// the engines), so hand the command line to it: STARLING_PYTHON, else python3.
int RunInteractive(int argc, char** argv) {
  const char* named = std::getenv("STARLING_PYTHON");
  const std::string python = named != nullptr && *named != '\0' ? named : "python3";
  std::error_code ignored;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ignored);
  if (!self.empty()) setenv("STARLING_STARLINGRUN", self.c_str(), 0);
  std::vector<std::string> words = {python, "-m", "starling.interactive"};
  words.insert(words.end(), argv + 1, argv + argc);
  std::vector<char*> args;
  for (std::string& word : words) args.push_back(word.data());
  args.push_back(nullptr);
  std::fflush(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "starlingrun %s: cannot run '%s': %s (STARLING_PYTHON names the Python that has "
               "the starling package and ipyparallel)\n", argv[1], python.c_str(), std::strerror(errno));
  return kExitCannotRun;
}

int Main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "start") == 0 || std::strcmp(argv[1], "stop") == 0)) {
    return RunInteractive(argc, argv);
  }
  ParseResult parsed = ParseArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.ok()) return UsageError(parsed.error);
  Options& options = parsed.options;
  if (options.help) {
    std::fputs(HelpText().c_str(), stdout);
    return 0;
  }
  if (options.version) {
    std::printf("starlingrun (Starling) %s\n", VersionString().c_str());
    return 0;
  }
  if (options.print_config) return PrintConfig(options);
  if (!options.hostfile.empty()) {
    std::string error = ReadHostfile(options.hostfile, &options.hosts);
    if (!error.empty()) return UsageError(error);
  }
  std::string error = DefaultNumProc(&options);
  if (!error.empty()) return UsageError(error);

  // --fault-tolerant: ranks that exit normally leave a mark here (impl/common/exit_mark.h),
  // so one that finishes early is not reported as dead. Forwarded as a STARLING_ variable.
  std::string marks;
  if (options.fault_tolerant) {
    char dir[] = "/tmp/starlingrun-exits.XXXXXX";
    if (mkdtemp(dir) != nullptr) {
      marks = dir;
      setenv("STARLING_EXIT_MARKS", dir, 1);
    }
  }
  Environment env = CurrentEnvironment();
  auto named = env.vars.find("STARLING_MPIRUN");
  env.mpi_major = MpiMajorVersion(named != env.vars.end() && !named->second.empty() ? named->second : "mpirun");
  Command command = BuildCommand(options, env);
  if (!command.error.empty()) return UsageError(command.error);
  for (const std::string& warning : command.warnings) {
    std::fprintf(stderr, "starlingrun: warning: %s\n", warning.c_str());
  }
  if (options.verbose) {
    std::fprintf(stderr, "starlingrun: %s\n", FormatCommandLine(command.argv).c_str());
  }
  const int status = Supervise(command.argv, options.timeout_seconds, options.fault_tolerant, options.num_proc, marks);
  std::error_code ignored;
  if (!marks.empty()) std::filesystem::remove_all(marks, ignored);
  return status;
}

}  // namespace
}  // namespace starling::launcher

int main(int argc, char** argv) {
  try {
    return starling::launcher::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "starlingrun: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "starlingrun: internal error\n");
  }
  return 1;
}
