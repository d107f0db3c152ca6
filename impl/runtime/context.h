// A context: a group of ranks (an MPI communicator), its machine layout, its
// configuration and its progress engine. Everything an executing operation needs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "impl/common/config.h"
#include "impl/common/process.h"
#include "impl/topology/graph.h"
#include "impl/runtime/engine.h"
#include "impl/runtime/heartbeat.h"
#include "impl/runtime/scratch.h"
#include "impl/runtime/timeline.h"
#include "impl/transport/mpi/mpi_transport.h"
#include "impl/transport/shm/links.h"
#include "impl/transport/shm/probe.h"

namespace starling::runtime {

// Counters behind starling_get_stats (written by the executor, read by anyone).
struct Stats {
  std::atomic<uint64_t> operations{0};
  std::atomic<uint64_t> fused_operations{0};
  std::atomic<uint64_t> fusion_groups{0};
  std::atomic<uint64_t> scratch_bytes{0};
  // Compressed operations' payloads as sent, and as they would have been uncompressed.
  std::atomic<uint64_t> bytes_before_compression{0};
  std::atomic<uint64_t> bytes_after_compression{0};
  // Time the application's threads spent in blocking calls and request waits.
  std::atomic<uint64_t> blocked_ns{0};
};

struct ContextOptions {
  bool use_host_comm = false;
  int64_t host_comm = 0;  // Fortran handle
  int nodes_per_machine = 0;
  // starling_context_split: the communicator of the new context (borrowed; the context
  // duplicates it). MPI is already initialized, and the context may not grow.
  MPI_Comm split_comm = MPI_COMM_NULL;
};

// A topology as operations see it: immutable, so an operation keeps the snapshot it
// was submitted with while set_topology installs a new one.
struct TopologyState {
  std::shared_ptr<const topology::Graph> graph;
  bool weighted = false;
  // Data derived from this snapshot by other modules, computed once (the default
  // neighbor plan): the snapshot is immutable, so the cache never goes stale.
  mutable std::mutex cache_mutex;
  mutable std::shared_ptr<const void> default_neighbor_plan;
};

// starling_context_repair.
struct RepairOptions {
  std::shared_ptr<const topology::Graph> graph;  // null: regenerate the current one
  bool weighted = false;
};
struct RepairResult {
  int old_rank = 0, old_size = 1, new_rank = 0, new_size = 1;
  std::vector<int> old_to_new;  // by old rank: the new rank, or -1 (failed)
  std::vector<int> failed;      // old ranks, ascending
  std::string topology;         // how the topology was rebuilt
};

// starling_context_grow.
struct GrowOptions {
  int count = 1;
  std::vector<int> ranks;  // the newcomers' ranks; empty: at the end
  std::string command;     // the newcomers' program (rank 0's is used)
  std::vector<std::string> argv;
  std::shared_ptr<const topology::Graph> graph;  // null: the current generator over the new size
  bool weighted = false;
};
struct GrowResult {
  int old_rank = 0, old_size = 1, new_rank = 0, new_size = 1;
  std::vector<int> old_to_new;  // by old rank
  std::vector<int> joined;      // the newcomers' ranks, in the order started
  std::string topology;         // how the topology was made
};

// starling_context_shrink.
struct ShrinkOptions {
  int count = 1;             // ranks that leave
  std::vector<int> ranks;    // those ranks; empty: the last count
  std::shared_ptr<const topology::Graph> graph;  // null: the current generator over the new size
  bool weighted = false;
};
struct ShrinkResult {
  int old_rank = 0, old_size = 1, new_rank = 0, new_size = 1;  // new_rank -1: this rank left
  std::vector<int> old_to_new;  // by old rank: the new rank, or -1 (left)
  std::vector<int> left;        // old ranks, ascending
  std::string topology;         // how the topology was made
};

class Context {
 public:
  // Collective over the communicator. Throws Error.
  static std::shared_ptr<Context> Create(const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Collective: runs every submitted operation, stops the engine, tells the other
  // ranks (Depart) and waits until each has left too, releases MPI. Idempotent.
  void Destroy();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const transport::Layout& layout() const { return layout_; }
  const Config& config() const { return config_; }
  // Which same-host peers can share memory, and why not (probed once at creation;
  // unknown after a repair or grow).
  const transport::shm::ProbeResult& shm() const { return shm_; }
  // The outboxes through which neighbor exchanges move data between same-host peers
  // (ops/neighbor_exchange.cc), or null: no linked peer (or forgotten after a repair).
  const std::shared_ptr<transport::shm::NeighborLinks>& shm_links() const { return shm_links_; }
  transport::Transport& transport() { return *transport_; }
  Engine& engine() { return *engine_; }

  Stats& stats() { return stats_; }
  // Per-peer traffic for the current numbering of the ranks (a new one after a repair
  // or grow). Any thread.
  std::shared_ptr<const transport::Traffic> traffic() const;
  // Messages and bytes since creation, summed over peers (surviving repair and grow).
  transport::PeerTraffic TrafficSums() const;
  // The timeline, or nullptr when STARLING_TIMELINE is not set.
  Timeline* timeline() { return timeline_.get(); }

  // --- for the executing operation (execution lock held) ---
  ScratchPool& scratch() { return scratch_; }
  // Sequence number of the next collective operation: equal on every rank for the
  // same operation, so messages from a rank that skipped or added one are caught.
  // `kind` (an ops::OpKind) and its static name: what a wait in this operation tells
  // the ranks it waits for when it stalls (disagreement.cc).
  uint64_t NextSequence(uint8_t kind, const char* kind_name) {
    if (running_first_ == 0) running_first_ = sequence_ + 1;
    running_kind_ = kind;
    running_kind_name_ = kind_name;
    return ++sequence_;
  }
  // The running operation's sequence number (the last one handed out).
  uint64_t sequence() const { return sequence_; }
  // The engine, before each operation: one that takes no number announces nothing.
  void ClearRunningKind() {
    if (running_kind_ != 0) {
      previous_ = Numbered{running_first_, sequence_, running_kind_};
      previous_name_ = running_kind_name_;
    }
    running_first_ = 0;
    running_kind_ = 0;
    running_kind_name_ = "";
  }
  // The running operation's first number (a fused group takes several; 0: none).
  uint64_t running_first() const { return running_first_; }
  uint8_t running_kind() const { return running_kind_; }
  const char* running_kind_name() const { return running_kind_name_; }

  // The current (machine) topology; machine_topology() is null until one is set.
  std::shared_ptr<const TopologyState> topology() const;
  std::shared_ptr<const TopologyState> machine_topology() const;
  void set_topology(std::shared_ptr<const TopologyState> state);
  void set_machine_topology(std::shared_ptr<const TopologyState> state);

  // Windows currently alive (set_topology refuses to run while any exist).
  std::atomic<int>& live_windows() const { return live_windows_; }

  // Background service (windows): work that must progress while this rank's own
  // thread is busy. Called by every wait loop and by the progress thread, from any
  // thread and without the execution lock, so it never holds up the application's
  // operations; one caller at a time (others return false at once), never re-entered.
  // Returns true if it did work. `stop` runs when the context is destroyed.
  // Setting waits for a running service call to finish.
  void SetBackgroundService(std::function<bool()> service, std::function<void()> stop);
  bool ServiceBackground();

  // Per-context state owned by another module (created on first use). T must be
  // default-constructible and do its own locking if used outside the execution lock.
  template <typename T>
  T& Extension() {
    return *SharedExtension<T>();
  }
  // The same, shared: for objects that may outlive the context's other extensions
  // (their destruction order is unspecified).
  template <typename T>
  std::shared_ptr<T> SharedExtension() {
    std::lock_guard<std::mutex> lock(extensions_mutex_);
    std::shared_ptr<void>& slot = extensions_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return std::static_pointer_cast<T>(slot);
  }

  // After a timeout or transport failure (code kTransport) or a peer failure (code
  // kPeerFailed), every later operation fails fast with the original reason instead of
  // hanging. The first reason sticks.
  // kPeerFailed also revokes the communicators (ULFM), unless `revoke` is false.
  void MarkBroken(const std::string& reason, Code code = Code::kTransport, bool revoke = true);
  // Throws the context's error: kAborted after Abort(), else the broken reason.
  void CheckUsable() const;

  // starling_context_abort: any thread, any time. Queued operations complete with
  // kAborted at once, the running one within milliseconds (every wait loop checks
  // aborted()), later ones fail; the window service stops answering.
  void Abort();
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }
  // True once destroy must stay local: aborted, or a peer is known to be gone.
  bool local_teardown() const {
    return aborted() || left() || peer_failed_.load(std::memory_order_acquire);
  }

