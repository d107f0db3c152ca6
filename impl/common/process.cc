#include "impl/common/process.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "impl/common/error.h"

namespace starling {
namespace {

uint64_t Fnv1a(const std::string& text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string ReadFile(const char* path) {
  std::ifstream file(path);
  if (!file) return {};
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// State letter and start time (field 22) of /proc/<pid>/stat. The command name (field
// 2) may hold spaces and parentheses: fields are counted after its last ')'.
bool ReadStat(int32_t pid, char* state, uint64_t* start_ticks, int* error) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* file = std::fopen(path, "re");
  if (file == nullptr) {
    *error = errno;
    return false;
  }
  char line[1024];
  const size_t n = std::fread(line, 1, sizeof line - 1, file);
  std::fclose(file);
  line[n] = '\0';
  const char* p = std::strrchr(line, ')');
  if (p == nullptr) {
    *error = EINVAL;
    return false;
  }
  // After ") ": field 3 is the state; field 22 is 19 fields later.
  unsigned long long start = 0;
  char s = 0;
  int field = 3;
  for (const char* q = p + 2; *q != '\0' && field <= 22; ++field) {
    if (field == 3) s = *q;
    if (field == 22) start = std::strtoull(q, nullptr, 10);
    q = std::strchr(q, ' ');
    if (q == nullptr) break;
    ++q;
  }
  if (field < 22 || s == 0) {
    *error = EINVAL;
    return false;
  }
  *state = s;
  *start_ticks = start;
  return true;
}

}  // namespace

ProcessIdentity ThisProcess() {
  ProcessIdentity self;
  self.pid = static_cast<int32_t>(getpid());
  char state = 0;
  int error = 0;
  const bool have_stat = ReadStat(self.pid, &state, &self.start_ticks, &error);
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::snprintf(self.host, sizeof self.host, "%.63s", host);
  // Pids are comparable only within one kernel boot and one pid namespace.
  const std::string boot = ReadFile("/proc/sys/kernel/random/boot_id");
  struct stat ns = {};
  const bool have_ns = stat("/proc/self/ns/pid", &ns) == 0;
  if (have_stat && !boot.empty() && have_ns) {
    uint64_t key = Fnv1a(host);
    key = Fnv1a(boot, key);
    key = Fnv1a(Str(ns.st_dev, ":", ns.st_ino), key);
    self.host_key = key == 0 ? 1 : key;
  }
  if (!boot.empty()) {
    const uint64_t kernel = Fnv1a(boot);
    self.kernel_key = kernel == 0 ? 1 : kernel;
  }
  return self;
}

bool ProbeableFrom(const ProcessIdentity& self, const ProcessIdentity& peer) {
  return self.host_key != 0 && self.host_key == peer.host_key && peer.pid > 0;
}

bool SameKernel(const ProcessIdentity& self, const ProcessIdentity& peer) {
  return self.kernel_key != 0 && self.kernel_key == peer.kernel_key;
}

ProcessState Probe(const ProcessIdentity& peer) {
  char state = 0;
  uint64_t start = 0;
  int error = 0;
  if (!ReadStat(peer.pid, &state, &start, &error)) {
    if (error == ENOENT || error == ESRCH) return ProcessState::kGone;
    // /proc unreadable: fall back to the signal-0 existence check.
    if (kill(peer.pid, 0) == -1 && errno == ESRCH) return ProcessState::kGone;
    return ProcessState::kUnknown;
  }
  if (start != peer.start_ticks) return ProcessState::kGone;  // the pid was reused
  switch (state) {
    case 'Z':  // zombie: exited, not yet reaped by its parent (orted, mpirun)
    case 'X':
    case 'x':
      return ProcessState::kGone;
    case 'T':  // stopped by a signal
    case 't':  // stopped by a debugger
      return ProcessState::kStopped;
    default:
      return ProcessState::kRunning;
  }
}

std::string DescribeProcess(const ProcessIdentity& process) {
  return Str("pid ", process.pid, " on host ", process.host[0] ? process.host : "?");
}

const char* StateName(ProcessState state) {
  switch (state) {
    case ProcessState::kRunning: return "running";
    case ProcessState::kStopped: return "stopped";
    case ProcessState::kGone: return "gone";
    case ProcessState::kUnknown: break;
  }
  return "unknown";
}

ProcessWatch::ProcessWatch(const ProcessIdentity& peer) : pid_(peer.pid) {
  if (peer.pid <= 0) return;
#ifdef SYS_pidfd_open
  fd_ = static_cast<int>(syscall(SYS_pidfd_open, peer.pid, 0));
  if (fd_ < 0 && errno == ESRCH) gone_ = true;
#endif
  // The pid may already name another process (the peer died and its pid was reused).
  if (!gone_ && Probe(peer) == ProcessState::kGone) gone_ = true;
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) close(fd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept : fd_(other.fd_), pid_(other.pid_), gone_(other.gone_) {
  other.fd_ = -1;
}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    pid_ = other.pid_;
    gone_ = other.gone_;
    other.fd_ = -1;
  }
  return *this;
}

bool ProcessWatch::Exited() const {
  if (gone_) return true;
  if (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;  // a pidfd turns readable when its process exits
  }
  return pid_ > 0 && kill(pid_, 0) == -1 && errno == ESRCH;
}

}  // namespace starling
