#include "impl/launcher/teardown_watch.h"

#include <dirent.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace starling::launcher {
namespace {

struct ProcInfo {
  pid_t ppid = 0;
  bool zombie = false;
  int exit_code = 0;  // wait status, meaningful for zombies
};

// /proc/PID/stat after "(comm)": state, ppid, ... exit_code (field 52).
bool Read(pid_t pid, ProcInfo* out) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return false;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  if (f.size() < 2) return false;
  out->zombie = !f[0].empty() && f[0][0] == 'Z';
  out->ppid = static_cast<pid_t>(std::atol(f[1].c_str()));
  out->exit_code = f.size() >= 50 ? std::atoi(f[49].c_str()) : 0;
  return true;
}

}  // namespace

bool TeardownWatch::Stuck(Clock::duration grace) {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return false;
  std::map<pid_t, ProcInfo> procs;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    ProcInfo info;
    if (Read(static_cast<pid_t>(pid), &info)) procs[static_cast<pid_t>(pid)] = info;
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
    if (!info.zombie) {
      ++alive;
    } else if (failure_status_ == 0) {
      const int status = info.exit_code;
      if (WIFEXITED(status) && WEXITSTATUS(status) != 0) failure_status_ = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) failure_status_ = 128 + WTERMSIG(status);
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
