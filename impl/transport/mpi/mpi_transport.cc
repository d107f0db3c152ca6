#include "impl/transport/mpi/mpi_transport.h"
#include "impl/transport/order.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <type_traits>
#include <vector>

#include "impl/common/error.h"
#include "impl/transport/mpi/ulfm.h"

#if STARLING_HAVE_ULFM
#include <mpi-ext.h>
#endif

namespace starling::transport {
namespace {

static_assert(sizeof(MPI_Request) <= sizeof(Ticket::storage), "MPI_Request must fit in a Ticket");

// The CPUs this thread may run on, as a bit set of the first 1024 (all online CPUs if
// the affinity cannot be read).
constexpr int kCpuWords = 16;
void AffinityBits(uint64_t (&bits)[kCpuWords]) {
  std::fill(std::begin(bits), std::end(bits), 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  int limit = kCpuWords * 64;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    limit = std::min(limit, std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))));
    for (int cpu = 0; cpu < limit; ++cpu) bits[cpu / 64] |= uint64_t{1} << (cpu % 64);
    return;
  }
  for (int cpu = 0; cpu < std::min(limit, static_cast<int>(CPU_SETSIZE)); ++cpu)
    if (CPU_ISSET(cpu, &set)) bits[cpu / 64] |= uint64_t{1} << (cpu % 64);
}

std::mutex g_lifetime_mutex;
int g_users = 0;
bool g_we_initialized = false;
std::atomic<bool> g_failure_seen{false};

MPI_Request& RequestOf(Ticket& ticket) { return *reinterpret_cast<MPI_Request*>(ticket.storage); }

void CheckMpi(int code, const char* call) {
  if (code != MPI_SUCCESS) throw Error(Code::kTransport, MpiErrorText(call, code));
}

int TagOf(Channel channel) { return 100 + static_cast<int>(channel); }

int CountOf(size_t bytes) {
  STARLING_CHECK(bytes <= static_cast<size_t>(INT_MAX), Code::kInternal, "message of ", bytes,
                 " bytes exceeds the MPI count limit (messages are chunked, this is a bug)");
  return static_cast<int>(bytes);
}

// ThreadSanitizer cannot see ordering that travels through MPI: rank A writes a
// tensor, then sends (a barrier, say); rank B, once that arrives, asks A's progress
// thread for the tensor, and that thread reads it. The write and the read are ordered,
// but only through messages between processes, so TSan would report a race. MPI's
// rule is stated to it instead: everything before a send happens before whatever
// follows a completed request in this process. (One process-wide sync object: a
// receive cannot tell which send, possibly through other ranks, it depends on.)
// Likewise within this process: any thread's MPI call may move data into another
// thread's receive buffer (vader copies with process_vm_readv inside whichever
// thread progresses), so every progress call releases what it wrote.
//
// That leaves a window: a thread can see a request complete while the thread whose MPI
// call copied the data has not returned (and released) yet. TSan then reports the copy,
// and when it cannot restore the copying thread's stack (tsan.supp matches the library
// on that stack) the report slips through. So the memory accesses MPI makes inside the
// transport's calls are not recorded at all (IgnoreMpiAccesses; synchronization still is):
// MPI orders its own copies, and Starling's accesses to message buffers stay checked.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
char g_message_order;
void BeforeSend() { __tsan_release(&g_message_order); }
void AfterProgress() { __tsan_release(&g_message_order); }
void AfterCompletion() { __tsan_acquire(&g_message_order); }
struct IgnoreMpiAccesses {
  IgnoreMpiAccesses() { __tsan_ignore_thread_begin(); }
  ~IgnoreMpiAccesses() { __tsan_ignore_thread_end(); }
};
#else
void BeforeSend() {}
void AfterProgress() {}
void AfterCompletion() {}
struct IgnoreMpiAccesses {
  IgnoreMpiAccesses() {}  // (user-provided: a scope guard, not an unused variable)
  ~IgnoreMpiAccesses() {}
};
#endif

}  // namespace

void OrderBeforePublish() { BeforeSend(); }
void OrderAfterObserve() { AfterCompletion(); }

std::string MpiErrorText(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return Str(call, " failed with MPI error ", code);
  return Str(call, " failed: ", text);
}

