#include "impl/transport/shm/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace starling::transport::shm {

int ReadProcessMemory(int32_t pid, uint64_t address, void* dst, size_t bytes) {
  char* out = static_cast<char*>(dst);
  size_t done = 0;
  // The kernel may copy less than asked (at most about 2 GiB per call, or up to an
  // unmapped page): go on from where it stopped.
  while (done < bytes) {
    iovec local{out + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address + done)), bytes - done};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;
    done += static_cast<size_t>(got);
  }
  return 0;
}

std::string ProbeProcessMemory(int32_t pid, uint64_t address, size_t bytes) {
  if (pid <= 0) return "no process id";
  if (bytes == 0) return "";
  char byte = 0;
  const int error = ReadProcessMemory(pid, address, &byte, 1);
  if (error == 0) return "";
  return std::string("process_vm_readv: ") + std::strerror(error);
}

}  // namespace starling::transport::shm
