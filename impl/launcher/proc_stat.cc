#include "impl/launcher/proc_stat.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace starling::launcher {

bool ReadProcStat(pid_t pid, ProcStat* out) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!in || !std::getline(in, text)) return false;
  // The fields after "(comm)": comm may hold spaces and parentheses, so find the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  if (f.size() < 3) return false;
  out->state = f[0].empty() ? '?' : f[0][0];
  out->ppid = static_cast<pid_t>(std::atol(f[1].c_str()));
  out->exit_code = f.size() >= 50 ? std::atoi(f[49].c_str()) : -1;  // field 52 is f[49]
  return true;
}

}  // namespace starling::launcher
