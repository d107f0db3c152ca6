// One window on one rank: the user's tensor (borrowed), one buffer per in-neighbor,
// version counters, associated p values and the mutex slots. Buffers are double
// buffered: incoming data lands in a slot's shadow buffer outside any lock, then
// shadow and buffer are swapped under the window lock, so readers never see a
// half-written buffer and a put costs no extra copy.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "impl/common/tensor.h"
#include "impl/device/host_access.h"
#include "impl/runtime/context.h"

namespace starling::windows {

struct UpdateWeights {
  bool use_weights = false;
  double self_weight = 0.0;
  std::vector<int> ranks;
  std::vector<double> weights;
  bool reset = false;
  bool require_mutex = false;
};

// A window over device memory keeps its neighbor buffers in host memory and reaches
// the tensor through `device` (copies on a stream of its own).
class Window {
 public:
  // initial: the tensor's contents for the neighbor buffers (host memory), or NULL for
  // zeros. device: set when the tensor is CUDA memory.
  Window(uint32_t id, std::string name, const TensorView& tensor, int rank, int size, std::vector<int> in_neighbors,
         std::vector<int> out_neighbors, std::shared_ptr<const runtime::TopologyState> topology, const void* initial,
         std::unique_ptr<device::HostAccess> device);

  uint32_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const TensorView& tensor() const { return tensor_; }
  const std::vector<int>& in_neighbors() const { return in_; }
  const std::vector<int>& out_neighbors() const { return out_; }
  // Index of `rank` among the in-neighbors, or -1.
  int SlotOf(int rank) const;

  // --- incoming data (executor) ---
  char* Shadow(int slot) { return shadow_[static_cast<size_t>(slot)].get(); }
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
  // `wait_check`: see LockOwnSlots (needed only with require_mutex).
  void Update(const UpdateWeights& args, bool with_p, const std::function<void(int holder)>& wait_check);
  std::vector<int64_t> Versions();
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
  // it waits, `wait_check` runs every 10 ms with the holder (a rank, or
  // kSelf) and may throw to give up (abort, dead holder, timeout); slots taken so far
  // are then released.
  void LockOwnSlots(const std::vector<int>& ranks, const std::function<void(int holder)>& wait_check);
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

  std::mutex mutex_;  // buffers, versions, p
  std::vector<std::unique_ptr<char[]>> buffers_;
  std::vector<std::unique_ptr<char[]>> shadow_;
  std::vector<int64_t> versions_;
  std::vector<double> p_buffers_;
  double p_ = 1.0;

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
