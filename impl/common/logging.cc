#include "impl/common/logging.h"

#include <unistd.h>

namespace starling {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kOff)};
std::atomic<int> g_rank{-1};
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
void SetLogRank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

bool LogEnabled(LogLevel level) {
  return level != LogLevel::kOff && static_cast<int>(level) <= g_level.load(std::memory_order_relaxed);
}

void LogMessage(LogLevel level, const std::string& message) {
  static const char kLetters[] = "-EWIDT";
  const int rank = g_rank.load(std::memory_order_relaxed);
  std::string line = rank >= 0 ? Str("[starling][rank ", rank, "] ") : std::string("[starling] ");
  line += kLetters[static_cast<int>(level)];
  line += ' ';
  line += message;
  line += '\n';
  // One write(2) per line: atomic enough for lines below PIPE_BUF, never throws.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace starling
