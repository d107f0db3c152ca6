// The boundary between the C ABI and the C++ core: every exported function body is
// wrapped in STARLING_API_BEGIN / STARLING_API_END, which turns any exception into a
// status code plus the thread-local last-error message. Nothing escapes to the host.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "impl/common/error.h"
#include "starling/starling.h"

namespace starling::capi {

// Records `message` as this thread's last error and returns `code` as a status.
starling_status_t SetLastError(Code code, const std::string& message);
// The same for an exception caught at the boundary.
starling_status_t StatusFromCurrentException();

// The integer a C caller passed for an enum parameter. C allows any int there, but C++
// must not load a value outside the enumerators' range as the enum type, so the bytes
// are read instead: take the parameter by reference, never by value, until then.
template <typename Enum>
int EnumValue(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// Copies a C array argument, checking its count and pointer.
template <typename T>
std::vector<T> CopyArray(const T* data, int count, const char* name) {
  STARLING_CHECK_ARG(count >= 0, name, " count is negative (", count, ")");
  STARLING_CHECK_ARG(count == 0 || data != nullptr, name, " is NULL but its count is ", count);
  return std::vector<T>(data, data + count);
}

// Reads an option struct that starts with `size_t struct_size`: fields beyond what the
// caller's (possibly older) struct has keep the defaults. `required` is the size of the
// fields every version has.
template <typename T>
T CopyOptions(const T* in, const T& defaults, size_t required, const char* what, const char* init_macro) {
  T copy = defaults;
  if (in == nullptr) return copy;
  const size_t size = *reinterpret_cast<const size_t*>(in);
  STARLING_CHECK_ARG(size >= required, what, "->struct_size is ", size, "; initialize it with ", init_macro);
  std::memcpy(&copy, in, std::min(size, sizeof copy));
  return copy;
}

// The C ABI's list convention: capacity >= 0, and an array may be NULL only when the
// capacity is 0.
inline void CheckArray(const void* array, int capacity, const char* array_name,
                       const char* capacity_name = "capacity") {
  STARLING_CHECK_ARG(capacity >= 0, capacity_name, " must be >= 0, got ", capacity);
  STARLING_CHECK_ARG(array != nullptr || capacity == 0, array_name, " is NULL but ", capacity_name, " is ",
                     capacity);
}

// Copies what a repair, grow or shrink returns into its C result `out`: the four numbers,
// old_to_new, and `ranks` (the failed, joined or left ranks) into `ranks_out`, each array
// up to its capacity. `checked`: the caller's checked copy of *out (arrays validated).
template <typename CResult, typename Result>
void CopyRenumbering(const Result& result, const std::vector<int>& ranks, int* ranks_out, int ranks_capacity,
                     const CResult& checked, CResult* out) {
  out->old_rank = result.old_rank;
  out->old_size = result.old_size;
  out->new_rank = result.new_rank;
  out->new_size = result.new_size;
  for (int i = 0; i < checked.old_to_new_capacity && i < result.old_size; ++i)
    checked.old_to_new[i] = result.old_to_new[static_cast<size_t>(i)];
  for (int i = 0; i < ranks_capacity && i < static_cast<int>(ranks.size()); ++i)
    ranks_out[i] = ranks[static_cast<size_t>(i)];
}

// Sets *count to n (so callers can size a retry), then fails if capacity cannot hold it.
inline void SetNeighborCount(int rank, size_t n, int capacity, int* count, bool in) {
  *count = static_cast<int>(n);
  STARLING_CHECK_ARG(n <= static_cast<size_t>(capacity), "rank ", rank, " has ", n,
                     in ? " in-neighbors" : " out-neighbors", " (self excluded) but capacity is ", capacity);
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
