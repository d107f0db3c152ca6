// One window on one rank: the user's tensor (borrowed), one slot per in-neighbor (two
// buffers, a version counter and the associated p; slots.h says who may touch what,
// when) and the mutex slots. A put lands in the slot's other buffer outside any lock,
// which then becomes the slot's value under the slot's lock, so readers never see a
// half-written buffer and a put costs no extra copy.
//
// The slots of in-neighbors that share memory with this rank live in a segment those
// ranks map: they put and accumulate into them themselves (PutShared, AccumulateShared
// on their side), and this rank's window service never hears of it. Out-neighbors that
// share memory map it too, to get: they read this rank's tensor from its memory
// (GetShared on their side) under the segment's tensor lock, which Update takes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "impl/common/process.h"
#include "impl/common/tensor.h"
#include "impl/device/host_access.h"
#include "impl/runtime/context.h"
#include "impl/windows/slots.h"

namespace starling::windows {

struct UpdateWeights {
  bool use_weights = false;
  double self_weight = 0.0;
  std::vector<int> ranks;
  std::vector<double> weights;
  bool reset = false;
  bool require_mutex = false;
};

// The checks of a wait for a lock or a mutex slot held by `holder` (a rank, or kSelf:
// another thread of this rank): may end the wait by throwing (abort, a gone holder,
// STARLING_TIMEOUT_SECONDS). Made per wait, from the name of what waits; `serve`: the
// wait may last (a peer's mutex) and holds no lock, so it also serves this rank's
// window requests meanwhile, as waits for messages do.
using HolderCheck = std::function<void(int holder)>;
using HolderChecks = std::function<HolderCheck(const char* what, bool serve)>;
// Counts bytes that `peer` moved through shared memory (traffic figures): wrote into
// this rank's slots, or read from its tensor.
using PeerBytesCounter = std::function<void(int peer, uint64_t bytes)>;

// The ranks that map this rank's shared segment, and its name.
struct SharedSlotsPlan {
  std::vector<int> origins;  // ascending, each an in-neighbor: their slots are there
  std::vector<int> readers;  // ascending, each an out-neighbor: they read the tensor
  std::string name;
};

// A window over device memory keeps its neighbor buffers in host memory and reaches
// the tensor through `device` (copies on a stream of its own).
class Window {
 public:
  // initial: the tensor's contents for the neighbor buffers (host memory), or NULL for
  // zeros. device: set when the tensor is CUDA memory. share: the slots to put in
  // shared memory (none if empty; if the segment cannot be made, they stay private and
  // `shared_slots_error()` says why). checks: see HolderChecks (empty: waits unchecked).
  // received, sent: the bytes peers wrote into the shared slots, and read from the tensor.
  Window(uint32_t id, std::string name, const TensorView& tensor, int rank, int size, std::vector<int> in_neighbors,
         std::vector<int> out_neighbors, std::shared_ptr<const runtime::TopologyState> topology, const void* initial,
         std::unique_ptr<device::HostAccess> device, const SharedSlotsPlan& share = {}, HolderChecks checks = {},
         PeerBytesCounter received = {}, PeerBytesCounter sent = {});

  uint32_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const TensorView& tensor() const { return tensor_; }
  const std::vector<int>& in_neighbors() const { return in_; }
  const std::vector<int>& out_neighbors() const { return out_; }
  // Index of `rank` among the in-neighbors, or -1.
  int SlotOf(int rank) const;

  // Why the planned shared slots are private ("" if they are shared or none planned).
  const std::string& shared_slots_error() const { return shared_error_; }
  // Removes the name of this rank's own segment (Registry::UnlinkSegments).
  void UnlinkSegment() { shared_.Unlink(); }

  // --- the shared segments of same-host peers (origin side, executor) ---
  struct Target {
    int rank;
    std::string segment;
    ProcessIdentity process;  // watched: a write into a dead rank's memory succeeds
    bool put = false;         // an out-neighbor: this rank puts into its slot there
    bool get = false;         // an in-neighbor: this rank reads its tensor
  };
  // Maps each peer's segment (after the creation's agreement, so it exists) and, for
  // gets, tries a read of its tensor; a peer whose segment cannot be mapped, or whose
  // memory cannot be read, is reached through messages. Returns the failures.
  std::string AttachTargets(const std::vector<Target>& targets);
  bool PutsShared(int target) const {
    const RemoteSlot* remote = Remote(target);
    return remote != nullptr && remote->slot.state != nullptr;
  }
  bool GetsShared(int source) const {
    const RemoteSlot* remote = Remote(source);
    return remote != nullptr && remote->readable;
  }
  // True once shared target `target`'s process has exited.
  bool TargetExited(int target) const;
  // target's slot for this rank = weight * data (a put), p set, its version counted.
  // require_mutex: under the slot's mutex (taken and released here unless this rank
  // already holds it).
  void PutShared(int target, const void* data, double weight, bool has_p, double p, bool require_mutex);
  // target's slot for this rank += weight * data; p added.
  void AccumulateShared(int target, const void* data, double weight, bool has_p, double p, bool require_mutex);
  // Takes (waiting while the target holds it) or releases the mutex of target's slot
  // for this rank (window_mutex_acquire / _release).
  void MutexShared(int target, bool acquire);
  // This rank's buffer for in-neighbor `source` = weight * source's tensor, read from
  // its memory under its tensor lock, its version counted (a get). Returns the bytes
  // read. Error(kPeerFailed) if the source's memory is gone (it is exiting),
  // Error(kTransport) if the read fails otherwise.
  size_t GetShared(int source, double weight);

