#include "impl/common/exit_mark.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace starling {
namespace {

char mark_path[4096];

void LeaveMark() {
  const int fd = open(mark_path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}

}  // namespace

void ArmExitMark() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* dir = std::getenv("STARLING_EXIT_MARKS");
    if (dir == nullptr || *dir == '\0') return;
    const int n = std::snprintf(mark_path, sizeof mark_path, "%s/%ld", dir, static_cast<long>(getpid()));
    if (n > 0 && static_cast<size_t>(n) < sizeof mark_path) std::atexit(LeaveMark);
  });
}

}  // namespace starling