  // --- fault tolerance (ULFM; see transport/mpi/ulfm.h and impl/runtime/repair.cc) ---
  // True when MPI reports failures itself and the context can be repaired.
  bool fault_tolerant() const { return transport_ && transport_->fault_tolerant(); }
  // Collective over the survivors: revokes, stops this rank's operations (queued ones
  // fail with the context's error), shrinks the communicator, renumbers the ranks,
  // installs options.graph or the regenerated topology and clears the other modules'
  // state. `detach` runs once nothing executes (before the old communicators go),
  // `attach` once the new ones are in place (both on the calling thread). On error
  // (a rank failed meanwhile: kPeerFailed) the context stays failed and repair may be
  // called again. Throws Error(kUnsupported) without ULFM.
  RepairResult Repair(const RepairOptions& options, const std::function<void()>& detach,
                      const std::function<void(const RepairResult&)>& attach);
  // Collective over the current ranks (see starling_context_grow): spawns the
  // newcomers, renumbers, installs the topology, clears the other modules' state
  // (`attach` runs once the new communicators are in place, on the calling thread).
  // Throws Error; on error the context is unchanged (kPeerFailed: failed).
  GrowResult Grow(const GrowOptions& options, const std::function<void(const GrowResult&)>& attach);
  // Collective over the current ranks (see starling_context_shrink): the leaving ranks
  // drop out of the communicator, the others are renumbered in their order and get the
  // topology; `attach` runs on those once the new communicators are in place. A leaving
  // rank's context is torn down locally at once (left() is then true and every later
  // call fails with kInvalidUsage). Throws Error; on error the context is unchanged.
  ShrinkResult Shrink(const ShrinkOptions& options, const std::function<void(const ShrinkResult&)>& attach);
  // This rank left the context in a shrink.
  bool left() const { return left_.load(std::memory_order_acquire); }
  // This process entered the context through a grow (it was spawned by one).
  bool joined() const { return joined_; }
  // starling_context_split's collective step (execution lock held, every rank in
  // order): the communicator of the ranks with this color, or MPI_COMM_NULL.
  MPI_Comm SplitCommunicator(int color, int key) { return transport_->Split(color, key); }
  // Made by starling_context_split.
  bool split() const { return split_; }
  // With ULFM: "" while MPI knows of no failed rank, else a message naming them.
  std::string KnownFailures() const;
  // Drops every module's per-context state except that of type `keep`.
  void ClearExtensionsExcept(std::type_index keep);

