// Agreement rounds: every rank learns whether all ranks called the same operation
// (signature) before any bulk data moves. Dissemination pattern: in round k, rank r
// sends to r + 2^k and hears from r - 2^k; after ceil(log2 p) rounds every rank has,
// through a chain of direct comparisons, checked every other rank's signature.
#pragma once

#include "impl/ops/exchange.h"
#include "impl/ops/wire.h"

namespace starling::ops {

// Number of dissemination rounds for p ranks: ceil(log2 p).
int DisseminationRounds(int p);

// Header-only agreement; throws Error(kMismatch) on every rank if any rank disagrees.
void Agree(runtime::Context& context, const Signature& signature, const std::string& what);

}  // namespace starling::ops
