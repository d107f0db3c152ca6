#include "impl/launcher/session_dir.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace starling::launcher {

std::string SessionDirFor(pid_t pid) {
  std::string tmp = "/tmp";
  for (const char* name : {"TMPDIR", "TEMP", "TMP"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') {
      tmp = value;
      break;
    }
  }
  return tmp + "/ompi." + std::to_string(static_cast<long>(pid));
}

namespace {
int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  // Children first (FTW_DEPTH), links never followed (FTW_PHYS).
  return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 ? 0 : -1;
}
}  // namespace

bool RemoveStaleSessionDir(const std::string& dir) {
  struct stat info {};
  if (lstat(dir.c_str(), &info) != 0) return true;  // nothing there
  if (!S_ISDIR(info.st_mode) || info.st_uid != getuid()) return true;  // not ours to touch
  return nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

}  // namespace starling::launcher