  // --- peer failure detection (wait loops; any thread) ---
  // Probes the processes of the given ranks that run on this host (see
  // common/process.h). Returns "" if all are alive, else a message naming the gone
  // ones ("rank 2 (pid 1234 on host vm) is gone (...)"); their ranks go to *gone.
  // Only awaited ranks are probed by waits: a rank that finished its part and exited
  // is not a failure for a wait that does not need it.
  std::string ProbePeers(const std::set<int>& ranks, std::vector<int>* gone = nullptr) const;
  // The transport's describer and failure probe (Create and Repair).
  void WireTransport();
  // Tells every other rank (except `gone`) that a peer is gone, so that ranks waiting
  // for a survivor that stopped at this failure fail too, naming the gone rank. Sent
  // once per context, on its own channel; nothing waits for delivery.
  void NotifyPeerFailure(const std::string& message, const std::vector<int>& gone);
  // Reads the notices other ranks sent (tests a posted receive; any thread): records
  // departures, and returns a failure notice's text, or "".
  std::string PollFailureNotice();

  // --- ranks in different operations, found while waiting (impl/runtime/disagreement.cc) ---
  // Tells each of `ranks` not told yet in this operation that this rank has waited in
  // operation `op`, described by `text`. Never throws.
  void AnnounceStall(const std::set<int>& ranks, const Numbered& op, const std::string& text);
  // True once a stall announcement or a reported disagreement arrived.
  bool any_stall_news() const { return any_stall_news_.load(std::memory_order_acquire); }
  // For a wait in operation `op` (described by `mine`, evaluated only for the message)
  // for `awaited`, from what PollFailureNotice recorded: "" unless a rank announced a
  // stall in another kind of operation with one of these numbers ("ranks disagree:
  // rank 3 (...) called neighbor_allreduce #4 (...) while rank 0 called allreduce #4
  // (...)"), or an awaited rank announced one in a later operation (it ended this one
  // without sending what this rank waits for).
  std::string StallDisagreement(const Numbered& op, const std::set<int>& awaited, const LazyText& mine);
  // Tells every other rank that this context failed on `reason` (a disagreement), so
  // that their waits end too. Once per context; nothing waits for delivery.
  void NotifyMismatch(const std::string& reason);
  // The disagreement another rank reported (with "(reported by ...)"), or "".
  std::string MismatchNotice();

