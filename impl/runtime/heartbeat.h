// Failure detection of Starling's own, for deaths MPI learns of late or never (a death
// on another host that the launcher reports slowly, a hung or stopped process): a wait
// that lasts pings the ranks it waits for, and a rank that answers nothing for
// STARLING_HEARTBEAT_SECONDS is declared failed (impl/runtime/wait_monitor.cc).
// Only under ULFM, where the survivors can go on. Answers come from whichever thread
// polls: the context's progress thread (every period / 2, also while the application
// computes outside Starling) and every wait loop, so a rank that is merely busy or
// slow answers; nothing travels unless some rank waits longer than one period.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "impl/transport/transport.h"

namespace starling::runtime {

class Heartbeat {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Heartbeat(double timeout_seconds) : timeout_(timeout_seconds) {}
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Silence after which a rank is failed; pings go every period() = timeout / 5.
  double timeout() const { return timeout_; }
  double period() const { return timeout_ / 5; }

  // Starts serving `transport` (posts the receive); Detach stops (the context's
  // transport is replaced by a repair or grow, or destroyed). Any thread.
  void Attach(transport::Transport* transport, int size);
  void Detach();

  // Answers pings, records answers, completes sends. Any thread; a call while another
  // runs returns at once. Never throws (after a transport error it stops serving:
  // the context has failed anyway).
  void Poll();
  // Pings `rank` unless it was pinged within period(). Never throws.
  void Ping(int rank);
  // When `rank` was last heard from (a ping or an answer); the epoch if never, or
  // Clock::time_point::max() when that cannot be told now (another thread polls).
  Clock::time_point LastHeard(int rank);
  // A verdict: tells every other rank (but `gone`) that `gone` failed, on a channel the
  // revocation that follows leaves alone. Never throws.
  void Announce(const std::vector<int>& gone);
  // The ranks other ranks announced as failed (ascending; polls first).
  std::vector<int> Announced();

 private:
  struct Beat {
    uint32_t magic = 0;  // kPing, kPong or kGone
    int32_t gone = -1;   // kGone: the failed rank
  };
  static constexpr uint32_t kPing = 0x53485049;  // "SHPI"
  static constexpr uint32_t kPong = 0x53485041;  // "SHPA"
  static constexpr uint32_t kGone = 0x53484744;  // "SHGD"
  struct Send {
    std::unique_ptr<Beat> beat;
    transport::Ticket ticket;
  };
  // mutex_ held.
  void PostReceive();
  void SendLocked(int rank, uint32_t magic, int gone = -1);
  void PollLocked();
  void CompleteSends();

  const double timeout_;
  std::mutex mutex_;
  transport::Transport* transport_ = nullptr;  // guarded by mutex_
  bool failed_ = false;                        // a transport error: serving stopped
  int rank_ = 0;
  std::unique_ptr<Beat> in_;
  transport::Ticket in_ticket_;
  std::vector<Send> sends_;
  std::vector<Clock::time_point> heard_;   // by rank
  std::vector<Clock::time_point> pinged_;  // by rank
  std::vector<int> announced_;             // ascending
};

}  // namespace starling::runtime