  // --- incoming data (executor) ---
  // Where the next put from the slot's origin lands (not the slot's value: see slots.h).
  char* Shadow(int slot) { return slots_[static_cast<size_t>(slot)].other(); }
  // Makes the shadow the slot's buffer (scaling it first), counts a version and sets p.
  void CommitShadow(int slot, double weight, bool count_version, bool has_p, double p);
  // buffer[slot] = weight * data (a get's result), counting a version.
  void CommitCopy(int slot, const void* data, double weight);
  // buffer[slot] += weight * data; p[slot] += p.
  void Accumulate(int slot, const void* data, double weight, bool has_p, double p);
  // A consistent copy of the window tensor (for a remote get).
  void Snapshot(void* dst);

  // --- send side (executor: one operation at a time) ---
  // Copies `bytes` bytes of `data` (a tensor being put) into one of two buffers used in
  // turn and returns it; see TransferOp::Write.
  const void* StageForSend(const void* data, size_t bytes);
  // After a put failed, MPI may still read the staging buffers: they are kept until
  // the process exits (see Quarantine) and fresh ones are made for later puts.
  void AbandonSendStage();

  // --- local operations (caller thread) ---
  // tensor = self_weight * tensor + sum w_r buffer_r (see starling_window_update);
  // with_p: p is combined with the same weights.
  // `what` names the call in the errors of a wait for the mutexes (require_mutex).
  void Update(const UpdateWeights& args, bool with_p, const char* what);
  std::vector<int64_t> Versions();
  // Counts what origins wrote into the shared slots since the last count (window_free
  // does, so every byte is counted by the time the window is gone).
  void CountReceived();
  double p();
  void set_p(double p);
  void ScaleP(double factor);

  // --- mutex slots, one per rank: this rank's buffer for that rank ---
  static constexpr int kFree = -1;
  static constexpr int kSelf = -2;
  // Locks slot `rank` for `holder` (a remote rank, or kSelf) if free.
  bool TryLockSlot(int rank, int holder);
  // Releases slot `rank` held by `holder`; false if it was not held by it.
  bool UnlockSlot(int rank, int holder);
  int SlotHolder(int rank);
  // Caller-thread acquire of this rank's own slots (waits for remote holders). While
  // it waits, the window's checks (see HolderChecks; `what` names the call) run every
  // 10 ms with the holder (a rank, or kSelf) and may throw to give up (abort, dead
  // holder, timeout); slots taken so far are then released.
  void LockOwnSlots(const std::vector<int>& ranks, const char* what);
  void UnlockOwnSlots(const std::vector<int>& ranks);

  // starling_context_repair (nothing else runs on the context meanwhile): the window
  // over the survivors. old_to_new[old rank] is the new rank or -1 (dead). A buffer of
  // an in-neighbor that survives and stays an in-neighbor keeps its contents, version
  // and p; a new in-neighbor's buffer starts as at window_create (this rank's tensor,
  // zeros for device memory, p 0); a dead rank's buffer is dropped. Mutex slots are freed.
  void Reshape(int rank, int size, std::vector<int> in_neighbors, std::vector<int> out_neighbors,
               std::shared_ptr<const runtime::TopologyState> topology, const std::vector<int>& old_to_new);

 private:
  uint32_t id_;
  std::string name_;
  TensorView tensor_;
  std::unique_ptr<device::HostAccess> device_;
  int rank_;
  std::vector<int> in_;
  std::vector<int> out_;
  std::shared_ptr<const runtime::TopologyState> topology_;

  // The tensor (against remote gets) and p_; taken before any slot lock.
  std::mutex mutex_;
  double p_ = 1.0;
  // slots_[i]: in-neighbor in_[i]'s slot, in shared_ or private_.
  SlotArea shared_;
  SlotArea private_;
  std::vector<Slot> slots_;
  std::vector<char> slot_shared_;  // by slot: in shared_ (its mutex too)
  std::string shared_error_;
  std::vector<int> readers_;  // shared_'s readers, in its order
  HolderChecks checks_;
  PeerBytesCounter received_;
  PeerBytesCounter sent_;
  // Under slot `s`'s lock: passes on its bytes_in.
  void Count(size_t s);
  // Passes on what readers read from the tensor.
  void CountReads();
  // Same-host peers whose segment is mapped here: a slot for this rank (puts; null
  // state if none) and a tensor this rank reads (gets; `readable`).
  struct RemoteSlot {
    int rank;
    SlotArea area;
    Slot slot;
    ProcessWatch watch;  // also gives the pid that gets read from
    bool readable = false;
  };
  std::vector<RemoteSlot> remote_;
  const RemoteSlot* Remote(int rank) const;
  // The shared slot of in-neighbor `rank`, whose mutex lives in shared memory, or null.
  const Slot* SharedSlotOf(int rank) const;
  // Waits up to `seconds` for the mutex of `slot` to change from `seen`.
  static void AwaitMutex(const Slot& slot, uint32_t seen, double seconds);
  // Takes slot `slot`'s lock (`holder`: who else may hold it, for the checks).
  void LockSlot(const Slot& slot, int holder, const char* what);
  // Runs write on target's slot for this rank, under target's window mutex when
  // require_mutex (PutShared, AccumulateShared).
  void WriteShared(int target, bool require_mutex, const std::function<void(const Slot&)>& write);

  std::unique_ptr<char[]> send_stage_[2];
  size_t send_stage_bytes_ = 0;
  int send_turn_ = 0;

  std::mutex slot_mutex_;
  std::condition_variable slot_cv_;
  std::vector<int> slot_holder_;  // per rank: kFree, kSelf or a rank

 public:
  uint64_t handle = 0;  // the C handle value, for lookups by name (set by capi)
};

}  // namespace starling::windows
