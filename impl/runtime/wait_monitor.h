// The slow path shared by every loop that waits for peers (message exchanges, window
// mutexes): stall warnings, STARLING_TIMEOUT_SECONDS, peer failure detection
// (STARLING_PEER_CHECK_SECONDS) and starling_context_abort. Cheap enough to call every
// few dozen idle polls: it reads the clock and does real work only when a deadline
// passed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "impl/common/error.h"
#include "impl/runtime/op.h"

namespace starling::runtime {

class Context;

// What a wait is waiting for: the ranks, and a description for messages
// ("rank(s) 1 (not heard from)").
struct Awaited {
  std::set<int> ranks;
  std::string text;
};

class WaitMonitor {
 public:
  // `what` (the operation, for warnings) must outlive the monitor: it is not copied, so
  // that the hot path of a wait allocates nothing.
  // `sequence`: the operation's number when it is a numbered collective (peers that
  // left after it still complete it), else 0.
  WaitMonitor(Context& context, const LazyText& what, uint64_t sequence = 0);

  // Throws Error(kAborted) once the context was aborted, Error(kPeerFailed) once another
  // wait found a peer gone. Two atomic loads: call it on every iteration.
  void CheckAborted() const;
  // The deadlines: logs a stall warning naming the awaited ranks (and whether their
  // processes are stopped or running); throws Error(kPeerFailed) naming a rank of this
  // host that is gone, Error(kTimeout) after STARLING_TIMEOUT_SECONDS, Error(kAborted).
  // `awaited` is evaluated only when a deadline passed.
  void Check(const std::function<Awaited()>& awaited);
  // After MPI reported a failure: a peer failure naming the gone rank if one of this
  // host is gone, else nothing (the caller rethrows the original error).
  void ExplainTransportFailure(const Error& error, const std::function<Awaited()>& awaited);

 private:
  // Seconds this wait has been able to wait: a gap between two checks longer than
  // kMaxCountedGapSeconds means this process was not running (see the .cc), and only
  // that much of it counts. Call once per Check.
  double Advance();
  // The heartbeat (runtime/heartbeat.h): pings the awaited ranks and throws
  // Error(kPeerFailed) naming those silent for its timeout.
  void CheckHeartbeat(const std::function<Awaited()>& awaited, double waited);
  // Marks the context failed (later calls fail fast with `reason`) and throws.
  [[noreturn]] void PeerFailed(const std::string& reason);
  // A numbered operation: ends the wait on a disagreement this rank finds in the
  // announcements of stalled peers, or that another rank reported, and announces this
  // wait to the awaited ranks once it lasts (runtime/disagreement.cc).
  void CheckDisagreement(const std::function<Awaited()>& awaited, double waited);
  // "allreduce #12 'grad' (sum, float32[10])": this operation, for announcements.
  std::string DescribeMine() const;

  Context& context_;
  const LazyText& what_;
  uint64_t sequence_;
  Numbered op_;  // the operation's numbers and kind when it is numbered (kind 0: none known)
  const char* kind_name_ = "";
  double next_announce_ = 0;  // when to tell the awaited ranks (again); 0: never
  std::chrono::steady_clock::time_point last_check_;
  double waited_ = 0;
  double next_warning_;
  double next_probe_;
  double next_failure_poll_ = 0;  // ULFM: when to ask MPI for failed ranks again
  double next_heartbeat_ = -1;    // when to ping and check again (< 0: not yet known)
  std::chrono::steady_clock::time_point heartbeat_start_{};  // the first ping of this wait
};

}  // namespace starling::runtime