  // --- departures (see impl/runtime/departure.cc) ---
  // Tells every other rank that this one leaves the context now, after operation
  // #sequence(), and why ("called shutdown ..."). `normal`: it took part in every
  // operation up to then, so peers still inside one of them finish it; otherwise
  // (an exception, an exit without destroy) every peer's wait ends. Once per context;
  // returns when the notices have left (at most about 1 s), with how many ranks were
  // told (0: alone, every other rank gone, or told already).
  size_t Depart(const std::string& reason, bool normal);
  // Destroy, after Depart: waits until every other rank has departed (serving peers'
  // window requests meanwhile). Throws Error when one failed or left abnormally, on
  // STARLING_TIMEOUT_SECONDS, or after an abort (the wait ends either way).
  void AwaitDepartures();
  // starling_context_abandon: Depart(reason, not normal), abort, tear down locally.
  void Abandon(const std::string& reason);
  // Registers `context` for the process's exit handler (an exit while it is alive
  // abandons it: "exited (status N) without destroying its context").
  static void WatchExit(const std::shared_ptr<Context>& context);
  bool any_departure() const { return any_departure_.load(std::memory_order_acquire); }
  // For a wait in operation #sequence (0: not a numbered collective, e.g. a window
  // request) on `awaited`: "" while it can still complete, else why not ("rank 0 (pid
  // ...) is exiting: uncaught RuntimeError: ..."). Any abnormal departure ends every
  // wait; a normal one ends waits for that rank in a later operation, and unnumbered
  // waits for it after a grace second.
  std::string DepartureFailure(const std::set<int>& awaited, uint64_t sequence) const;
  // For stall warnings and timeouts: the state of each awaited rank on this host
  // ("; rank 1 (pid 42 on host vm) is stopped (...)"), or "".
  std::string PeerNotes(const std::set<int>& awaited) const;
  // "rank 3 (pid 42 on host vm)", or "rank 3" when its identity is unknown.
  std::string DescribeRank(int rank) const;
  // "rank 1 (...) is" / "rank 1 (...), rank 2 (...) and rank 3 (...) are": the subject
  // of every "... gone (why)" message.
  std::string DescribeGone(const std::vector<int>& ranks) const;
  // The failure detector (STARLING_HEARTBEAT_SECONDS under ULFM), or null.
  Heartbeat* heartbeat() { return heartbeat_.get(); }
  // True once `rank` announced its departure (a silent rank that left is not failed).
  bool departed(int rank) const;
  // Ranks declared failed by this rank's heartbeat or named by a peer's failure notice:
  // a revocation that MPI cannot explain yet (it knows of no failed rank) names them.
  void NoteGone(const std::vector<int>& ranks);

