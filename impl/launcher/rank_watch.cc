#include "impl/launcher/rank_watch.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "impl/launcher/proc_stat.h"

namespace starling::launcher {
namespace {

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

bool RankWatch::ExitedNormally(pid_t pid) const { return MarkStatus(pid) != -1; }

int RankWatch::MarkStatus(pid_t pid) const {
  if (marks_.empty()) return -1;
  std::ifstream in(marks_ + "/" + std::to_string(pid));
  if (!in) return -1;
  int status = -2;
  if (!(in >> status) || status < 0) return -2;
  return status;
}

bool RankWatch::SurvivorsSucceeded() const {
  if (marks_.empty() || static_cast<int>(ranks_.size()) < expected_) return false;
  int succeeded = 0;
  for (const auto& [pid, r] : ranks_) {
    const int mark = MarkStatus(pid);
    if (r.how == "exited with status 0" || mark == 0) {
      ++succeeded;
    } else if (!r.reported || r.how.rfind("exited", 0) == 0 || mark != -1) {
      return false;  // not seen dying, or ended with another status
    }
  }
  DIR* dir = opendir(marks_.c_str());
  if (dir == nullptr) return false;
  bool all_zero = true;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    all_zero = all_zero && MarkStatus(static_cast<pid_t>(pid)) == 0;
  }
  closedir(dir);
  return all_zero && succeeded > 0;
}

void RankWatch::Scan() {
  // The ranks are descendants of mpirun (Open MPI 5's launcher puts them in process
  // groups of their own): collect every process's parent, then walk down from mpirun.
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return;
  std::map<pid_t, pid_t> parent_of;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    ProcStat stat;
    if (ReadProcStat(static_cast<pid_t>(pid), &stat) && stat.state != 'Z')
      parent_of[static_cast<pid_t>(pid)] = stat.ppid;
  }
  closedir(dir);
  for (const auto& [pid, ppid] : parent_of) {
    if (ranks_.count(pid)) continue;
    bool descendant = false;
    for (pid_t p = ppid; p > 1 && !descendant; ) {
      descendant = p == root_;
      auto it = parent_of.find(p);
      if (it == parent_of.end()) break;
      p = it->second;
    }
    if (!descendant) continue;
    const int rank = RankOf(pid);
    if (rank >= 0) ranks_[pid].rank = rank;
  }
}

std::vector<std::string> RankWatch::Poll(std::chrono::steady_clock::duration settle) {
  std::vector<std::string> lines;
  const auto now = std::chrono::steady_clock::now();
  // Walking all of /proc is the expensive part: every 50 ms, until every rank is known
  // (ranks on other hosts never are: then it goes on, at that pace).
  if (static_cast<int>(ranks_.size()) < expected_ && now >= next_scan_) {
    Scan();
    next_scan_ = now + std::chrono::milliseconds(50);
  }
  // A rank gone without a visible status counts as dead once another rank outlived it
  // by `settle`: ranks that finish normally end together.
  int alive = 0;
  for (auto& [pid, r] : ranks_) {
    ProcStat stat;
    if (!r.gone && ReadProcStat(pid, &stat) && stat.state != 'Z') ++alive;
  }
  for (auto& [pid, r] : ranks_) {
    if (r.reported) continue;
    if (!r.gone) {
      ProcStat stat;
      const bool exists = ReadProcStat(pid, &stat);
      if (exists && stat.state != 'Z') continue;
      r.gone = true;
      r.gone_at = now;
      if (exists && stat.exit_code >= 0) r.how = Describe(stat.exit_code);
    }
    // A rank seen ending normally (status 0, or through exit() with a mark left) is not
    // a failure: mpirun has its status.
    if (r.how == "exited with status 0" || (r.how.empty() && ExitedNormally(pid))) {
      r.reported = true;
      continue;
    }
    if (r.how.empty() && (alive == 0 || now - r.gone_at < settle)) continue;
    r.reported = true;
    ++died_;
    lines.push_back("rank " + std::to_string(r.rank) + " (pid " + std::to_string(pid) + ") died: " +
                    (r.how.empty() ? "killed or exited (mpirun took its exit status)" : r.how) +
                    "; the other ranks go on");
  }
  return lines;
}

std::vector<std::string> RankWatch::Finish(std::chrono::steady_clock::duration settle) {
  std::vector<std::string> lines = Poll(settle);
  // mpirun is gone, so are all ranks: those that ended well before the last one died.
  const auto now = std::chrono::steady_clock::now();
  auto last = std::chrono::steady_clock::time_point::min();
  for (auto& [pid, r] : ranks_) {
    if (!r.gone) {
      r.gone = true;
      r.gone_at = now;
    }
    last = std::max(last, r.gone_at);
  }
  for (auto& [pid, r] : ranks_) {
    if (r.reported || !r.how.empty() || last - r.gone_at < settle || ExitedNormally(pid)) continue;
    r.reported = true;
    ++died_;
    lines.push_back("rank " + std::to_string(r.rank) + " (pid " + std::to_string(pid) +
                    ") died: killed or exited (mpirun took its exit status); the other ranks went on");
  }
  return lines;
}

}  // namespace starling::launcher
