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
  size_t total = 0;
  std::vector<uint64_t> offsets;
  for (const Outgoing& o : outgoing) {
    offsets.push_back(total);
    total = AlignUp(total + o.info.bytes);
  }
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
