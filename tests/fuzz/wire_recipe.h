// The "wire" target's input: this fixed prefix (the receiver's side of the exchange),
// then the message bytes exactly as they arrived.
#pragma once

#include <cstdint>

#include "impl/ops/wire.h"

namespace starling_fuzz {

struct WireRecipe {
  starling::ops::Signature mine;  // the receiving rank's signature
  int32_t rank;                   // the receiving rank
  int32_t gather_count;           // allgather blocks expected in the payload
  uint64_t row_bytes;             // allgather bytes per row
};

}  // namespace starling_fuzz
