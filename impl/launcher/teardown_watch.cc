#include "impl/launcher/teardown_watch.h"

#include <dirent.h>
#include <sys/wait.h>

#include <cstdlib>
#include <map>

#include "impl/launcher/proc_stat.h"

namespace starling::launcher {

bool TeardownWatch::Stuck(Clock::duration grace) {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return false;
  std::map<pid_t, ProcStat> procs;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    ProcStat stat;
    if (ReadProcStat(static_cast<pid_t>(pid), &stat)) procs[static_cast<pid_t>(pid)] = stat;
  }
  closedir(dir);

  int alive = 0;
  for (const auto& [pid, info] : procs) {
    bool below = false;
    for (pid_t p = info.ppid; p > 1 && !below;) {
      below = p == root_;
      auto it = procs.find(p);
      if (it == procs.end()) break;
      p = it->second.ppid;
    }
    if (!below) continue;
    had_descendants_ = true;
    if (info.state != 'Z') {
      ++alive;
    } else if (info.exit_code >= 0) {
      const int status = info.exit_code;
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0 && exit_failure_ == 0) exit_failure_ = WEXITSTATUS(status);
      if (WIFSIGNALED(status) && signal_failure_ == 0) signal_failure_ = 128 + WTERMSIG(status);
    }
  }
  const auto now = Clock::now();
  if (!had_descendants_ || alive > 0) {
    idle_ = false;
    return false;
  }
  if (!idle_) {
    idle_ = true;
    idle_since_ = now;
  }
  return now - idle_since_ >= grace;
}

}  // namespace starling::launcher