 private:
  Context() = default;
  // In a process spawned by a grow: takes part in its collective half and returns the
  // grown communicator (the caller frees it) and the topology; else MPI_COMM_NULL.
  static MPI_Comm JoinGrow(std::shared_ptr<TopologyState>* topology);
  // Repair, Grow and Shrink, once every member has its new communicators: installs them
  // with the new numbering, layout and topology (collective: probes shared memory
  // again, `why` names the call). Execution lock held.
  void Renumber(std::unique_ptr<transport::MpiTransport> fresh, transport::Layout layout,
                std::shared_ptr<TopologyState> topology, const std::string& why);
  // The topology after a repair or shrink: `given` (with `weighted`) if not null, else
  // the current one regenerated over the ranks that stay (`old_to_new`, new numbers or
  // -1); `name` says which ("given", or the generator's name).
  std::shared_ptr<TopologyState> TopologyAfter(const std::shared_ptr<const topology::Graph>& given, bool weighted,
                                               const std::vector<int>& old_to_new, int new_size,
                                               std::string* name) const;
  // Checks before a grow or shrink (`call` names it, `verb` says it): not destroyed nor
  // aborted, usable, not made by a split, ULFM, no windows. destroy_mutex_ held.
  void CheckResizable(const char* call, const char* verb) const;
  // Collective: every rank learns whether any rank's options were invalid (`problem`
  // not empty) or differ from its own (`agreed`: their encoding; `what` names them), and
  // then each throws kInvalidArgument, so that no rank goes on alone.
  void AgreeOnOptions(const char* call, const std::string& problem, const std::vector<char>& agreed,
                      const char* what);
  // Collective (creation, after the layout): probes the same-host pairs (shm_probe.cc).
  void ProbeSharedMemory();
  // Collective, after a repair or grow (`why`) renumbered the ranks: the old result no
  // longer holds; probes the new communicator. If that fails (a rank died meanwhile),
  // every pair uses MPI until the next repair.
  void ReprobeSharedMemory(const std::string& why);

  Config config_;
  transport::shm::ProbeResult shm_;
  std::shared_ptr<transport::shm::NeighborLinks> shm_links_;
  int shm_summary_ = 0;  // its line in starling_config_string (0: none)
  std::unique_ptr<transport::MpiTransport> transport_;
  std::unique_ptr<Engine> engine_;
  transport::Layout layout_;
  int rank_ = 0;
  int size_ = 1;
  int nodes_per_machine_ = 0;  // as created (repair recomputes the layout with it)
  bool holds_mpi_ = false;
  bool joined_ = false;
  bool split_ = false;
  bool grown_ = false;     // grown, or joined: destroy waits for every member
  bool repaired_ = false;  // repaired: destroy waits for every survivor
  bool shrunk_ = false;    // shrunk: destroy waits for every member that stayed
  std::atomic<bool> left_{false};
  bool destroyed_ = false;
  std::mutex destroy_mutex_;

  ScratchPool scratch_;
  Stats stats_;
  mutable std::mutex traffic_mutex_;
  std::shared_ptr<transport::Traffic> traffic_;  // guarded by traffic_mutex_
  transport::PeerTraffic retired_traffic_;       // earlier numberings' sums; likewise
  std::unique_ptr<Timeline> timeline_;
  uint64_t sequence_ = 0;
  // The running operation's numbers and kind, and the last numbered one before it
  // (execution lock; see NextSequence).
  uint64_t running_first_ = 0;
  uint8_t running_kind_ = 0;
  const char* running_kind_name_ = "";
  Numbered previous_;
  const char* previous_name_ = "";

  mutable std::mutex topology_mutex_;
  std::shared_ptr<const TopologyState> topology_;
  std::shared_ptr<const TopologyState> machine_topology_;
  mutable std::atomic<int> live_windows_{0};
  std::function<bool()> background_;  // guarded by background_busy_
  std::function<void()> background_stop_;
  std::atomic<bool> background_busy_{false};
  std::mutex extensions_mutex_;
  std::unordered_map<std::type_index, std::shared_ptr<void>> extensions_;

