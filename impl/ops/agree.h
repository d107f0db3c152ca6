// Dissemination rounds over a group: in round k, member i sends to i + 2^k and hears
// from i - 2^k. After ceil(log2 n) rounds every member has, through a chain of direct
// signature comparisons, checked every other member, so a disagreement anywhere
// reaches every member (see wire.h). Every classic collective starts this way, which
// is why a rank calling a different collective is caught instead of hanging.
//
// When the group is every rank of the context and they all share one host (the
// context's shared-memory board, transport/shm/board.h), both calls below are one board
// round instead: every member posts its signature (and contribution) and reads every
// other member's, so every member finds a disagreement alike, in one step and without a
// message. Contributions larger than a board slot then travel by dissemination.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "impl/ops/exchange.h"
#include "impl/ops/group.h"
#include "impl/ops/wire.h"
#include "impl/transport/shm/board.h"

namespace starling::ops {

int DisseminationRounds(int n);

// A member's part of a board round: `bytes` at `data` (null: it posted none).
struct Posted {
  const char* data;
  uint64_t bytes;
};
// The board's round when the board serves `group` (see above): posts `signature` and
// `data` (`bytes` <= transport::shm::Board::kCapacity; null: nothing to share), fills
// every member's part by group position and returns true; false when the board does
// not serve the group (then messages must). The parts stay valid until this rank's
// second later round. Throws Error(kMismatch) on every member if any disagrees.
bool BoardRound(runtime::Context& context, const Group& group, const Signature& signature, const void* data,
                size_t bytes, const LazyText& what, std::vector<Posted>* by_position);
// The same with the data in pieces, posted one after another as one part (a header and
// a tensor without packing them first); `pieces` empty: nothing to share.
bool BoardRound(runtime::Context& context, const Group& group, const Signature& signature,
                std::initializer_list<transport::shm::Board::Piece> pieces, const LazyText& what,
                std::vector<Posted>* by_position);

// Header-only agreement; throws Error(kMismatch) on every member if any disagrees.
void Agree(runtime::Context& context, const Group& group, const Signature& signature, const LazyText& what);

// Gathers every member's `bytes`-byte contribution (the same size everywhere, part of
// the signature) by dissemination and returns them indexed by group position. The
// pointers stay valid while `ex` lives (do not Clear it) and this rank makes no second
// further gather or agreement (board rounds reuse their slots). Throws Error(kMismatch)
// on every member if any disagrees.
std::vector<const char*> DisseminationGather(runtime::Context& context, const Group& group,
                                             const Signature& signature, const void* mine, size_t bytes,
                                             Exchange& ex);

}  // namespace starling::ops
