// The boundary between the C ABI and the C++ core: every exported function body is
// wrapped in STARLING_API_BEGIN / STARLING_API_END, which turns any exception into a
// status code plus the thread-local last-error message. Nothing escapes to the host.
#pragma once

#include <string>
#include <vector>

#include "impl/common/error.h"
#include "starling/starling.h"

namespace starling::capi {

// Records `message` as this thread's last error and returns `code` as a status.
starling_status_t SetLastError(Code code, const std::string& message);
// The same for an exception caught at the boundary.
starling_status_t StatusFromCurrentException();

// Copies a C array argument, checking its count and pointer.
template <typename T>
std::vector<T> CopyArray(const T* data, int count, const char* name) {
  STARLING_CHECK_ARG(count >= 0, name, " count is negative (", count, ")");
  STARLING_CHECK_ARG(count == 0 || data != nullptr, name, " is NULL but its count is ", count);
  return std::vector<T>(data, data + count);
}

template <typename T>
T* CheckOut(T* out, const char* name) {
  STARLING_CHECK_ARG(out != nullptr, name, " must not be NULL");
  return out;
}

}  // namespace starling::capi

#define STARLING_API_BEGIN() try {
#define STARLING_API_END()                                   \
  }                                                          \
  catch (...) {                                              \
    return ::starling::capi::StatusFromCurrentException();   \
  }                                                          \
  return STARLING_SUCCESS;
