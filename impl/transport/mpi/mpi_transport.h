// Open MPI implementation of the transport, plus the process-level MPI lifetime and
// the machine layout (which ranks share a host).
#pragma once

#include <mpi.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "impl/common/process.h"
#include "impl/transport/transport.h"

namespace starling::transport {

// Counts the contexts that rely on MPI being initialized. Acquire initializes MPI with
// MPI_THREAD_MULTIPLE if nobody has; the last Release finalizes it if Starling
// initialized it, unless may_finalize is false (a context whose peers may be gone:
// Open MPI's MPI_Finalize waits for every rank), in which case MPI stays initialized
// (a later context reuses it; a later last Release may finalize it).
// Throws Error on a thread level below MULTIPLE or a finalized MPI.
class MpiLifetime {
 public:
  static void Acquire(bool may_initialize);
  static void Release(bool may_finalize = true);
  // A rank of this job failed (ULFM reported it): MPI is never finalized from now on,
  // as Open MPI 5.0's MPI_Finalize can wait forever for the dead rank
  // (open-mpi/ompi#11404; measured: about 1 run in 2 hung). Any thread.
  static void NoteFailure();
};

// Which ranks form a machine: consecutive groups of `nodes_per_machine` ranks when it
// is > 0, else the ranks that share memory (MPI_COMM_TYPE_SHARED).
struct Layout {
  int local_rank = 0;
  int local_size = 1;
  int machine_rank = 0;
  int machine_size = 1;
  bool homogeneous = true;
  std::vector<int> machine_ranks;    // the ranks of this rank's machine, ascending
  std::vector<int> machine_leaders;  // the lowest rank of each machine, by machine rank
  std::vector<ProcessIdentity> processes;  // every rank's process (pid, host), by rank
  // More ranks run on this rank's machine (its kernel: containers and network
  // namespaces of one machine included) than there are CPUs they may use (the union of
  // their affinity masks): a rank waiting for a peer may be holding the core that peer
  // needs, so waits yield. Otherwise yielding only hands the core to unrelated busy
  // processes for a whole time slice, and waits spin as MPI's own do.
  bool host_oversubscribed = false;
  int host_ranks = 1;  // ranks of this job on this rank's kernel (SameKernel)
  int host_cpus = 1;   // CPUs in the union of their affinity masks
};

class MpiTransport final : public Transport {
 public:
  // Duplicates `base` (collective over it) for collective and window traffic, both
  // with MPI_ERRORS_RETURN so failures come back as errors, never aborts.
  explicit MpiTransport(MPI_Comm base);
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Ticket Isend(Channel channel, int peer, const void* data, size_t bytes) override;
  Ticket Irecv(Channel channel, int peer, void* data, size_t capacity) override;
  bool Test(Ticket& ticket, Completion* completion) override;
  bool CancelRecv(Ticket& ticket) override;
  CancelOutcome CancelRecvWithin(Ticket& ticket, double max_seconds) override;

  // The context failed (aborted, or a peer is gone): from now on CancelRecv waits at
  // most a short grace for a receive whose message is already arriving (a dead
  // sender never finishes it; Open MPI's MPI_Cancel cannot withdraw a matched
  // receive), then abandons it. Any thread.
  void SetFailed() { failed_.store(true, std::memory_order_release); }
  // Receives abandoned that way: MPI may still write their buffers, so whoever owns
  // them must quarantine them instead of freeing them.
  int abandoned_receives() const { return abandoned_.load(std::memory_order_acquire); }

  // Collective: computes the machine layout and gathers every rank's process identity
  // (blocking MPI calls; used at creation).
  Layout ComputeLayout(int nodes_per_machine);

  // --- ULFM (fault tolerance; see ulfm.h) ---
  // True when this MPI has ULFM and the job was started with it enabled: MPI then
  // reports a dead rank as MPIX_ERR_PROC_FAILED instead of the launcher killing the job.
  bool fault_tolerant() const { return fault_tolerant_; }
  // How messages name ranks ("rank 2 (pid 42 on host vm)"); set by the context.
  void SetRankDescriber(std::function<std::string(int)> describe) { describe_ = std::move(describe); }
  // Failures found by other means than ULFM (the context's /proc probe of same-host
  // ranks, heartbeat findings, other ranks' notices), in the words of what found them
  // (empty: none): names the failure when only a revocation has arrived so far. Set by
  // the context.
  void SetFailureProbe(std::function<std::string()> probe) { probe_ = std::move(probe); }
  // Ranks this process knows to have failed (ascending); empty without ULFM. Any thread.
  std::vector<int> FailedRanks() const;
  // Revokes the collective and window communicators (ULFM): every rank's pending and later operations on
  // them fail with MPIX_ERR_REVOKED, so survivors leave waits that depend on a rank
  // that stopped at the failure. Idempotent, any thread; nothing without ULFM.
  void Revoke();
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // Collective over the survivors (ULFM): a new communicator without the failed
  // ranks (the caller owns it). Throws Error(kPeerFailed) if a rank fails meanwhile.
  MPI_Comm Shrink();
  // The collective communicator, for calls that derive others from it (grow's spawn).
  MPI_Comm base_comm() const { return collective_comm_; }
  // Collective, blocking: MPI_Comm_split of the collective communicator (color < 0:
  // MPI_UNDEFINED, giving MPI_COMM_NULL). The caller frees the result.
  MPI_Comm Split(int color, int key);
  // Collective, blocking: MPI_Barrier over the collective communicator.
  void Barrier();
  // Collective, blocking: every rank's value, by rank.
  std::vector<int> AllgatherInt(int value);
  // Collective, blocking: every rank's `bytes` bytes, by rank, into `all`.
  void AllgatherBytes(const void* mine, size_t bytes, void* all);
  // Collective over the communicator (ULFM): the AND of every live rank's `flag`,
  // agreed even if ranks fail meanwhile (*failed set when one did).
  int Agree(int flag, bool* failed);

 private:
  MPI_Comm comm_for(Channel channel) const;
  // Throws: Error(kPeerFailed) naming the failed ranks for ULFM's failure classes
  // (revoking the communicators first), else Error(kTransport).
  [[noreturn]] void ThrowMpiError(int code, const char* call);
  void Check(int code, const char* call) {
    if (code != MPI_SUCCESS) ThrowMpiError(code, call);
  }

  bool fault_tolerant_ = false;
  std::atomic<bool> revoked_{false};
  std::function<std::string(int)> describe_;
  std::function<std::string()> probe_;

  std::atomic<bool> failed_{false};
  std::atomic<int> abandoned_{0};
  MPI_Comm collective_comm_ = MPI_COMM_NULL;
  MPI_Comm window_comm_ = MPI_COMM_NULL;
  // ULFM: the failure detector's (Channel::kHeartbeat), never revoked, so that the
  // news of a failure it found outlives the revocation that follows it.
  MPI_Comm heartbeat_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

// "MPI_Isend failed: <MPI's error string>".
std::string MpiErrorText(const char* call, int code);

}  // namespace starling::transport
