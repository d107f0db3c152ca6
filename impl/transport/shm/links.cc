#include "impl/transport/shm/links.h"

#include <algorithm>
#include <map>

#include "impl/common/error.h"
#include "impl/common/logging.h"
#include "impl/transport/shm/probe.h"

namespace starling::transport::shm {
namespace {

// What each rank created (first exchange).
struct LinkCreated {
  int32_t ok;
  uint32_t nonce;
};

size_t IndexIn(const std::vector<int>& group, int rank) {
  return static_cast<size_t>(std::find(group.begin(), group.end(), rank) - group.begin());
}

}  // namespace

std::shared_ptr<NeighborLinks> NeighborLinks::Connect(const LinksInput& in, std::string* why) {
  const int n = in.size;
  STARLING_CHECK(in.probe != nullptr && in.host_keys.size() == static_cast<size_t>(n) && in.rank >= 0 && in.rank < n,
                 Code::kInternal, "shared-memory links: inconsistent input");
  std::map<uint64_t, size_t> per_host;
  size_t widest = 1;
  for (uint64_t key : in.host_keys)
    if (key != 0) widest = std::max(widest, ++per_host[key]);
  if (widest <= 1) return nullptr;  // every rank knows: no exchange

  const std::vector<int>& group = in.probe->host_ranks;
  std::vector<int> on;
  for (int r : group)
    if (r != in.rank && r < static_cast<int>(in.probe->pairs.size()) && in.probe->pairs[r].on) on.push_back(r);
  auto links = std::make_shared<NeighborLinks>();
  links->peers_.resize(static_cast<size_t>(n));
  links->copy_ = PublishCopy(in.copy);

  // 1. This rank's outbox, if it has a peer to share it with; and its board when every
  // rank is on this host (a pair is linked only if both have both).
  const bool one_host = group.size() == static_cast<size_t>(n);
  std::vector<Segment> boards(one_host ? static_cast<size_t>(n) : 0);
  LinkCreated mine{0, NewNonce()};
  if (in.enabled && in.capacity > 0 && !on.empty()) {
    try {
      links->own_ = Outbox::Create(SegmentName(in.job, "nbr", in.rank, mine.nonce),
                                   static_cast<uint32_t>(group.size() - 1), static_cast<uint32_t>(on.size()),
                                   in.capacity, in.segment);
      links->offers_ = OfferSender(&links->own_.ring(0), links->own_.readers());
      if (one_host) {
        Segment& board = boards[static_cast<size_t>(in.rank)];
        board = Segment::Create(SegmentName(in.job, "brd", in.rank, mine.nonce), Board::SegmentBytes(),
                                static_cast<uint32_t>(on.size()), in.segment);
        Board::Format(board.payload());
      }
      mine.ok = 1;
    } catch (const std::exception& e) {
      *why = Str("rank ", in.rank, " cannot create its outbox: ", e.what());
    }
  }
  std::vector<LinkCreated> created(static_cast<size_t>(n));
  in.allgather(&mine, sizeof mine, created.data());

  // 2. Map each peer's outbox; tell everyone which ones this rank mapped.
  std::vector<unsigned char> mapped(widest, 0);
  for (int p : on) {
    if (!mine.ok || !created[p].ok) continue;
    try {
      Outbox box = Outbox::Open(SegmentName(in.job, "nbr", p, created[p].nonce), in.segment);
      STARLING_CHECK(box.readers() == group.size() - 1, Code::kTransport, "rank ", p, "'s outbox has ",
                     box.readers(), " readers, ", group.size() - 1, " expected");
      if (one_host) {
        Segment board = Segment::Open(SegmentName(in.job, "brd", p, created[p].nonce), in.segment);
        Board::Validate(board.payload(), board.payload_bytes(), board.name());
        boards[static_cast<size_t>(p)] = std::move(board);
      }
      // May this rank pull the peer's offers? The peer learns it from its ring.
      const std::string pull = box.ProbeOwner(ReaderIndex(group, p, in.rank));
      if (!pull.empty()) STARLING_LOG_DEBUG("shared memory: rank ", p, "'s offers go through its outbox: ", pull);
      links->peers_[p].box = std::move(box);
      links->peers_[p].readable = pull.empty();
      mapped[IndexIn(group, p)] = 1;
    } catch (const std::exception& e) {
      if (why->empty()) *why = Str("rank ", in.rank, " cannot map rank ", p, "'s outbox: ", e.what());
    }
  }
  std::vector<unsigned char> all(widest * static_cast<size_t>(n));
  in.allgather(mapped.data(), widest, all.data());
  links->own_.Unlink();  // every peer had its chance (the last to map removed it already)
  if (one_host && boards[static_cast<size_t>(in.rank)].valid()) boards[static_cast<size_t>(in.rank)].Unlink();

  // 3. A pair is linked when both mapped each other's outbox: the same verdict on both.
  bool any = false;
  for (int p : on) {
    Peer& peer = links->peers_[p];
    peer.linked = mapped[IndexIn(group, p)] && all[widest * static_cast<size_t>(p) + IndexIn(group, in.rank)];
    if (!peer.linked) {
      peer.box = Outbox{};
      continue;
    }
    peer.nonce = created[p].nonce;
    peer.my_index = ReaderIndex(group, p, in.rank);
    peer.their_index = ReaderIndex(group, in.rank, p);
    any = true;
  }
  if (!any) return nullptr;
  // 4. The board: every rank knows every pair's verdict from `all`.
  bool everyone = one_host;
  for (int p = 0; p < n && everyone; ++p)
    for (int q = 0; q < n && everyone; ++q)
      everyone = p == q || all[widest * static_cast<size_t>(p) + IndexIn(group, q)];
  if (everyone) links->board_ = std::make_unique<Board>(in.rank, std::move(boards));
  links->job_ = in.job;
  links->rank_ = in.rank;
  links->nonce_ = mine.nonce;
  return links;
}

std::string NeighborLinks::SegmentNameOf(int rank, const std::string& purpose) const {
  return SegmentName(job_, purpose, rank, rank == rank_ ? nonce_ : peers_[rank].nonce);
}

std::string NeighborLinks::Describe() const {
  std::vector<int> ranks;
  for (size_t r = 0; r < peers_.size(); ++r)
    if (peers_[r].linked) ranks.push_back(static_cast<int>(r));
  return FormatRanks(ranks);
}

}  // namespace starling::transport::shm