void MpiLifetime::Acquire(bool may_initialize) {
  std::lock_guard<std::mutex> lock(g_lifetime_mutex);
  int finalized = 0, initialized = 0;
  MPI_Finalized(&finalized);
  STARLING_CHECK(!finalized, Code::kInvalidUsage,
                 "MPI has already been finalized in this process (MPI cannot be initialized twice; "
                 "keep one Starling context alive for the whole program)");
  MPI_Initialized(&initialized);
  if (!initialized) {
    STARLING_CHECK(may_initialize, Code::kInvalidUsage,
                   "use_host_comm is set but MPI is not initialized; initialize MPI first "
                   "(MPI_Init_thread with MPI_THREAD_MULTIPLE)");
    ConfigureUlfmDetector();  // MPI_Init reads it (STARLING_FT_DETECTOR_SECONDS)
    int provided = 0;
    CheckMpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    g_we_initialized = true;
    // MPI is ours: errors must come back as codes, never abort the host process.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_MULTIPLE) {
      MPI_Finalize();
      Fail(Code::kUnsupported, "this MPI library provides thread level ", provided,
           " but Starling needs MPI_THREAD_MULTIPLE (3)");
    }
  } else {
    int provided = 0;
    MPI_Query_thread(&provided);
    STARLING_CHECK(provided >= MPI_THREAD_MULTIPLE, Code::kUnsupported,
                   "MPI was initialized with thread level ", provided,
                   " but Starling needs MPI_THREAD_MULTIPLE (3): initialize with "
                   "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) (mpi4py does by default)");
  }
  ++g_users;
}

void MpiLifetime::NoteFailure() { g_failure_seen.store(true); }

void MpiLifetime::Release(bool may_finalize) {
  std::lock_guard<std::mutex> lock(g_lifetime_mutex);
  // A process a grow started (it has an MPI parent) finalizes even after a failure:
  // Open MPI 5's launcher takes a spawned process that exits without MPI_Finalize for
  // a crash ("exiting improperly") and mpirun then exits 1. Its own job is itself (and
  // any newcomers started with it), so the finalize does not wait for the dead ranks of
  // the first job (the hang of ompi#11404 that the first job's ranks avoid).
  MPI_Comm parent = MPI_COMM_NULL;
  if (g_users == 1) MPI_Comm_get_parent(&parent);
  if (--g_users == 0 && g_we_initialized && may_finalize && (!g_failure_seen.load() || parent != MPI_COMM_NULL)) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
    g_we_initialized = false;
  }
}

