#include "impl/runtime/wait_monitor.h"

#include <algorithm>

#include "impl/common/logging.h"
#include "impl/runtime/context.h"

namespace starling::runtime {

namespace {
// Every wait checks its deadlines every few milliseconds. A longer gap means this
// process did not run: it was stopped (SIGSTOP, a debugger), its virtual machine was
// paused by the host, or the computer slept. Its peers could not be heard meanwhile,
// so the pause must not count as their silence: of each gap, at most this much counts
// toward the stall warning, the timeout and the heartbeat's verdict. (Before, a rank
// stopped for longer than the timeout failed the moment it was continued, blaming a
// peer that was ready: Timeout.PausedWaiterDoesNotBlameItsPeers.)
constexpr double kMaxCountedGapSeconds = 0.25;
// A wait shorter than this is not a stall: failure notices are not even looked at.
constexpr double kNoticeAfterSeconds = 0.01;
constexpr double kFailurePollSeconds = 0.002;
constexpr double kHeartbeatCheckSeconds = 0.01;
}  // namespace

WaitMonitor::WaitMonitor(Context& context, const LazyText& what, uint64_t sequence)
    : context_(context),
      what_(what),
      sequence_(sequence),
      last_check_(std::chrono::steady_clock::now()),
      next_warning_(context.config().stall_warning_seconds),
      next_probe_(context.config().peer_check_seconds) {
  if (sequence != 0 && sequence == context.sequence() && context.running_kind() != 0) {
    op_ = Numbered{context.running_first(), sequence, context.running_kind()};
    kind_name_ = context.running_kind_name();
    next_announce_ = context.config().mismatch_check_seconds;
  }
}

std::string WaitMonitor::DescribeMine() const {
  // The description starts with the operation's name ("allreduce 'grad' (...)"), or
  // not ("3 fused neighbor_allreduce calls").
  const std::string text = what_();
  const std::string name = kind_name_;
  if (text.compare(0, name.size(), name) == 0 && (text.size() == name.size() || text[name.size()] == ' '))
    return Str(name, " #", sequence_, text.substr(name.size()));
  return Str(name, " #", sequence_, " (", text, ")");
}

void WaitMonitor::CheckDisagreement(const std::function<Awaited()>& awaited, double waited) {
  const double after = context_.config().mismatch_check_seconds;
  const bool announce = after > 0 && waited >= next_announce_;
  // Only once this wait has lasted as long as the peers' did before they spoke: what a
  // peer sent before it went on has arrived by then.
  const bool compare = after > 0 && waited >= after && context_.any_stall_news();
  std::set<int> ranks;
  if (announce || compare) ranks = awaited().ranks;
  if (context_.any_stall_news()) {
    std::string reason = context_.MismatchNotice();
    const bool found_here = reason.empty();
    if (found_here && compare) reason = context_.StallDisagreement(op_, ranks, [this] { return DescribeMine(); });
    if (!reason.empty()) {
      // Messages of the two operations may be left unreceived: the context cannot go on.
      context_.MarkBroken(reason, Code::kMismatch);
      if (found_here) context_.NotifyMismatch(reason);
      throw Error(Code::kMismatch, reason);
    }
  }
  if (announce) {
    // Again later: a later round of the operation may wait for other ranks.
    next_announce_ = waited + after;
    context_.AnnounceStall(ranks, op_, DescribeMine());
  }
}

double WaitMonitor::Advance() {
  const auto now = std::chrono::steady_clock::now();
  const double gap = std::chrono::duration<double>(now - last_check_).count();
  last_check_ = now;
  if (gap > kMaxCountedGapSeconds) {
    STARLING_LOG_DEBUG(what_(), ": this process did not run for ", gap, " s; ", kMaxCountedGapSeconds,
                       " s of it count toward the deadlines");
    // The heartbeat's silence is measured from the first ping after the pause.
    heartbeat_start_ = std::chrono::steady_clock::time_point{};
  }
  waited_ += std::min(gap, kMaxCountedGapSeconds);
  return waited_;
}

void WaitMonitor::CheckAborted() const {
  if (!context_.local_teardown()) return;
  if (context_.aborted()) Fail(Code::kAborted, "aborted while waiting for peers (starling_context_abort)");
  context_.CheckUsable();  // a peer failure found by another wait: this one ends too
}

[[noreturn]] void WaitMonitor::PeerFailed(const std::string& reason) {
  context_.MarkBroken(reason, Code::kPeerFailed);
  throw Error(Code::kPeerFailed, reason);
}

void WaitMonitor::Check(const std::function<Awaited()>& awaited) {
  CheckAborted();
  const Config& config = context_.config();
  const double waited = Advance();
  if (waited >= kNoticeAfterSeconds) {
    // Another rank found a peer gone and told everyone: a wait for a survivor that
    // stopped at that failure would otherwise last until the timeout.
    const std::string notice = context_.PollFailureNotice();
    if (!notice.empty()) PeerFailed(notice);
    // Before departures: a rank that found a disagreement leaves after telling.
    if (op_.kind != 0) CheckDisagreement(awaited, waited);
    // A rank left (an exception, an exit, a shutdown): a wait it will never answer ends.
    if (context_.any_departure()) {
      const std::string left = context_.DepartureFailure(awaited().ranks, sequence_);
      if (!left.empty()) {
        // Tell the others: a rank waiting in this operation for this one (not for the
        // rank that left) would otherwise wait until STARLING_TIMEOUT_SECONDS.
        // A rank that has left is told too: its destroy stops waiting for this one's
        // departure (a broken context leaves without one).
        context_.NotifyPeerFailure(left, {});
        PeerFailed(left);
      }
    }
  }
  if (waited >= next_failure_poll_ && context_.fault_tolerant()) {
    // ULFM knows of failures before any message to the dead rank fails (a wait on a
    // mutex it holds sends nothing): ask it every few milliseconds.
    next_failure_poll_ = waited + kFailurePollSeconds;
    const std::string failed = context_.KnownFailures();
    if (!failed.empty()) PeerFailed(failed);
  }
  if (Heartbeat* heartbeat = context_.heartbeat()) {
    heartbeat->Poll();  // this rank answers its peers' pings while it waits
    if (next_heartbeat_ < 0) next_heartbeat_ = heartbeat->period();
    if (waited >= next_heartbeat_) {
      next_heartbeat_ = waited + kHeartbeatCheckSeconds;
      CheckHeartbeat(awaited, waited);
    }
    if (waited >= kNoticeAfterSeconds) {
      // Another rank's heartbeat found one gone: this wait may depend on it, or on a
      // survivor that stopped at the failure.
      const std::vector<int> announced = heartbeat->Announced();
      if (!announced.empty()) {
        PeerFailed(Str(context_.DescribeGone(announced),
                       " gone (another rank's heartbeat found no answer for STARLING_HEARTBEAT_SECONDS=",
                       heartbeat->timeout(), " s: killed, crashed, hung or stopped)"));
      }
    }
  }
  if (next_probe_ > 0 && waited >= next_probe_) {
    next_probe_ = waited + config.peer_check_seconds;
    const Awaited a = awaited();
    std::vector<int> gone;
    const std::string message = context_.ProbePeers(a.ranks, &gone);
    if (!message.empty()) {
      context_.NotifyPeerFailure(message, gone);
      PeerFailed(Str(message, "; was waiting ", static_cast<int>(waited * 10) / 10.0, " s for ", a.text));
    }
  }
  if (next_warning_ > 0 && waited >= next_warning_) {
    const Awaited a = awaited();
    STARLING_LOG_WARN(what_(), " has waited ", static_cast<int>(waited), " s for ", a.text,
                      " (a rank may have skipped this call or be stuck before it)", context_.PeerNotes(a.ranks));
    next_warning_ += config.stall_warning_seconds;
  }
  if (config.timeout_seconds > 0 && waited >= config.timeout_seconds) {
    const Awaited a = awaited();
    Fail(Code::kTimeout, "timed out after ", config.timeout_seconds, " s waiting for ", a.text,
         " (STARLING_TIMEOUT_SECONDS)", context_.PeerNotes(a.ranks));
  }
}

void WaitMonitor::CheckHeartbeat(const std::function<Awaited()>& awaited, double waited) {
  Heartbeat& heartbeat = *context_.heartbeat();
  const auto now = std::chrono::steady_clock::now();
  if (heartbeat_start_ == std::chrono::steady_clock::time_point{}) heartbeat_start_ = now;
  const Awaited a = awaited();
  std::vector<int> silent;
  double silent_for = 0;
  for (int r : a.ranks) {
    if (r == context_.rank() || context_.departed(r)) continue;  // a rank that left answers nothing
    heartbeat.Ping(r);
    const auto heard = heartbeat.LastHeard(r);
    if (heard == std::chrono::steady_clock::time_point::max()) continue;  // unknown now: never a verdict
    const double quiet = std::chrono::duration<double>(now - std::max(heard, heartbeat_start_)).count();
    if (quiet >= heartbeat.timeout()) {
      silent.push_back(r);
      silent_for = std::max(silent_for, quiet);
    }
  }
  if (silent.empty()) return;
  const std::string message =
      Str(context_.DescribeGone(silent), " gone (no answer to heartbeats for ",
          static_cast<int>(silent_for * 100) / 100.0, " s, STARLING_HEARTBEAT_SECONDS=", heartbeat.timeout(),
          ": killed, crashed, hung or stopped)");
  context_.NoteGone(silent);
  heartbeat.Announce(silent);  // first: it outlives the revocation that PeerFailed sends
  context_.NotifyPeerFailure(message, silent);
  PeerFailed(Str(message, "; was waiting ", static_cast<int>(waited * 10) / 10.0, " s for ", a.text));
}

void WaitMonitor::ExplainTransportFailure(const Error& error, const std::function<Awaited()>& awaited) {
  if (error.code() != Code::kTransport || context_.config().peer_check_seconds <= 0) return;
  std::vector<int> gone;
  const std::string message = context_.ProbePeers(awaited().ranks, &gone);
  if (message.empty()) return;
  context_.NotifyPeerFailure(message, gone);
  PeerFailed(Str(message, " (MPI reported: ", error.what(), ")"));
}

}  // namespace starling::runtime
