// Who a rank's process is, and whether it is still alive: the local half of peer
// failure detection. A rank's identity (pid, start time, host key) is exchanged when a
// context is created; a peer on the same host (same boot and pid namespace) can then
// be probed through /proc without any message. Nothing here signals, waits or prints.
#pragma once

#include <cstdint>
#include <string>

namespace starling {

// Fixed-size and trivially copyable: it travels in an MPI_Allgather of bytes.
struct ProcessIdentity {
  int32_t pid = 0;
  int32_t reserved = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat field 22: tells a reused pid apart
  uint64_t host_key = 0;     // hash of host name, boot id and pid namespace; 0: unknown
  uint64_t kernel_key = 0;   // hash of the boot id alone: who shares this machine's CPUs; 0: unknown
  char host[64] = {};        // host name (truncated), for messages
};

enum class ProcessState {
  kUnknown,  // another host, or /proc unreadable: cannot tell
  kRunning,  // alive and not stopped (it may be computing or blocked)
  kStopped,  // alive but stopped (SIGSTOP, SIGTSTP, a debugger)
  kGone,     // exited or killed (also a zombie not yet reaped, or a reused pid)
};

// This process's identity.
ProcessIdentity ThisProcess();
// True when `peer` can be probed from this process (same host key, known).
bool ProbeableFrom(const ProcessIdentity& self, const ProcessIdentity& peer);
// True when `peer` runs on this process's kernel, so on the same CPUs, whatever its host
// name: containers and network namespaces of one machine have host names of their own
// (and cannot always share memory or probe each other) but compete for its cores.
bool SameKernel(const ProcessIdentity& self, const ProcessIdentity& peer);
// The state of `peer`, a process on this host (ProbeableFrom); a few microseconds.
ProcessState Probe(const ProcessIdentity& peer);
// "pid 1234 on host node1".
std::string DescribeProcess(const ProcessIdentity& process);
// "running", "stopped", "gone", "unknown".
const char* StateName(ProcessState state);

// Watches one process of this host for its exit at the cost of one poll() on a pidfd
// (a fraction of a microsecond), for operations that would otherwise never notice a
// dead peer: a write into its shared memory succeeds whether it lives or not. Where
// pidfds are unavailable (Linux before 5.3), falls back to kill(pid, 0), which sees an
// exit only once the process has been reaped.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  explicit ProcessWatch(const ProcessIdentity& peer);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // True once the process has exited (or was already gone when the watch began).
  bool Exited() const;
  // The watched process's pid (0: none).
  int32_t pid() const { return pid_; }

 private:
  int fd_ = -1;
  int32_t pid_ = 0;
  bool gone_ = false;
};

}  // namespace starling