MpiTransport::MpiTransport(MPI_Comm base) {
  CheckMpi(MPI_Comm_dup(base, &collective_comm_), "MPI_Comm_dup");
  CheckMpi(MPI_Comm_dup(base, &window_comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(collective_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(window_comm_, MPI_ERRORS_RETURN);
  fault_tolerant_ = UlfmEnabled();
  if (fault_tolerant_) {
    CheckMpi(MPI_Comm_dup(base, &heartbeat_comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(heartbeat_comm_, MPI_ERRORS_RETURN);
  }
  MPI_Comm_rank(collective_comm_, &rank_);
  MPI_Comm_size(collective_comm_, &size_);
  if (fault_tolerant_) IgnoreBrokenPipes();
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (heartbeat_comm_ != MPI_COMM_NULL) MPI_Comm_free(&heartbeat_comm_);
  if (window_comm_ != MPI_COMM_NULL) MPI_Comm_free(&window_comm_);
  if (collective_comm_ != MPI_COMM_NULL) MPI_Comm_free(&collective_comm_);
}

MPI_Comm MpiTransport::comm_for(Channel channel) const {
  switch (channel) {
    case Channel::kCollective:
    case Channel::kPeer:
      return collective_comm_;
    case Channel::kHeartbeat:
      return heartbeat_comm_ != MPI_COMM_NULL ? heartbeat_comm_ : window_comm_;
    default:
      return window_comm_;
  }
}

Ticket MpiTransport::Isend(Channel channel, int peer, const void* data, size_t bytes) {
  Ticket ticket;
  BeforeSend();
  int code = MPI_SUCCESS;
  {
    IgnoreMpiAccesses ignore;
    code = MPI_Isend(data, CountOf(bytes), MPI_BYTE, peer, TagOf(channel), comm_for(channel), &RequestOf(ticket));
  }
  Check(code, "MPI_Isend");
  AfterProgress();
  ticket.active = true;
  if (traffic_ && CountsAsTraffic(channel)) traffic_->Sent(peer, bytes);
  return ticket;
}

Ticket MpiTransport::Irecv(Channel channel, int peer, void* data, size_t capacity) {
  Ticket ticket;
  const int source = peer == kAnySource ? MPI_ANY_SOURCE : peer;
  int code = MPI_SUCCESS;
  {
    IgnoreMpiAccesses ignore;
    code = MPI_Irecv(data, CountOf(capacity), MPI_BYTE, source, TagOf(channel), comm_for(channel), &RequestOf(ticket));
  }
  Check(code, "MPI_Irecv");
  AfterProgress();
  ticket.active = true;
  ticket.receive = traffic_ && CountsAsTraffic(channel);
  return ticket;
}

bool MpiTransport::Test(Ticket& ticket, Completion* completion) {
  if (!ticket.active) return true;
  int done = 0;
  MPI_Status status;
  // A single-request MPI_Test reports errors in its return value; status.MPI_ERROR is
  // only defined for the multi-request calls.
  int code = MPI_SUCCESS;
  {
    IgnoreMpiAccesses ignore;
    code = MPI_Test(&RequestOf(ticket), &done, &status);
  }
  AfterProgress();
  if (code != MPI_SUCCESS) {
    int error_class = MPI_ERR_OTHER;
    MPI_Error_class(code, &error_class);
    // A wildcard receive that ULFM reports as possibly matching a dead rank stays
    // posted (it completes with REVOKED once the communicator is revoked).
    ticket.active = IsPendingFailureClass(error_class);
    if (error_class == MPI_ERR_TRUNCATE)
      Fail(Code::kMismatch, "a message from rank ", status.MPI_SOURCE, " was larger than expected");
    ThrowMpiError(code, "MPI_Test");
  }
  if (!done) return false;
  ticket.active = false;
  AfterCompletion();
  if (completion != nullptr || ticket.receive) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (ticket.receive) traffic_->Received(status.MPI_SOURCE, static_cast<size_t>(count));
    if (completion != nullptr) {
      completion->bytes = static_cast<size_t>(count);
      completion->source = status.MPI_SOURCE;
    }
  }
  return true;
}

bool MpiTransport::CancelRecv(Ticket& ticket) {
  if (!ticket.active) return false;
  if (failed_.load(std::memory_order_acquire)) {
    constexpr double kFailedCancelGraceSeconds = 0.2;
    switch (CancelRecvWithin(ticket, kFailedCancelGraceSeconds)) {
      case CancelOutcome::kCancelled:
        return true;
      case CancelOutcome::kCompleted:
        return false;
      case CancelOutcome::kPending:
        ticket.active = false;  // abandoned: see SetFailed
        abandoned_.fetch_add(1, std::memory_order_acq_rel);
        return false;
    }
  }
  MPI_Status status;
  {
    IgnoreMpiAccesses ignore;
    MPI_Cancel(&RequestOf(ticket));
    MPI_Wait(&RequestOf(ticket), &status);
  }
  ticket.active = false;
  int cancelled = 0;
  MPI_Test_cancelled(&status, &cancelled);
  return cancelled != 0;
}

Transport::CancelOutcome MpiTransport::CancelRecvWithin(Ticket& ticket, double max_seconds) {
  if (!ticket.active) return CancelOutcome::kCompleted;
  MPI_Cancel(&RequestOf(ticket));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_seconds);
  MPI_Status status;
  int done = 0;
  for (;;) {
    int code = MPI_SUCCESS;
    {
      IgnoreMpiAccesses ignore;
      code = MPI_Test(&RequestOf(ticket), &done, &status);
    }
    AfterProgress();
    if (code != MPI_SUCCESS) {
      int error_class = MPI_ERR_OTHER;
      MPI_Error_class(code, &error_class);
      if (!IsPendingFailureClass(error_class)) {
        ticket.active = false;  // the request was freed with its error
        return CancelOutcome::kCompleted;
      }
    }
    if (done || std::chrono::steady_clock::now() >= deadline) break;
    sched_yield();
  }
  if (!done) return CancelOutcome::kPending;
  AfterCompletion();
  ticket.active = false;
  int cancelled = 0;
  MPI_Test_cancelled(&status, &cancelled);
  return cancelled ? CancelOutcome::kCancelled : CancelOutcome::kCompleted;
}

MPI_Comm MpiTransport::Split(int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  Check(MPI_Comm_split(collective_comm_, color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split");
  return out;
}

Layout MpiTransport::ComputeLayout(int nodes_per_machine) {
  Layout layout;
  MPI_Comm local = MPI_COMM_NULL;
  if (nodes_per_machine > 0) {
    Check(MPI_Comm_split(collective_comm_, rank_ / nodes_per_machine, rank_, &local), "MPI_Comm_split");
  } else {
    Check(MPI_Comm_split_type(collective_comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
             "MPI_Comm_split_type");
  }
  MPI_Comm_rank(local, &layout.local_rank);
  MPI_Comm_size(local, &layout.local_size);
  // A machine is named by its lowest rank; gather every rank's (machine leader, local
  // rank, local size) to number machines and to check homogeneity identically everywhere.
  int leader = rank_;
  MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  // One record per rank: the layout triple, the process identity (for peer failure
  // detection) and the CPUs it may use (whether waits yield), in one MPI_Allgather.
  struct Record {
    int32_t layout[3];
    int32_t reserved;
    ProcessIdentity process;
    uint64_t cpus[kCpuWords];
  };
  static_assert(std::is_trivially_copyable_v<Record>, "Record travels as bytes");
  Record mine{};
  mine.layout[0] = leader;
  mine.layout[1] = layout.local_rank;
  mine.layout[2] = layout.local_size;
  mine.process = ThisProcess();
  AffinityBits(mine.cpus);
  std::vector<Record> records(static_cast<size_t>(size_));
  Check(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, records.data(), sizeof mine, MPI_BYTE, collective_comm_),
           "MPI_Allgather");
  std::vector<int> all(3 * static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    for (int i = 0; i < 3; ++i) all[3 * r + i] = records[r].layout[i];
    layout.processes.push_back(records[r].process);
  }
  for (int r = 0; r < size_; ++r) {
    const int l = all[3 * r];
    if (l == r) layout.machine_leaders.push_back(r);
    if (l == leader) layout.machine_ranks.push_back(r);
  }
  // Ranks on this kernel share its CPUs, whatever their host names (containers or
  // network namespaces of one machine).
  uint64_t host_cpus[kCpuWords] = {};
  layout.host_ranks = 0;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_ && !SameKernel(mine.process, records[r].process)) continue;
    ++layout.host_ranks;
    for (int w = 0; w < kCpuWords; ++w) host_cpus[w] |= records[r].cpus[w];
  }
  layout.host_cpus = 0;
  for (uint64_t word : host_cpus) layout.host_cpus += __builtin_popcountll(word);
  layout.host_oversubscribed = layout.host_ranks > std::max(1, layout.host_cpus);
  layout.machine_size = static_cast<int>(layout.machine_leaders.size());
  for (int m = 0; m < layout.machine_size; ++m)
    if (layout.machine_leaders[m] == leader) layout.machine_rank = m;
  for (int r = 0; r < size_; ++r) {
    const int local_size = all[3 * r + 2];
    if (local_size != layout.local_size || r % local_size != all[3 * r + 1] || all[3 * r] != r - r % local_size)
      layout.homogeneous = false;
  }
  return layout;
}

[[noreturn]] void MpiTransport::ThrowMpiError(int code, const char* call) {
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(code, &error_class);
  if (!IsFailureClass(error_class)) throw Error(Code::kTransport, MpiErrorText(call, code));
  MpiLifetime::NoteFailure();
  Revoke();  // every survivor leaves its waits, also those for a rank that stopped here
  // A revocation can arrive before the failure that caused it is known here.
  // Failures are announced through the runtime and learned while MPI progresses (under
  // load that took over 1 s); a dead rank on this host is also seen through /proc.
  std::vector<int> failed = FailedRanks();
  std::string found;  // what the probe found instead, in its own words
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (int round = 0; failed.empty() && found.empty() && std::chrono::steady_clock::now() < deadline; ++round) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);  // progresses MPI
    sched_yield();
    failed = FailedRanks();
    if (failed.empty() && probe_ && round % 64 == 0) found = probe_();
  }
  if (failed.empty() && !found.empty())
    throw Error(Code::kPeerFailed, Str(found, "; repair the context (starling_context_repair) or destroy it"));
  std::string names;
  for (size_t i = 0; i < failed.size(); ++i)
    names += Str(i == 0 ? "" : i + 1 == failed.size() ? " and " : ", ",
                 describe_ ? describe_(failed[i]) : Str("rank ", failed[i]));
  if (failed.empty())
    throw Error(Code::kPeerFailed, Str("a peer revoked the context's communicator (a rank failed, or a survivor "
                                       "started starling_context_repair) (", MpiErrorText(call, code), ")"));
  throw Error(Code::kPeerFailed, Str(names, failed.size() == 1 ? " is" : " are",
                                     " gone (killed, crashed or exited; reported by ULFM: ", MpiErrorText(call, code),
                                     "); repair the context (starling_context_repair) or destroy it"));
}

std::vector<int> MpiTransport::FailedRanks() const {
  std::vector<int> ranks;
#if STARLING_HAVE_ULFM
  if (!fault_tolerant_) return ranks;
  MPI_Group failed = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
#if defined(OMPI_HAVE_MPIX_COMM_GET_FAILED)
  if (MPIX_Comm_get_failed(collective_comm_, &failed) != MPI_SUCCESS) return ranks;
#else
  MPIX_Comm_failure_ack(collective_comm_);
  if (MPIX_Comm_failure_get_acked(collective_comm_, &failed) != MPI_SUCCESS) return ranks;
#endif
  int n = 0;
  MPI_Group_size(failed, &n);
  if (n > 0 && MPI_Comm_group(collective_comm_, &all) == MPI_SUCCESS) {
    std::vector<int> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = i;
    MPI_Group_translate_ranks(failed, n, in.data(), all, out.data());
    for (int r : out)
      if (r != MPI_UNDEFINED) ranks.push_back(r);
    MPI_Group_free(&all);
  }
  MPI_Group_free(&failed);
  std::sort(ranks.begin(), ranks.end());
#endif
  return ranks;
}

void MpiTransport::Revoke() {
#if STARLING_HAVE_ULFM
  if (!fault_tolerant_ || revoked_.exchange(true)) return;
  MpiLifetime::NoteFailure();
  failed_.store(true, std::memory_order_release);
  MPIX_Comm_revoke(collective_comm_);
  MPIX_Comm_revoke(window_comm_);
#endif
}

MPI_Comm MpiTransport::Shrink() {
  MPI_Comm shrunk = MPI_COMM_NULL;
#if STARLING_HAVE_ULFM
  Check(MPIX_Comm_shrink(collective_comm_, &shrunk), "MPIX_Comm_shrink");
#else
  Fail(Code::kUnsupported, UlfmMissing());
#endif
  return shrunk;
}

void MpiTransport::Barrier() { Check(MPI_Barrier(collective_comm_), "MPI_Barrier"); }

std::vector<int> MpiTransport::AllgatherInt(int value) {
  std::vector<int> all(static_cast<size_t>(size_));
  Check(MPI_Allgather(&value, 1, MPI_INT, all.data(), 1, MPI_INT, collective_comm_), "MPI_Allgather");
  return all;
}

void MpiTransport::AllgatherBytes(const void* mine, size_t bytes, void* all) {
  STARLING_CHECK(bytes <= static_cast<size_t>(INT32_MAX), Code::kInternal, "allgather of ", bytes, " bytes");
  Check(MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE,
                      collective_comm_),
        "MPI_Allgather");
}

int MpiTransport::Agree(int flag, bool* failed) {
  *failed = false;
#if STARLING_HAVE_ULFM
  const int code = MPIX_Comm_agree(collective_comm_, &flag);
  if (code != MPI_SUCCESS) {
    int error_class = MPI_ERR_OTHER;
    MPI_Error_class(code, &error_class);
    if (!IsFailureClass(error_class)) ThrowMpiError(code, "MPIX_Comm_agree");
    *failed = true;  // the flag is still agreed among the live ranks
  }
#else
  Fail(Code::kUnsupported, UlfmMissing());
#endif
  return flag;
}

}  // namespace starling::transport
