// Plain values packed into and read back from the byte messages that ranks of one job
// exchange (one build, one byte order): grow's join message, the options a resize agrees on.
#pragma once

#include <cstring>
#include <vector>

#include "impl/common/error.h"

namespace starling {

template <typename T>
void PutBytes(std::vector<char>* out, T value) {
  const char* p = reinterpret_cast<const char*>(&value);
  out->insert(out->end(), p, p + sizeof(T));
}

// Reads the value at *at and moves past it; a message too short is kInternal naming `what`.
template <typename T>
T TakeBytes(const std::vector<char>& in, size_t* at, const char* what) {
  STARLING_CHECK(*at + sizeof(T) <= in.size(), Code::kInternal, what, ": short message");
  T value;
  std::memcpy(&value, in.data() + *at, sizeof(T));
  *at += sizeof(T);
  return value;
}

}  // namespace starling
