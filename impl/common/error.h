// Errors inside the C++ core. Every failure is a starling::Error carrying one of the
// public status codes and a message; the C ABI glue turns it into a status plus the
// thread-local last-error text. Nothing here prints or aborts.
#pragma once

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace starling {

// Mirrors the negative starling_status_t codes of the public header (checked by a
// static_assert in capi/status.cc so the two cannot drift apart).
enum class Code : int {
  kOk = 0,
  kInvalidArgument = -1,
  kInvalidHandle = -2,
  kInvalidUsage = -3,
  kUnsupported = -4,
  kMismatch = -5,
  kTimeout = -6,
  kShutdown = -7,
  kTransport = -8,
  kNotFound = -9,
  kAlreadyExists = -10,
  kOutOfMemory = -11,
  kInternal = -12,
  kAborted = -13,     // starling_context_abort was called
  kPeerFailed = -14,  // a rank of the context is gone (killed, or exited without destroying)
  kDevice = -15,      // the CUDA runtime or NCCL (or the emulated device) reported an error
};

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

// Text computed only when a message is actually written (warnings, errors): building
// descriptions eagerly on every operation cost about half a microsecond per call.
using LazyText = std::function<std::string()>;

// A LazyText inside a message is evaluated when the message is built.
inline std::ostream& operator<<(std::ostream& os, const LazyText& text) { return os << (text ? text() : std::string()); }

// Concatenates anything streamable: Str("rank ", r, " out of range").
template <typename... Args>
std::string Str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void Fail(Code code, Args&&... args) {
  throw Error(code, Str(std::forward<Args>(args)...));
}

}  // namespace starling

// Throws Error(code, message) unless cond holds. The message arguments are only
// evaluated on failure.
#define STARLING_CHECK(cond, code, ...)                   \
  do {                                                    \
    if (!(cond)) ::starling::Fail((code), __VA_ARGS__);   \
  } while (0)

#define STARLING_CHECK_ARG(cond, ...) \
  STARLING_CHECK(cond, ::starling::Code::kInvalidArgument, __VA_ARGS__)