  // Failure notices (channel kControl): one receive from any rank stays posted.
  struct Notice {
    uint32_t magic = 0;  // kind: a failure notice, a departure, a stall or a mismatch
    int32_t reporter = -1;
    uint64_t sequence = 0;  // departure: the last operation the reporter took part in
    uint64_t first = 0;     // stall: the reporter's operation's numbers (first..sequence)
    int32_t normal = 0;     // departure: 1 if it completed every operation up to then
    int32_t gone = -1;      // failure: the rank found gone, or -1
    uint32_t kind = 0;      // stall: its kind (an ops::OpKind)
    uint32_t previous_kind = 0;  // stall: the reporter's numbered operation before it
    uint64_t previous_first = 0;
    uint64_t previous_last = 0;
    char previous_name[40] = {};  // its kind's name
    char text[416] = {};
  };
  static constexpr uint32_t kFailureMagic = 0x53464149;    // "SFAI"
  static constexpr uint32_t kDepartureMagic = 0x53444550;  // "SDEP"
  static constexpr uint32_t kStallMagic = 0x5353544c;      // "SSTL": AnnounceStall
  static constexpr uint32_t kMismatchMagic = 0x534d4953;   // "SMIS": NotifyMismatch
  // Records a stall or mismatch notice (PollFailureNotice, notice_mutex_ held).
  void RecordStallNews(const Notice& notice, const std::string& text);
  // Forgets the stalls heard of and told (repair and grow renumber ranks and operations).
  void ClearStallNews();
  // The transport goes (notice_mutex_ held): stall notices still in flight are kept.
  void AbandonStallSends();
  struct Departure {
    uint64_t sequence = 0;
    bool normal = false;
    std::string reason;
    std::chrono::steady_clock::time_point seen;
  };
  // The state of each of `ranks` (not this one) that runs on this host.
  std::vector<std::pair<int, ProcessState>> ProbeStates(const std::set<int>& ranks) const;
  void PostNoticeReceive();
  void PostNoticeReceiveLocked();  // notice_mutex_ held
  void WithdrawNoticeReceive();  // notice_mutex_ held
  // Abort or peer failure: receives that cannot be withdrawn are abandoned from now on.
  void SetTransportFailed();
  std::mutex notice_mutex_;
  std::unique_ptr<Notice> notice_in_;
  transport::Ticket notice_ticket_;  // guarded by notice_mutex_
  std::atomic<bool> notified_{false};
  bool departed_ = false;  // guarded by notice_mutex_
  mutable std::mutex departures_mutex_;
  std::map<int, Departure> departures_;  // by rank; guarded by departures_mutex_
  std::atomic<bool> any_departure_{false};
  struct Stall {
    Numbered op;
    std::string text;  // "neighbor_allreduce #4 (...)"
    Numbered previous;
    std::string previous_name;
  };
  mutable std::mutex stalls_mutex_;
  std::map<int, Stall> stalls_;  // the latest each rank announced; guarded by stalls_mutex_
  std::string mismatch_notice_;  // likewise
  std::atomic<bool> any_stall_news_{false};
  std::atomic<bool> mismatch_notified_{false};
  uint64_t told_sequence_ = 0;  // AnnounceStall: the operation, and whom it told (notice_mutex_)
  std::set<int> told_;
  struct StallSend {
    std::shared_ptr<Notice> notice;
    transport::Ticket ticket;
  };
  std::vector<StallSend> stall_sends_;  // in flight; guarded by notice_mutex_
  std::shared_ptr<Heartbeat> heartbeat_;  // null: off (shared with the progress thread's tick)
  mutable std::mutex gone_mutex_;
  std::set<int> gone_;  // guarded by gone_mutex_; see NoteGone

  std::atomic<bool> broken_{false};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> peer_failed_{false};
  mutable std::mutex broken_mutex_;
  std::string broken_reason_;
  Code broken_code_ = Code::kTransport;
};

}  // namespace starling::runtime
