// Departures: a rank that leaves a context tells the others, so that their waits for
// it end with a clear error instead of hanging (an exception on one rank, an exit
// without destroy, a shutdown while the others still compute). The notices travel on
// the failure-notice channel (kControl); wait loops read them (WaitMonitor::Check).
#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "impl/common/logging.h"
#include "impl/common/quarantine.h"
#include "impl/runtime/context.h"
#include "impl/runtime/wait_monitor.h"

namespace starling::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// A notice that has not left after this long goes to a dead or stuck peer.
constexpr double kSendSeconds = 0.25;
// A request to a rank that left normally (window put/get, pair gossip) may still be
// answered by what it sent before it left; after this long it will not be.
constexpr double kUnnumberedGraceSeconds = 1.0;

// Contexts alive in this process, for the exit handler.
std::mutex g_live_mutex;
auto* g_live = new std::vector<std::weak_ptr<Context>>();  // leaked: used at exit

// exit() or a return from main while a context is alive: the process is leaving
// without its peers, which may be waiting for it. Tell them, and never finalize MPI
// (that would wait for them). Not a signal handler: a killed process runs nothing.
void AbandonAtExit(int status, void*) {
  std::vector<std::shared_ptr<Context>> live;
  {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    for (const auto& weak : *g_live)
      if (auto context = weak.lock()) live.push_back(std::move(context));
  }
  for (const auto& context : live) {
    try {
      context->Abandon(Str("exited (status ", status, ") without destroying its context"));
    } catch (...) {
      // At exit nothing can be reported; the peers still have their probes and timeouts.
    }
  }
}

}  // namespace

void Context::WatchExit(const std::shared_ptr<Context>& context) {
  static std::once_flag once;
  std::call_once(once, [] { on_exit(AbandonAtExit, nullptr); });
  std::lock_guard<std::mutex> lock(g_live_mutex);
  g_live->erase(std::remove_if(g_live->begin(), g_live->end(), [](const auto& w) { return w.expired(); }),
                g_live->end());
  g_live->push_back(context);
}

size_t Context::Depart(const std::string& reason, bool normal) {
  PollFailureNotice();  // learn of ranks that left already
  std::lock_guard<std::mutex> lock(notice_mutex_);
  if (departed_ || !transport_) return 0;
  departed_ = true;
  if (size_ <= 1) return 0;
  // Kept until the process ends (quarantined, so leak checkers see it held): a send to a
  // stuck peer may complete (and read the buffer) at any later time.
  auto kept = std::make_shared<Notice>();
  Quarantine(kept);
  Notice* notice = kept.get();
  notice->magic = kDepartureMagic;
  notice->reporter = rank_;
  notice->sequence = normal ? sequence_ : 0;  // normal: the engine is stopped
  notice->normal = normal ? 1 : 0;
  std::snprintf(notice->text, sizeof notice->text, "%s", reason.c_str());
  // Ranks that left abnormally wait for nobody: a send to them may never complete (and
  // must not outlive their communicator). Those that left normally wait for this one.
  std::set<int> gone;
  {
    std::lock_guard<std::mutex> record(departures_mutex_);
    for (const auto& entry : departures_)
      if (!entry.second.normal) gone.insert(entry.first);
  }
  std::vector<transport::Ticket> sends;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || gone.count(r) > 0) continue;
    try {
      sends.push_back(transport_->Isend(transport::Channel::kControl, r, notice, sizeof(Notice)));
    } catch (const Error&) {
      // Best effort: that peer still has its probes and timeouts.
    }
  }
  // The process may exit right after this: let the notices leave it first.
  const auto deadline = Clock::now() + std::chrono::duration<double>(kSendSeconds);
  for (bool pending = true; pending && Clock::now() < deadline;) {
    pending = false;
    for (auto& send : sends) {
      if (!send.active) continue;
      try {
        pending |= !transport_->Test(send, nullptr);
      } catch (const Error&) {
        send.active = false;
      }
    }
    if (pending) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  STARLING_LOG_DEBUG("departure told to ", sends.size(), " ranks: ", reason);
  return sends.size();
}

void Context::AwaitDepartures() {
  const LazyText what = [] { return std::string("starling_context_destroy (serving window requests until every rank left)"); };
  WaitMonitor monitor(*this, what);
  auto remaining = [this] {
    std::lock_guard<std::mutex> lock(departures_mutex_);
    std::set<int> ranks;
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && departures_.count(r) == 0) ranks.insert(r);
    return ranks;
  };
  auto awaited = [&] {
    Awaited a;
    a.ranks = remaining();
    for (int r : a.ranks) a.text += Str(a.text.empty() ? "rank(s) " : ", ", r);
    a.text += " (not yet left)";
    return a;
  };
  auto abnormal = [this] {
    std::lock_guard<std::mutex> lock(departures_mutex_);
    for (const auto& entry : departures_)
      if (!entry.second.normal) return true;
    return false;
  };
  for (int idle = 0;;) {
    const std::string failure = PollFailureNotice();
    STARLING_CHECK(failure.empty(), Code::kPeerFailed, failure);
    if (remaining().empty()) return;
    if (abnormal()) {
      // A rank that left abnormally waits for nobody and never finalizes MPI: neither
      // does this one (MPI_Finalize would wait for it). The job is ending.
      MarkBroken("a rank left abnormally", Code::kPeerFailed, /*revoke=*/false);
      return;
    }
    monitor.CheckAborted();
    if (ServiceBackground()) {
      idle = 0;
      continue;
    }
    if ((++idle & 63) == 0) monitor.Check(awaited);  // abnormal departures, failures, timeout
    if (idle > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    else sched_yield();
  }
}

// Abandoning usually follows an error report the user must see first (a traceback):
// give the launcher time to forward it before the peers' own errors follow.
namespace {
void WaitForLastWords() { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }
}  // namespace

void Context::Abandon(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(destroy_mutex_);
    if (destroyed_) return;
  }
  // The first to leave (others follow a failure: theirs is not the first report).
  if (!local_teardown()) WaitForLastWords();

  const size_t told = Depart(reason, /*normal=*/false);
  // Then every rank's error, the peers' too: the launcher may stop all ranks as soon as
  // one exits non-zero (at once under starlingrun with Open MPI 4), and the peers that
  // this notice fails print their errors within milliseconds of each other.
  if (told > 0) WaitForLastWords();
  Abort();    // the running operation fails within milliseconds, queued ones at once
  Destroy();  // local: aborted
}

std::string Context::DepartureFailure(const std::set<int>& awaited, uint64_t sequence) const {
  std::lock_guard<std::mutex> lock(departures_mutex_);
  for (const auto& [r, d] : departures_)
    if (!d.normal) return Str(DescribeRank(r), " ", d.reason);
  const auto now = Clock::now();
  for (int r : awaited) {
    const auto it = departures_.find(r);
    if (it == departures_.end()) continue;
    const Departure& d = it->second;
    if (sequence > 0 && sequence > d.sequence) {
      return Str(DescribeRank(r), " ", d.reason, " after operation #", d.sequence,
                 ", so it takes no part in this one (#", sequence, ")");
    }
    if (sequence == 0 && std::chrono::duration<double>(now - d.seen).count() >= kUnnumberedGraceSeconds)
      return Str(DescribeRank(r), " ", d.reason, " and no longer answers");
  }
  return {};
}

}  // namespace starling::runtime
