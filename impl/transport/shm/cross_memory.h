// Reading another process's memory directly (Linux cross-memory attach,
// process_vm_readv): a window get from a same-host rank copies the rank's tensor, which
// is the application's memory and not in any shared segment, in one kernel copy, with
// no message and without the rank's progress. The kernel allows it where the reader
// may ptrace the target (same user and no Yama restriction, or CAP_SYS_PTRACE) and no
// seccomp filter forbids the call; each pair is probed once, and refused pairs stay on
// messages. Nothing here signals, waits or prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace starling::transport::shm {

// Copies `bytes` bytes at `address` in process `pid` into `dst`. Returns 0, or the
// errno of the failure (ESRCH: the process is gone; EFAULT: the range is not mapped
// there; EPERM: not allowed; ENOSYS: no such call).
int ReadProcessMemory(int32_t pid, uint64_t address, void* dst, size_t bytes);

// Empty if this process may read `pid`'s memory at `address` (a read of one byte, or
// none when `bytes` is 0), else why not.
std::string ProbeProcessMemory(int32_t pid, uint64_t address, size_t bytes);

}  // namespace starling::transport::shm
