#include "impl/common/exit_mark.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace starling {
namespace {

char mark_path[4096];

// status < 0: unknown (no on_exit): the mark stays empty.
void LeaveMark(int status) {
  const int fd = open(mark_path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (status >= 0) {
    char text[16];
    const int n = std::snprintf(text, sizeof text, "%d", status & 0xff);
    if (n > 0 && write(fd, text, static_cast<size_t>(n)) < 0) {
      // Nothing to do: the launcher then reads an empty mark (status unknown).
    }
  }
  close(fd);
}

#ifdef __GLIBC__
void LeaveMarkWithStatus(int status, void*) { LeaveMark(status); }
#else
void LeaveMarkWithoutStatus() { LeaveMark(-1); }
#endif

}  // namespace

void ArmExitMark() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* dir = std::getenv("STARLING_EXIT_MARKS");
    if (dir == nullptr || *dir == '\0') return;
    const int n = std::snprintf(mark_path, sizeof mark_path, "%s/%ld", dir, static_cast<long>(getpid()));
    if (n <= 0 || static_cast<size_t>(n) >= sizeof mark_path) return;
#ifdef __GLIBC__
    on_exit(LeaveMarkWithStatus, nullptr);  // glibc passes exit()'s status
#else
    std::atexit(LeaveMarkWithoutStatus);
#endif
  });
}

}  // namespace starling
