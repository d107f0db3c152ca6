// Opt-in logging: silent unless STARLING_LOG_LEVEL asks. Lines go to stderr as
// "[starling][rank N] W message" in one write each, so ranks' lines do not interleave.
#pragma once

#include <atomic>
#include <string>

#include "impl/common/config.h"
#include "impl/common/error.h"

namespace starling {

void SetLogLevel(LogLevel level);
void SetLogRank(int rank);  // the world rank shown in the prefix (-1: none)
bool LogEnabled(LogLevel level);
void LogMessage(LogLevel level, const std::string& message);

}  // namespace starling

#define STARLING_LOG(level, ...)                                           \
  do {                                                                     \
    if (::starling::LogEnabled(level))                                     \
      ::starling::LogMessage((level), ::starling::Str(__VA_ARGS__));       \
  } while (0)
#define STARLING_LOG_WARN(...) STARLING_LOG(::starling::LogLevel::kWarn, __VA_ARGS__)
#define STARLING_LOG_INFO(...) STARLING_LOG(::starling::LogLevel::kInfo, __VA_ARGS__)
#define STARLING_LOG_DEBUG(...) STARLING_LOG(::starling::LogLevel::kDebug, __VA_ARGS__)
