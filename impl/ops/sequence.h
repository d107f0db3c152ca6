// An operation's number on its context, taken with its kind: a wait that stalls tells
// the ranks it waits for both (runtime/disagreement.cc).
#pragma once

#include <cstdint>

#include "impl/ops/wire.h"
#include "impl/runtime/context.h"

namespace starling::ops {

inline uint64_t NextSequence(runtime::Context& context, OpKind kind) {
  return context.NextSequence(static_cast<uint8_t>(kind), OpKindName(kind));
}

}  // namespace starling::ops
