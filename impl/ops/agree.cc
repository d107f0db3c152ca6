#include "impl/ops/agree.h"

#include <cstring>
#include <type_traits>

#include "impl/ops/shm_data.h"
#include "impl/transport/order.h"

namespace starling::ops {
namespace {

using transport::shm::Board;
static_assert(std::is_trivially_copyable_v<Signature> && sizeof(Signature) <= Board::kTagBytes,
              "a signature is a board round's tag");

// The context's links when its board serves `group`: every rank of the context.
std::shared_ptr<transport::shm::NeighborLinks> BoardLinks(runtime::Context& context, const Group& group) {
  std::shared_ptr<transport::shm::NeighborLinks> links = context.shm_links();
  if (!links || links->board() == nullptr || group.size() < 2 || group.size() != context.size()) return nullptr;
  return links;
}

}  // namespace

bool BoardRound(runtime::Context& context, const Group& group, const Signature& signature, const void* data,
                size_t bytes, const LazyText& what, std::vector<Posted>* by_position) {
  if (data == nullptr) return BoardRound(context, group, signature, {}, what, by_position);
  return BoardRound(context, group, signature, {Board::Piece{data, bytes}}, what, by_position);
}

bool BoardRound(runtime::Context& context, const Group& group, const Signature& signature,
                std::initializer_list<Board::Piece> pieces, const LazyText& what, std::vector<Posted>* by_position) {
  const auto links = BoardLinks(context, group);
  if (!links) return false;
  uint64_t bytes = 0;
  for (const Board::Piece& piece : pieces) bytes += piece.bytes;
  STARLING_CHECK(bytes <= Board::kCapacity, Code::kInternal, "board: ", bytes, " bytes exceed a slot");
  unsigned char tag[Board::kTagBytes] = {};
  std::memcpy(tag, &signature, sizeof signature);
  SharedWait wait(context, what, signature.seq, {}, "not heard from");  // {}: every other rank
  transport::OrderBeforePublish();  // the round stands in for messages (transport/order.h)
  const std::vector<Board::Entry>& entries =
      links->board()->RoundInPieces(tag, pieces.begin(), pieces.size(), wait.policy, wait.check);
  transport::OrderAfterObserve();
  // Every member compares every member's signature with the first member's, so all
  // throw the same error naming the same two ranks.
  auto sig_of = [&](int rank) {
    Signature s;
    std::memcpy(&s, entries[static_cast<size_t>(rank)].tag, sizeof s);
    return s;
  };
  const Signature first = sig_of(group.ranks[0]);
  for (int r : group.ranks) {
    const Signature s = sig_of(r);
    if (s != first) ThrowDisagreement(group.ranks[0], first, r, s);
  }
  by_position->clear();
  by_position->reserve(group.ranks.size());
  transport::Traffic* traffic = context.transport().traffic();
  for (int r : group.ranks) {
    const Board::Entry& e = entries[static_cast<size_t>(r)];
    by_position->push_back(Posted{e.data, e.bytes});
    // As the neighbor path counts: what this rank posted, for every peer, and what each
    // peer posted for it.
    if (traffic == nullptr || r == context.rank()) continue;
    if (pieces.size() > 0) traffic->SentShared(r, bytes);
    if (e.data != nullptr) traffic->ReceivedShared(r, e.bytes);
  }
  return true;
}

int DisseminationRounds(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

void Agree(runtime::Context& context, const Group& group, const Signature& signature, const LazyText& what) {
  std::vector<Posted> posted;
  if (BoardRound(context, group, signature, nullptr, 0, what, &posted)) return;
  Agreement agreement(context.rank(), signature);
  Exchange ex(context, transport::Channel::kCollective, what);
  for (int k = 0, d = 1; k < DisseminationRounds(group.size()); ++k, d <<= 1) {
    Header header;
    agreement.Stamp(&header);
    ex.SendFrame(group.peer(d), header, nullptr);
    const int frame = ex.RecvFrame(group.peer(-d));
    ex.Wait();
    agreement.Check(ex.header(frame));
    ex.Clear();
  }
  agreement.ThrowIfPoisoned();
}

std::vector<const char*> DisseminationGather(runtime::Context& context, const Group& group,
                                             const Signature& signature, const void* mine, size_t bytes,
                                             Exchange& ex) {
  const int n = group.size();
  const bool fits = bytes <= Board::kCapacity;
  // A null `mine` of 0 bytes still posts (an empty contribution, not none).
  const void* post = fits ? (mine != nullptr ? mine : static_cast<const void*>(&signature)) : nullptr;
  std::vector<Posted> posted;
  if (BoardRound(context, group, signature, post, bytes, ex.what(), &posted)) {
    if (fits) {
      std::vector<const char*> by_position;
      by_position.reserve(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        const Posted& p = posted[static_cast<size_t>(i)];
        STARLING_CHECK(p.data != nullptr && p.bytes == bytes, Code::kMismatch, "rank ",
                       group.ranks[static_cast<size_t>(i)], " posted ", p.bytes, " bytes for ",
                       DescribeSignature(signature), " where this rank has ", bytes);
        by_position.push_back(p.data);
      }
      return by_position;
    }
    for (int i = 0; i < n; ++i)
      STARLING_CHECK(posted[static_cast<size_t>(i)].data == nullptr, Code::kMismatch, "rank ",
                     group.ranks[static_cast<size_t>(i)], " posted its part of ", DescribeSignature(signature),
                     " where this rank's ", bytes, " bytes are too many");
    // Agreed; too large for a slot: by dissemination (which checks once more).
  }
  // Before round k member i knows the contributions of i, i - 1, ..., i - 2^k + 1
  // (known[j] is member i - j's); it sends the ones i + 2^k lacks.
  Agreement agreement(context.rank(), signature);
  std::vector<const char*> known{static_cast<const char*>(mine)};
  for (int k = 0, d = 1; k < DisseminationRounds(n); ++k, d <<= 1) {
    const size_t count = std::min<size_t>(std::min(d, n - d), known.size());
    runtime::ScratchPool::Buffer packed = context.scratch().Get(count * bytes);
    if (bytes > 0)  // empty contributions may come with a NULL pointer
      for (size_t i = 0; i < count; ++i) std::memcpy(packed.data() + i * bytes, known[i], bytes);
    Header header;
    agreement.Stamp(&header);
    header.payload_bytes = count * bytes;
    ex.SendFrame(group.peer(d), header, packed.data());
    const int frame = ex.RecvFrame(group.peer(-d));
    ex.Wait();
    const Header& h = ex.header(frame);
    const size_t incoming = static_cast<size_t>(std::min(d, n - d));
    if (agreement.Check(h) && h.payload_bytes == incoming * bytes) {
      for (size_t i = 0; i < incoming; ++i) known.push_back(ex.payload(frame) + i * bytes);
    }
  }
  agreement.ThrowIfPoisoned();
  STARLING_CHECK(static_cast<int>(known.size()) == n, Code::kInternal, "gathered ", known.size(), " of ", n,
                 " contributions");
  std::vector<const char*> by_position(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) by_position[static_cast<size_t>(((group.index - j) % n + n) % n)] = known[j];
  return by_position;
}

}  // namespace starling::ops
