// Ranks in different operations where no message of one reaches the other: under a
// topology other than the default, a rank in a neighbor operation may wait for a rank
// in a classic collective that never sends to it, and the reverse; neither ever sees
// the other's header (wire.h), so the signature checks cannot fire. A wait in a
// numbered operation that lasts STARLING_MISMATCH_CHECK_SECONDS tells the ranks it
// waits for which operation it is in, and which numbered one it ran before (a small
// notice on the failure-notice channel, kControl). A rank has found a disagreement
// when such a notice names its own operation's number with another kind, or comes
// from a rank it still waits for that is already in a later operation (that rank sent
// all it had for this one before it went on). It fails with STARLING_ERR_MISMATCH,
// marks the context unusable (messages of the two operations may be left unreceived)
// and tells every rank, whose waits then end the same way (WaitMonitor::Check).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "impl/common/logging.h"
#include "impl/common/quarantine.h"
#include "impl/runtime/context.h"

namespace starling::runtime {

void Context::AnnounceStall(const std::set<int>& ranks, const Numbered& op, const std::string& text) {
  std::lock_guard<std::mutex> lock(notice_mutex_);
  if (!transport_ || size_ <= 1) return;
  // Reap the notices delivered so far (one per stalled wait and peer: they must not
  // pile up over a long run with a slow rank).
  stall_sends_.erase(std::remove_if(stall_sends_.begin(), stall_sends_.end(),
                                    [this](StallSend& send) {
                                      try {
                                        return !send.ticket.active || transport_->Test(send.ticket, nullptr);
                                      } catch (const Error&) {
                                        Quarantine(send.notice);  // MPI may still read it
                                        return true;
                                      }
                                    }),
                     stall_sends_.end());
  if (op.last != told_sequence_) {
    told_sequence_ = op.last;
    told_.clear();
  }
  // One notice for every rank told (it is only read): it lives until its last send is reaped.
  std::shared_ptr<Notice> notice;
  for (int r : ranks) {
    // A rank that left answers nothing (and may have finalized MPI).
    if (r == rank_ || r < 0 || r >= size_ || departed(r) || !told_.insert(r).second) continue;
    if (!notice) {
      notice = std::make_shared<Notice>();
      notice->magic = kStallMagic;
      notice->reporter = rank_;
      notice->sequence = op.last;
      notice->first = op.first;
      notice->kind = op.kind;
      notice->previous_kind = previous_.kind;
      notice->previous_first = previous_.first;
      notice->previous_last = previous_.last;
      std::snprintf(notice->previous_name, sizeof notice->previous_name, "%s", previous_name_);
      std::snprintf(notice->text, sizeof notice->text, "%s", text.c_str());
    }
    try {
      stall_sends_.push_back(
          StallSend{notice, transport_->Isend(transport::Channel::kControl, r, notice.get(), sizeof(Notice))});
    } catch (const Error&) {
      // Best effort: that rank's own wait still has its timeout.
    }
  }
}

void Context::RecordStallNews(const Notice& notice, const std::string& text) {
  std::lock_guard<std::mutex> lock(stalls_mutex_);
  if (notice.magic == kStallMagic) {
    Stall& stall = stalls_[notice.reporter];
    stall.op = Numbered{notice.first, notice.sequence, static_cast<uint8_t>(notice.kind)};
    stall.text = text;
    stall.previous = Numbered{notice.previous_first, notice.previous_last, static_cast<uint8_t>(notice.previous_kind)};
    stall.previous_name.assign(notice.previous_name, strnlen(notice.previous_name, sizeof notice.previous_name));
  } else if (mismatch_notice_.empty()) {
    mismatch_notice_ = Str(text, " (reported by ", DescribeRank(notice.reporter), ")");
    mismatch_notified_.store(true);  // the reporter told everyone already
  }
  any_stall_news_.store(true, std::memory_order_release);
}

namespace {
bool NumbersOverlap(const Numbered& a, const Numbered& b) {
  return a.kind != 0 && b.kind != 0 && a.first <= b.last && b.first <= a.last;
}
}  // namespace

std::string Context::StallDisagreement(const Numbered& op, const std::set<int>& awaited, const LazyText& mine) {
  if (!any_stall_news() || op.kind == 0) return {};
  const auto found = [this] {
    return Str(" (found when both had waited STARLING_MISMATCH_CHECK_SECONDS=", config_.mismatch_check_seconds,
               " s: no message of either operation reached the other)");
  };
  std::lock_guard<std::mutex> lock(stalls_mutex_);
  for (const auto& [r, stall] : stalls_) {
    // Operation numbers are handed out in call order on every rank: a shared number
    // is the same call in the program, and must be the same kind of operation.
    if (NumbersOverlap(stall.op, op) && stall.op.kind != op.kind) {
      return Str("ranks disagree: ", DescribeRank(r), " called ", stall.text, " while rank ", rank_, " called ", mine(),
                 found());
    }
    // A rank that went on to a later operation sent everything it had for this one
    // before it left it; this rank still waiting for it (after waiting as long as that
    // rank did before it spoke) means it never will.
    if (stall.op.first > op.last && awaited.count(r) > 0) {
      if (NumbersOverlap(stall.previous, op) && stall.previous.kind != op.kind) {
        return Str("ranks disagree: ", DescribeRank(r), " called ", stall.previous_name, " #", stall.previous.last,
                   " (and went on to ", stall.text, ") while rank ", rank_, " called ", mine(), found());
      }
      return Str("ranks disagree: ", DescribeRank(r), " is already in ", stall.text, " while rank ", rank_,
                 " still waits for it in ", mine(),
                 ": it ended that operation without sending what this rank waits for (it failed there, or the"
                 " ranks' topologies or calls differ)");
    }
  }
  return {};
}

void Context::NotifyMismatch(const std::string& reason) {
  std::lock_guard<std::mutex> lock(notice_mutex_);
  if (mismatch_notified_.exchange(true) || !transport_) return;
  // Kept until the process ends: ranks that left may never take it, and MPI may read
  // the buffer until then. At most one per context.
  auto kept = std::make_shared<Notice>();
  Quarantine(kept);
  kept->magic = kMismatchMagic;
  kept->reporter = rank_;
  std::snprintf(kept->text, sizeof kept->text, "%s", reason.c_str());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    try {
      transport_->Isend(transport::Channel::kControl, r, kept.get(), sizeof(Notice));  // never waited for
    } catch (const Error&) {
      // Best effort: the others still have their own checks and timeouts.
    }
  }
}

std::string Context::MismatchNotice() {
  if (!any_stall_news_.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(stalls_mutex_);
  return mismatch_notice_;
}

void Context::ClearStallNews() {
  {
    std::lock_guard<std::mutex> lock(stalls_mutex_);
    stalls_.clear();
    mismatch_notice_.clear();
    any_stall_news_.store(false);
  }
  mismatch_notified_.store(false);
  std::lock_guard<std::mutex> lock(notice_mutex_);
  told_sequence_ = 0;
  told_.clear();
}

void Context::AbandonStallSends() {  // notice_mutex_ held
  for (StallSend& send : stall_sends_)
    if (send.ticket.active) Quarantine(send.notice);  // MPI may still read it
  stall_sends_.clear();
}

}  // namespace starling::runtime
