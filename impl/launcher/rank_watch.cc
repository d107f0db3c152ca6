#include "impl/launcher/rank_watch.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace starling::launcher {
namespace {

// /proc/PID/stat fields after "(comm)": state (3), ppid, pgrp (5) ... exit_code (52).
bool ReadStat(pid_t pid, char* state, pid_t* pgrp, int* exit_code) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return false;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  if (f.size() < 3) return false;
  *state = f[0].empty() ? '?' : f[0][0];
  *pgrp = static_cast<pid_t>(std::atol(f[2].c_str()));
  *exit_code = f.size() >= 50 ? std::atoi(f[49].c_str()) : -1;  // field 52 is f[49]
  return true;
}

int RankOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (entry.rfind("OMPI_COMM_WORLD_RANK=", 0) == 0) return std::atoi(entry.c_str() + 21);
  }
  return -1;
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

}  // namespace

void RankWatch::Scan() {
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || ranks_.count(static_cast<pid_t>(pid))) continue;
    char state = '?';
    pid_t pgrp = 0;
    int exit_code = 0;
    if (!ReadStat(static_cast<pid_t>(pid), &state, &pgrp, &exit_code) || pgrp != group_ || state == 'Z') continue;
    const int rank = RankOf(static_cast<pid_t>(pid));
    if (rank >= 0) ranks_[static_cast<pid_t>(pid)].rank = rank;
  }
  closedir(dir);
}

std::vector<std::string> RankWatch::Poll(std::chrono::steady_clock::duration settle) {
  Scan();
  std::vector<std::string> lines;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [pid, r] : ranks_) {
    if (r.reported) continue;
    if (!r.gone) {
      char state = '?';
      pid_t pgrp = 0;
      int exit_code = 0;
      const bool exists = ReadStat(pid, &state, &pgrp, &exit_code);
      if (exists && state != 'Z') continue;
      r.gone = true;
      r.gone_at = now;
      if (exists && exit_code >= 0) r.how = Describe(exit_code);
    }
    // A rank seen ending normally (status 0) is not a failure.
    if (r.how == "exited with status 0") {
      r.reported = true;
      continue;
    }
    if (r.how.empty() && now - r.gone_at < settle) continue;
    r.reported = true;
    ++died_;
    lines.push_back("rank " + std::to_string(r.rank) + " (pid " + std::to_string(pid) + ") died: " +
                    (r.how.empty() ? "killed or exited (mpirun took its exit status)" : r.how) +
                    "; the other ranks go on");
  }
  return lines;
}

}  // namespace starling::launcher
