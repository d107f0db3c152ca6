// Dissemination rounds over a group: in round k, member i sends to i + 2^k and hears
// from i - 2^k. After ceil(log2 n) rounds every member has, through a chain of direct
// signature comparisons, checked every other member, so a disagreement anywhere
// reaches every member (see wire.h). Every classic collective starts this way, which
// is why a rank calling a different collective is caught instead of hanging.
#pragma once

#include <string>
#include <vector>

#include "impl/ops/exchange.h"
#include "impl/ops/group.h"
#include "impl/ops/wire.h"

namespace starling::ops {

int DisseminationRounds(int n);

// Header-only agreement; throws Error(kMismatch) on every member if any disagrees.
void Agree(runtime::Context& context, const Group& group, const Signature& signature, const LazyText& what);

// Gathers every member's `bytes`-byte contribution (the same size everywhere, part of
// the signature) by dissemination and returns them indexed by group position. The
// pointers stay valid while `ex` lives (do not Clear it). Throws Error(kMismatch) on
// every member if any disagrees.
std::vector<const char*> DisseminationGather(runtime::Context& context, const Group& group,
                                             const Signature& signature, const void* mine, size_t bytes,
                                             Exchange& ex);

}  // namespace starling::ops
