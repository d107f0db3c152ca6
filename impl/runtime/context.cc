#include "impl/runtime/context.h"

#include "impl/common/exit_mark.h"
#include "impl/common/logging.h"
#include "impl/common/quarantine.h"
#include "impl/transport/shm/summaries.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

namespace starling::runtime {

std::shared_ptr<Context> Context::Create(const ContextOptions& options) {
  ArmExitMark();  // only when starlingrun --fault-tolerant asks (STARLING_EXIT_MARKS)
  std::shared_ptr<Context> context(new Context());
  context->config_ = GlobalConfig();
  STARLING_CHECK_ARG(options.nodes_per_machine >= 0, "nodes_per_machine must be >= 0, got ",
                     options.nodes_per_machine);
  const bool split = options.split_comm != MPI_COMM_NULL;
  transport::MpiLifetime::Acquire(!options.use_host_comm && !split);
  context->holds_mpi_ = true;
  context->split_ = split;
  try {
    MPI_Comm base = split ? options.split_comm : MPI_COMM_WORLD;
    if (options.use_host_comm) {
      STARLING_CHECK_ARG(options.host_comm >= INT32_MIN && options.host_comm <= INT32_MAX,
                         "host_comm ", options.host_comm, " is not a Fortran communicator handle");
      base = MPI_Comm_f2c(static_cast<MPI_Fint>(options.host_comm));
      // Open MPI answers an unknown handle with a null pointer rather than MPI_COMM_NULL.
      STARLING_CHECK_ARG(base != MPI_COMM_NULL && base != MPI_Comm{}, "host_comm ", options.host_comm,
                         " does not name a communicator (pass MPI_Comm_c2f(comm) or mpi4py's comm.py2f())");
    }
    // A process started by starling_context_grow enters the running job's context.
    std::shared_ptr<TopologyState> grown;
    MPI_Comm joined = options.use_host_comm || split ? MPI_COMM_NULL : JoinGrow(&grown);
    if (joined != MPI_COMM_NULL) {
      context->grown_ = true;
      try {
        context->transport_ = std::make_unique<transport::MpiTransport>(joined);
      } catch (...) {
        MPI_Comm_free(&joined);
        throw;
      }
      MPI_Comm_free(&joined);
      context->joined_ = true;
    } else {
      context->transport_ = std::make_unique<transport::MpiTransport>(base);
    }
    context->rank_ = context->transport_->rank();
    context->size_ = context->transport_->size();
    const int nodes = options.nodes_per_machine > 0 ? options.nodes_per_machine : context->config_.nodes_per_machine;
    context->nodes_per_machine_ = nodes;
    context->layout_ = context->transport_->ComputeLayout(nodes);
    if (context->joined_) {
      bool failed = false;  // the grow's last step: every member got here
      const int agreed = context->transport_->Agree(1, &failed);
      STARLING_CHECK(!failed && agreed == 1, Code::kPeerFailed, "a process failed during starling_context_grow");
    }
    context->WireTransport();
    SetLogRank(context->rank_);
    // A newcomer of a grow probes with the members (Grow: right after their Agree too).
    if (context->joined_) context->ReprobeSharedMemory("starling_context_grow");
    else context->ProbeSharedMemory();
    // BlueFog's default: the unweighted exponential-2 graph (a newcomer: the grown one).
    auto initial = std::make_shared<TopologyState>();
    initial->graph = std::make_shared<const topology::Graph>(topology::Exponential(context->size_, 2));
    context->topology_ = grown ? std::move(grown) : std::move(initial);
    if (!context->config_.timeline_prefix.empty())
      context->timeline_ = std::make_unique<Timeline>(context->config_.timeline_prefix, context->rank_);
    if (context->fault_tolerant() && context->config_.heartbeat_seconds > 0)
      context->heartbeat_ = std::make_shared<Heartbeat>(context->config_.heartbeat_seconds);
    context->PostNoticeReceive();
    context->engine_ = std::make_unique<Engine>(*context);
    if (std::shared_ptr<Heartbeat> heartbeat = context->heartbeat_)
      context->engine_->SetTick([heartbeat] { heartbeat->Poll(); }, heartbeat->period() / 2);
    context->engine_->Start();
  } catch (...) {
    context->timeline_.reset();
    {
      std::lock_guard<std::mutex> lock(context->notice_mutex_);
      context->WithdrawNoticeReceive();
    }
    context->transport_.reset();
    if (context->shm_summary_ != 0) transport::shm::DropSummary(context->shm_summary_);
    context->shm_summary_ = 0;
    context->holds_mpi_ = false;
    transport::MpiLifetime::Release();
    // Nothing is left for Destroy: without a transport it would wait for departure
    // notices that never come (a peer that died during creation hung rank 0 here while
    // the others, whose creation had succeeded, waited for it in their repair).
    context->destroyed_ = true;
    throw;
  }
  WatchExit(context);
  STARLING_LOG_DEBUG("context created: rank ", context->rank_, " of ", context->size_, ", machine ",
                     context->layout_.machine_rank, " of ", context->layout_.machine_size, ", local rank ",
                     context->layout_.local_rank, " of ", context->layout_.local_size, "; ",
                     context->layout_.host_ranks, " rank(s) share this machine's ", context->layout_.host_cpus,
                     " CPU(s): waits ",
                     context->layout_.host_oversubscribed ? "yield" : "spin (on the progress thread: yield)");
  return context;
}

Context::~Context() {
  try {
    Destroy();
  } catch (...) {
    // Destructors never throw; Destroy reports its errors when called explicitly.
  }
}

void Context::Destroy() {
  std::lock_guard<std::mutex> lock(destroy_mutex_);
  if (destroyed_) return;
  destroyed_ = true;
  if (shm_summary_ != 0) transport::shm::DropSummary(shm_summary_);
  shm_summary_ = 0;
  if (!local_teardown() && config_.peer_check_seconds > 0) {
    // A rank that is gone by now has failed (a rank that finished normally waits in
    // MPI_Finalize for the others): tear down locally, and fail queued work at once.
    std::set<int> everyone;
    for (int r = 0; r < size_; ++r) everyone.insert(r);
    const std::string gone = ProbePeers(everyone);
    if (!gone.empty()) MarkBroken(gone, Code::kPeerFailed);
  }
  if (engine_) engine_->Stop();
  // Peers still computing learn that this rank takes no part in their later operations
  // (theirs fail naming it instead of waiting forever). After a failure they know already.
  if (!local_teardown()) {
    Depart("destroyed its context (shutdown, close, or the cleanup at exit)", /*normal=*/true);
  } else if (aborted()) {
    // The abort was local; leaving is not: peers must not wait for this rank's notice.
    Depart("aborted its context (starling_context_abort)", /*normal=*/false);
  }
  if ((grown_ || repaired_ || shrunk_) && !local_teardown() && transport_ && transport_->fault_tolerant()) {
    // Every member leaves together. A grown job: processes of two launches; Open MPI 5's
    // launcher hangs or cuts the output of a spawned process that outlives the first
    // job's processes. A repaired (or shrunk) one: MPI is not finalized after a failure
    // (that would wait for the dead, or for the ranks that left), so without this a
    // survivor that finished the last operation exited while others were still inside
    // it, and ULFM reported its exit to them as a new failure. An agreement is
    // failure-tolerant (a member dying during it ends it everywhere); its outcome is
    // nobody's concern: each then leaves on its own.
    try {
      bool failed = false;
      transport_->Agree(1, &failed);
    } catch (const Error&) {
    }
  }
  if (!local_teardown()) {
    // Every other rank's departure notice, before the communicators go: a notice left
    // unreceived would be matched by a later communicator that reuses the context id.
    // Windows are served meanwhile (peers' last requests). Ends early when a rank fails
    // or leaves abnormally; its errors are nobody's concern here.
    try {
      AwaitDepartures();
    } catch (const Error& e) {
      STARLING_LOG_DEBUG("destroy: not every rank left normally: ", e.what());
    }
  }
  timeline_.reset();  // completes the JSON file
  // Windows may still exist: withdraw their posted receives while MPI is alive.
  // A copy: the stop function may clear the member while it runs. Another thread still
  // inside an operation (after an abort) may be serving: the stop function waits for it.
  const std::function<void()> stop = background_stop_;
  if (stop) stop();
  SetBackgroundService(nullptr, nullptr);
  {
    std::lock_guard<std::mutex> lock(extensions_mutex_);
    if (transport_ && transport_->abandoned_receives() > 0) {
      // After a failure, a receive from a dead rank could not be withdrawn: MPI may
      // still write into the buffers of those modules (windows), so they are quarantined.
      Quarantine(std::make_shared<std::unordered_map<std::type_index, std::shared_ptr<void>>>(std::move(extensions_)));
    }
    extensions_.clear();
  }
  {
    // Under the notice lock: a thread polling for notices must not see a dead transport.
    std::lock_guard<std::mutex> lock(notice_mutex_);
    WithdrawNoticeReceive();
    if (local_teardown() && transport_) {
      // Torn down locally (aborted or failed): peers' departure notices may still be on
      // their way and are not awaited. Freed communicators' context ids are reused, and a
      // later communicator would match those notices (Open MPI 4.1 then hung a new
      // context's MPI_Comm_split_type, 4 ranks each aborting a context). Keep them.
      Quarantine(std::shared_ptr<transport::MpiTransport>(transport_.release()));
    }
    transport_.reset();
  }
  if (holds_mpi_) {
    holds_mpi_ = false;
    // After an abort or a peer failure, never finalize: MPI_Finalize waits for every rank.
    // Nor after leaving in a shrink, except in a process a grow started: its job is
    // itself (and the processes started with it), and its launcher takes an exit without
    // MPI_Finalize for a crash.
    transport::MpiLifetime::Release(/*may_finalize=*/!local_teardown() || (left() && joined_));
  }
}

std::shared_ptr<const TopologyState> Context::topology() const {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  return topology_;
}

std::shared_ptr<const TopologyState> Context::machine_topology() const {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  return machine_topology_;
}

void Context::set_topology(std::shared_ptr<const TopologyState> state) {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  topology_ = std::move(state);
}

void Context::set_machine_topology(std::shared_ptr<const TopologyState> state) {
  std::lock_guard<std::mutex> lock(topology_mutex_);
  machine_topology_ = std::move(state);
}

void Context::SetBackgroundService(std::function<bool()> service, std::function<void()> stop) {
  const bool on = static_cast<bool>(service);
  bool expected = false;
  while (!background_busy_.compare_exchange_weak(expected, true, std::memory_order_acquire)) {
    expected = false;
    std::this_thread::yield();
  }
  background_ = std::move(service);
  background_stop_ = std::move(stop);
  background_busy_.store(false, std::memory_order_release);
  if (!engine_) return;  // a creation that failed before the engine existed
  engine_->SetBackgroundPoll(on ? std::function<bool()>([this] { return ServiceBackground(); }) : nullptr,
                             config_.window_poll_microseconds * 1e-6);
}

bool Context::ServiceBackground() {
  if (local_teardown()) return false;  // aborted or failed: no longer answers its peers
  bool expected = false;
  if (!background_busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
  struct Release {
    std::atomic<bool>& busy;
    ~Release() { busy.store(false, std::memory_order_release); }
  } release{background_busy_};
  try {
    return background_ ? background_() : false;
  } catch (const Error& e) {
    // The window service met a failure (the progress thread only logs it): fail the context.
    if (e.code() == Code::kPeerFailed) MarkBroken(e.what(), Code::kPeerFailed);
    throw;
  }
}

void Context::MarkBroken(const std::string& reason, Code code, bool revoke) {
  if (code == Code::kPeerFailed) {
    SetTransportFailed();
    // ULFM: every survivor leaves its waits now, also waits for ranks that stopped here.
    std::lock_guard<std::mutex> lock(notice_mutex_);
    if (transport_ && revoke) transport_->Revoke();
  }
  std::lock_guard<std::mutex> lock(broken_mutex_);
  if (!broken_.load()) {
    broken_reason_ = reason;
    broken_code_ = code;
    broken_.store(true, std::memory_order_release);
  }
  if (code == Code::kPeerFailed) peer_failed_.store(true, std::memory_order_release);
}

void Context::SetTransportFailed() {
  std::lock_guard<std::mutex> lock(notice_mutex_);  // transport_ is reset under it
  if (transport_) transport_->SetFailed();
}

void Context::CheckUsable() const {
  if (left()) {
    Fail(Code::kInvalidUsage, "this rank left the context (starling_context_shrink) and takes part in no more of "
         "its operations; destroy it");
  }
  if (aborted()) {
    Fail(Code::kAborted, "the context was aborted (starling_context_abort); destroy it");
  }
  if (!broken_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(broken_mutex_);
  const bool repairable = broken_code_ == Code::kPeerFailed && fault_tolerant();
  Fail(broken_code_, "the context is unusable after an earlier failure (", broken_reason_, "); ",
       repairable ? "repair it (starling_context_repair) or destroy it" : "destroy it");
}

void Context::Abort() {
  SetTransportFailed();  // first: a destroy may proceed as soon as aborted() is seen
  if (aborted_.exchange(true)) return;
  STARLING_LOG_INFO("context aborted (starling_context_abort)");
  if (engine_) engine_->Abort();
}

std::shared_ptr<const transport::Traffic> Context::traffic() const {
  std::lock_guard<std::mutex> lock(traffic_mutex_);
  return traffic_;
}

transport::PeerTraffic Context::TrafficSums() const {
  std::lock_guard<std::mutex> lock(traffic_mutex_);
  transport::PeerTraffic sums = retired_traffic_;
  if (traffic_) sums.AddTraffic(traffic_->Sums());
  return sums;
}

void Context::WireTransport() {
  {
    std::lock_guard<std::mutex> lock(traffic_mutex_);
    if (traffic_) retired_traffic_.AddTraffic(traffic_->Sums());  // the old transport moves nothing more
    traffic_ = std::make_shared<transport::Traffic>(size_);
    transport_->SetTraffic(traffic_);
  }
  Context* self = this;  // the transport is owned by the context
  transport_->SetRankDescriber([self](int r) { return self->DescribeRank(r); });
  transport_->SetFailureProbe([self]() -> std::string {
    std::set<int> everyone;
    for (int r = 0; r < self->size_; ++r) everyone.insert(r);
    std::string found = self->ProbePeers(everyone, nullptr);
    if (!found.empty()) return found;
    // A rank stopped (or a host hung): no process is gone, another rank's heartbeat
    // found it silent, and its revocation may arrive before its notice.
    if (self->heartbeat_) {
      const std::vector<int> announced = self->heartbeat_->Announced();
      if (!announced.empty())
        return Str(self->DescribeGone(announced), " gone (another rank's heartbeat found no answer for "
                   "STARLING_HEARTBEAT_SECONDS=", self->heartbeat_->timeout(), " s: killed, crashed, hung or stopped)");
    }
    std::lock_guard<std::mutex> lock(self->gone_mutex_);
    if (self->gone_.empty()) return {};
    return Str(self->DescribeGone(std::vector<int>(self->gone_.begin(), self->gone_.end())),
               " gone (another rank reported it)");
  });
  std::lock_guard<std::mutex> lock(gone_mutex_);
  gone_.clear();  // old ranks' numbers
}

std::string Context::KnownFailures() const {
  if (!fault_tolerant()) return {};
  const std::vector<int> failed = transport_->FailedRanks();
  if (failed.empty()) return {};
  return Str(DescribeGone(failed),
             " gone (killed, crashed or exited; reported by ULFM); repair the context (starling_context_repair) "
             "or destroy it");
}

void Context::ClearExtensionsExcept(std::type_index keep) {
  std::lock_guard<std::mutex> lock(extensions_mutex_);
  for (auto it = extensions_.begin(); it != extensions_.end();) it = it->first == keep ? std::next(it) : extensions_.erase(it);
}

std::string Context::DescribeRank(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= layout_.processes.size()) return Str("rank ", rank);
  return Str("rank ", rank, " (", DescribeProcess(layout_.processes[static_cast<size_t>(rank)]), ")");
}

std::string Context::DescribeGone(const std::vector<int>& ranks) const {
  std::string names;
  for (size_t i = 0; i < ranks.size(); ++i)
    names += Str(i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ", DescribeRank(ranks[i]));
  return Str(names, ranks.size() == 1 ? " is" : " are");
}

std::vector<std::pair<int, ProcessState>> Context::ProbeStates(const std::set<int>& ranks) const {
  std::vector<std::pair<int, ProcessState>> states;
  const auto& processes = layout_.processes;
  if (processes.size() != static_cast<size_t>(size_)) return states;
  const ProcessIdentity& self = processes[static_cast<size_t>(rank_)];
  for (int r : ranks) {
    if (r == rank_ || r < 0 || r >= size_) continue;
    const ProcessIdentity& peer = processes[static_cast<size_t>(r)];
    if (ProbeableFrom(self, peer)) states.emplace_back(r, Probe(peer));
  }
  return states;
}

std::string Context::ProbePeers(const std::set<int>& ranks, std::vector<int>* gone_out) const {
  std::vector<int> gone;
  for (const auto& [r, state] : ProbeStates(ranks))
    if (state == ProcessState::kGone) gone.push_back(r);
  if (gone_out) *gone_out = gone;
  if (gone.empty()) return {};
  return Str(DescribeGone(gone), " gone (killed, crashed or exited without destroying its context)");
}

void Context::PostNoticeReceive() {
  std::lock_guard<std::mutex> lock(notice_mutex_);
  PostNoticeReceiveLocked();
  if (heartbeat_) heartbeat_->Attach(transport_.get(), size_);
}

void Context::PostNoticeReceiveLocked() {
  notice_in_ = std::make_unique<Notice>();
  notice_ticket_ = transport_->Irecv(transport::Channel::kControl, transport::kAnySource, notice_in_.get(),
                                     sizeof(Notice));
}

void Context::WithdrawNoticeReceive() {  // notice_mutex_ held
  if (heartbeat_) heartbeat_->Detach();
  AbandonStallSends();
  if (!transport_ || !notice_ticket_.active) return;
  if (transport_->CancelRecvWithin(notice_ticket_, 0.1) == transport::Transport::CancelOutcome::kPending) {
    Quarantine(std::shared_ptr<Notice>(std::move(notice_in_)));  // MPI may still write it
    notice_ticket_.active = false;
  }
}

void Context::NotifyPeerFailure(const std::string& message, const std::vector<int>& gone) {
  std::lock_guard<std::mutex> lock(notice_mutex_);
  if (notified_.exchange(true) || !transport_) return;
  // Leaked on purpose: sends to dead or stuck ranks may never complete, so MPI may
  // read the buffer at any later time. At most one small notice per context.
  auto* notice = new Notice();
  notice->magic = kFailureMagic;
  notice->reporter = rank_;
  if (gone.size() == 1) notice->gone = gone[0];
  std::snprintf(notice->text, sizeof notice->text, "%s", message.c_str());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || std::find(gone.begin(), gone.end(), r) != gone.end()) continue;
    try {
      transport_->Isend(transport::Channel::kControl, r, notice, sizeof(Notice));  // never waited for
    } catch (const Error&) {
      // Best effort: the others still have their own probes and timeouts.
    }
  }
}

std::string Context::PollFailureNotice() {
  std::unique_lock<std::mutex> lock(notice_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return {};
  // Departures arrive one per leaving rank: take each and post the receive again.
  while (transport_ && notice_ticket_.active) {
    transport::Completion completion;
    try {
      if (!transport_->Test(notice_ticket_, &completion)) return {};
    } catch (const Error&) {
      return {};
    }
    const Notice& n = *notice_in_;
    if (completion.bytes != sizeof(Notice)) return {};
    const std::string text(n.text, strnlen(n.text, sizeof n.text));
    if (n.magic == kDepartureMagic && n.reporter >= 0 && n.reporter < size_) {
      {
        std::lock_guard<std::mutex> record(departures_mutex_);
        Departure& d = departures_[n.reporter];
        d.sequence = n.sequence;
        d.normal = n.normal != 0;
        d.reason = text;
        d.seen = std::chrono::steady_clock::now();
      }
      any_departure_.store(true, std::memory_order_release);
      PostNoticeReceiveLocked();
      continue;
    }
    if ((n.magic == kStallMagic || n.magic == kMismatchMagic) && n.reporter >= 0 && n.reporter < size_) {
      RecordStallNews(n, text);
      PostNoticeReceiveLocked();
      continue;
    }
    if (n.magic != kFailureMagic) return {};
    notified_.store(true);  // the reporter told everyone already
    if (n.gone >= 0 && n.gone < size_) NoteGone({n.gone});
    return Str(text, " (reported by ", DescribeRank(n.reporter), ")");
  }
  return {};
}

bool Context::departed(int rank) const {
  std::lock_guard<std::mutex> lock(departures_mutex_);
  return departures_.count(rank) > 0;
}

void Context::NoteGone(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(gone_mutex_);
  gone_.insert(ranks.begin(), ranks.end());
}

std::string Context::PeerNotes(const std::set<int>& awaited) const {
  std::string notes;
  for (const auto& [r, state] : ProbeStates(awaited)) {
    switch (state) {
      case ProcessState::kStopped:
        notes += Str("; ", DescribeRank(r), " is stopped (SIGSTOP or a debugger; SIGCONT resumes it)");
        break;
      case ProcessState::kRunning:
        notes += Str("; ", DescribeRank(r), " is running (busy outside Starling, or blocked before this call)");
        break;
      case ProcessState::kGone:
        notes += Str("; ", DescribeRank(r), " is gone");
        break;
      case ProcessState::kUnknown:
        break;
    }
  }
  return notes;
}

}  // namespace starling::runtime
