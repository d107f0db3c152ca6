// One process's entry in /proc/PID/stat, as the launcher's watchers need it.
#ifndef STARLING_IMPL_LAUNCHER_PROC_STAT_H_
#define STARLING_IMPL_LAUNCHER_PROC_STAT_H_

#include <sys/types.h>

namespace starling::launcher {

struct ProcStat {
  char state = '?';   // 'R', 'S', 'Z' (zombie), ...
  pid_t ppid = 0;
  int exit_code = -1;  // wait status once a zombie (field 52); -1 where the kernel lacks it
};

// False if the process does not exist (any more) or its entry cannot be read.
bool ReadProcStat(pid_t pid, ProcStat* out);

}  // namespace starling::launcher

#endif  // STARLING_IMPL_LAUNCHER_PROC_STAT_H_
