// Helpers of the unit tests that run code in forked child processes (shared memory
// between real processes) and of those that expect a Starling error.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "impl/common/error.h"

namespace starling::testing {

// Runs `body` in a child process; its exit status is 0 when body returned true.
inline pid_t Spawn(const std::function<bool()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    bool ok = false;
    try {
      ok = body();
    } catch (...) {
      ok = false;
    }
    _exit(ok ? 0 : 1);
  }
  return pid;
}

// 0 when the child exited with status 0; else its status, or 1000 + signal.
inline int Reap(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// The code of the Error that `call` throws (kOk when none), its message into `message`.
inline Code CodeOf(const std::function<void()>& call, std::string* message = nullptr) {
  try {
    call();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return Code::kOk;
}

}  // namespace starling::testing
