#include "impl/ops/shm_data.h"

#include <cstring>
#include <tuple>

#include "impl/runtime/engine.h"

namespace starling::ops {
namespace {

// Segments start on 64-byte boundaries in an outbox buffer (aligned vector loads).
constexpr size_t kShmAlign = 64;
size_t AlignUp(size_t bytes) { return (bytes + kShmAlign - 1) / kShmAlign * kShmAlign; }

// How long a writer waits for a reader to release the buffer it needs before it sends
// that exchange through MPI instead. Readers release a publication as soon as they have
// combined it (neighbor exchanges copy it out when a wait for a peer lasts while they
// hold it), so in practice this is a lagging or descheduled reader; giving up after a
// bounded time keeps every other case (a reader blocked on an MPI send to this rank)
// from deadlocking.
constexpr double kGiveUpSeconds = 0.1;

// Offers (readers pulling from the sender's memory) from this size: below it the kernel
// call and the sender's wait for its readers cost more than the outbox's copies
// (docs/performance.md, "Offers": 2 ranks, 16-32 KiB).
constexpr size_t kPullMinBytes = 48 << 10;

// Where each segment goes in one buffer holding them all (an outbox publication, or an
// offer's copy for a late reader); returns the total.
size_t Pack(const std::vector<uint64_t>& sizes, std::vector<uint64_t>* offsets) {
  size_t total = 0;
  offsets->clear();
  for (uint64_t bytes : sizes) {
    offsets->push_back(total);
    total = AlignUp(total + bytes);
  }
  return total;
}

}  // namespace

SharedWait::SharedWait(runtime::Context& context, const LazyText& what, uint64_t sequence, std::set<int> ranks,
                       const char* doing)
    : context_(context), monitor_(context, what, sequence), ranks_(std::move(ranks)), doing_(doing) {
  policy.spin_seconds = context.config().spin_microseconds * 1e-6;
  policy.slice_seconds = 0.001;  // abort and the deadlines are looked at every millisecond
  // As every wait for peers (Exchange::Wait): off the application's thread, or where
  // this job's ranks outnumber the host's cores, the spin yields its core.
  policy.yield = context.layout().host_oversubscribed || runtime::Engine::OnProgressThread();
  check = [this] {
    monitor_.CheckAborted();
    context_.ServiceBackground();
    monitor_.Check([this] {
      runtime::Awaited a;
      a.ranks = ranks_;
      if (a.ranks.empty())  // every other rank
        for (int r = 0; r < context_.size(); ++r)
          if (r != context_.rank()) a.ranks.insert(r);
      std::string list;
      for (int r : a.ranks) list += Str(list.empty() ? "" : ", ", r);
      a.text = Str("rank(s) ", list, " (", doing_, ")");
      return a;
    });
  };
}

bool PublishShared(runtime::Context& context, transport::shm::NeighborLinks* links,
                   const std::vector<int>& destinations, const std::vector<Outgoing>& outgoing, const LazyText& what,
                   uint64_t sequence, Published* published) {
  if (links == nullptr) return false;
  std::vector<uint32_t> readers;
  std::set<int> ranks;
  for (int d : destinations) {
    if (!links->linked(d)) continue;
    readers.push_back(links->reader_index(d));
    ranks.insert(d);
  }
  if (readers.empty()) return false;
  std::vector<uint64_t> sizes, offsets;
  for (const Outgoing& o : outgoing) sizes.push_back(o.info.bytes);
  const size_t total = Pack(sizes, &offsets);
  if (total == 0 || total < context.config().shm_min_bytes) return false;
  SharedWait wait(context, what, sequence, std::move(ranks), "not releasing this rank's shared-memory buffer");
  char* buffer = links->own().Begin(total, readers, kGiveUpSeconds, wait.policy, wait.check);
  if (buffer == nullptr) return false;
  links->publish_copy().Copy(total, outgoing.size(), [&](size_t i) {
    return std::make_tuple(buffer + offsets[i], outgoing[i].data, static_cast<size_t>(outgoing[i].info.bytes));
  });
  published->number = links->own().Publish();
  published->offsets = std::move(offsets);
  return true;
}

Offer::Offer(runtime::Context& context, std::shared_ptr<transport::shm::NeighborLinks> links,
             const std::vector<int>& destinations, const std::vector<Outgoing>& outgoing, Published* published)
    : links_(std::move(links)), outgoing_(outgoing) {
  const size_t most = context.config().shm_pull_bytes;
  // Where ranks outnumber the host's cores a reader is often descheduled: the sender
  // would wait for it or copy anyway (measured slower than the outbox at 4 ranks on 2
  // cores up to 64 KiB), so it publishes instead.
  if (!links_ || most == 0 || !links_->offers().valid() || context.layout().host_oversubscribed) return;
  std::vector<uint64_t> sizes;
  for (const Outgoing& o : outgoing) sizes.push_back(o.info.bytes);
  total_ = Pack(sizes, &packed_);
  if (total_ < kPullMinBytes || total_ > most || total_ < context.config().shm_min_bytes) return;
  for (int d : destinations) {
    if (!links_->linked(d)) continue;
    readers_.push_back(links_->reader_index(d));
    ranks_.insert(d);
  }
  number_ = links_->offers().Offer(readers_);
  if (number_ == 0) return;
  published->number = number_;
  published->offered = true;
  published->offsets.clear();
  for (const Outgoing& o : outgoing) published->offsets.push_back(reinterpret_cast<uintptr_t>(o.data));
}

Offer::~Offer() {
  if (number_ != 0) links_->offers().Withdraw(number_, readers_);
}

void Offer::Finish(runtime::Context& context, const LazyText& what, uint64_t sequence) {
  if (number_ == 0) return;
  SharedWait wait(context, what, sequence, ranks_, "not reading this rank's offered data");
  // A reader that has not begun to read once the spin is over is late (descheduled, or
  // in other work): it gets a copy rather than this rank waiting for the scheduler.
  links_->offers().Finish(
      number_, readers_, wait.policy.spin_seconds, total_,
      [this](char* dst) {
        for (size_t i = 0; i < outgoing_.size(); ++i)
          if (outgoing_[i].info.bytes > 0) std::memcpy(dst + packed_[i], outgoing_[i].data, outgoing_[i].info.bytes);
      },
      wait.policy, wait.check);
  number_ = 0;
}

void PullShared(runtime::Context& context, const transport::shm::NeighborLinks& links, int source, uint32_t number,
                const std::vector<SegmentInfo>& entries, const std::vector<char*>& dst, const LazyText& what,
                uint64_t sequence) {
  std::vector<uint64_t> sizes, packed;
  for (const SegmentInfo& e : entries) sizes.push_back(e.bytes);
  Pack(sizes, &packed);
  std::vector<transport::shm::OfferPiece> pieces(entries.size());
  for (size_t i = 0; i < entries.size(); ++i)
    pieces[i] = transport::shm::OfferPiece{entries[i].shm_offset, packed[i], entries[i].bytes, dst[i]};
  SharedWait wait(context, what, sequence, {source}, "its offered data is not ready");
  const transport::shm::Outbox& box = links.outbox_of(source);
  bool checking = false;  // the wait's own verdicts (abort, deadlines) name their ranks already
  const std::function<void()> check = [&] {
    checking = true;
    wait.check();
    checking = false;
  };
  try {
    transport::shm::PullOffer(box.ring(links.my_index_in(source)), box.owner_pid(), number, pieces, wait.policy,
                              check);
  } catch (const Error& e) {
    if (checking) throw;
    throw Error(e.code(), Str(what(), ": rank ", source, ": ", e.what()));
  }
}

const char* ReadShared(runtime::Context& context, const transport::shm::NeighborLinks& links, int source,
                       uint32_t number, uint64_t offset, uint64_t bytes, const LazyText& what, uint64_t sequence) {
  SharedWait wait(context, what, sequence, {source}, "its shared-memory publication is not visible");
  return links.outbox_of(source).Read(number, offset, bytes, wait.policy, wait.check);
}

Lease::~Lease() {
  try {
    links_->outbox_of(peer_).Release(links_->my_index_in(peer_), number_);
  } catch (...) {  // an index checked when linked: cannot happen
  }
}

}  // namespace starling::ops
