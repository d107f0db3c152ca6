#include "impl/runtime/heartbeat.h"

#include <algorithm>

#include "impl/common/error.h"
#include "impl/common/quarantine.h"

namespace starling::runtime {
namespace {
// Sends that a dead or stopped peer never completes are kept (MPI may still read
// them) but not tested forever: past this many the oldest are quarantined.
constexpr size_t kMaxPendingSends = 256;
// Set while this thread polls: a transport error raised inside a poll asks the
// context's failure probe, which polls again (Announced); that inner poll returns.
thread_local bool t_polling = false;
}  // namespace

Heartbeat::~Heartbeat() { Detach(); }

void Heartbeat::Attach(transport::Transport* transport, int size) {
  std::lock_guard<std::mutex> lock(mutex_);
  transport_ = transport;
  failed_ = false;
  rank_ = transport->rank();
  heard_.assign(static_cast<size_t>(size), Clock::time_point{});
  announced_.clear();
  pinged_.assign(static_cast<size_t>(size), Clock::time_point{});
  try {
    PostReceive();
  } catch (const Error&) {
    failed_ = true;
  }
}

void Heartbeat::Detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (transport_ == nullptr) return;
  if (in_ticket_.active &&
      transport_->CancelRecvWithin(in_ticket_, 0.1) == transport::Transport::CancelOutcome::kPending) {
    Quarantine(std::shared_ptr<Beat>(std::move(in_)));  // MPI may still write it
    in_ticket_.active = false;
  }
  CompleteSends();
  for (Send& send : sends_)
    if (send.ticket.active) Quarantine(std::shared_ptr<Beat>(std::move(send.beat)));
  sends_.clear();
  transport_ = nullptr;
}

void Heartbeat::PostReceive() {
  in_ = std::make_unique<Beat>();
  in_ticket_ = transport_->Irecv(transport::Channel::kHeartbeat, transport::kAnySource, in_.get(), sizeof(Beat));
}

void Heartbeat::SendLocked(int rank, uint32_t magic, int gone) {
  Send send;
  send.beat = std::make_unique<Beat>();
  send.beat->magic = magic;
  send.beat->gone = gone;
  send.ticket = transport_->Isend(transport::Channel::kHeartbeat, rank, send.beat.get(), sizeof(Beat));
  sends_.push_back(std::move(send));
  if (sends_.size() > kMaxPendingSends) {
    Quarantine(std::shared_ptr<Beat>(std::move(sends_.front().beat)));
    sends_.erase(sends_.begin());
  }
}

void Heartbeat::CompleteSends() {
  for (size_t i = 0; i < sends_.size();) {
    bool done = true;
    try {
      done = transport_->Test(sends_[i].ticket, nullptr);
    } catch (const Error&) {
      done = !sends_[i].ticket.active;  // failed and freed: its buffer is no longer read
    }
    if (done) {
      sends_.erase(sends_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void Heartbeat::Poll() {
  if (t_polling) return;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  PollLocked();
}

void Heartbeat::PollLocked() {
  if (transport_ == nullptr || failed_) return;
  t_polling = true;
  try {
    for (;;) {
      transport::Completion completion;
      if (!transport_->Test(in_ticket_, &completion)) break;
      const Beat beat = *in_;
      PostReceive();
      const int from = completion.source;
      if (completion.bytes != sizeof(Beat) || from < 0 || static_cast<size_t>(from) >= heard_.size()) continue;
      heard_[static_cast<size_t>(from)] = Clock::now();
      if (beat.magic == kPing) SendLocked(from, kPong);
      if (beat.magic == kGone && beat.gone >= 0 && static_cast<size_t>(beat.gone) < heard_.size() &&
          beat.gone != rank_ && !std::binary_search(announced_.begin(), announced_.end(), beat.gone))
        announced_.insert(std::upper_bound(announced_.begin(), announced_.end(), beat.gone), beat.gone);
    }
    CompleteSends();
  } catch (const Error&) {
    failed_ = true;  // a failure MPI knows of: the context fails by itself
  }
  t_polling = false;
}

void Heartbeat::Announce(const std::vector<int>& gone) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (transport_ == nullptr || failed_) return;
  try {
    for (int g : gone)
      for (int r = 0; r < static_cast<int>(heard_.size()); ++r)
        if (r != rank_ && std::find(gone.begin(), gone.end(), r) == gone.end()) SendLocked(r, kGone, g);
  } catch (const Error&) {
    failed_ = true;
  }
}

std::vector<int> Heartbeat::Announced() {
  if (t_polling) return {};
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return {};
  PollLocked();
  return announced_;
}

void Heartbeat::Ping(int rank) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || transport_ == nullptr || failed_) return;
  if (rank < 0 || static_cast<size_t>(rank) >= pinged_.size() || rank == rank_) return;
  const Clock::time_point now = Clock::now();
  Clock::time_point& last = pinged_[static_cast<size_t>(rank)];
  if (now - last < std::chrono::duration<double>(period())) return;
  last = now;
  try {
    SendLocked(rank, kPing);
  } catch (const Error&) {
    failed_ = true;
  }
}

Heartbeat::Clock::time_point Heartbeat::LastHeard(int rank) {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || failed_ || rank < 0 || static_cast<size_t>(rank) >= heard_.size())
    return Clock::time_point::max();
  return heard_[static_cast<size_t>(rank)];
}

}  // namespace starling::runtime
