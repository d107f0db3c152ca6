#include "impl/windows/window.h"

#include "impl/common/quarantine.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "impl/ops/reduce.h"
#include "impl/transport/shm/cross_memory.h"

namespace starling::windows {

namespace {

// Releases a slot's lock when it goes.
class SlotGuard {
 public:
  explicit SlotGuard(const Slot& slot) : state_(slot.state) {}
  SlotGuard(SlotGuard&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;
  SlotGuard& operator=(SlotGuard&&) = delete;
  ~SlotGuard() {
    if (state_) state_->lock.Unlock();
  }

 private:
  SlotState* state_;
};

// A lock that someone else holds is awaited in short sleeps, with the checks between.
transport::shm::WaitPolicy LockPolicy() {
  transport::shm::WaitPolicy policy;
  policy.spin_seconds = 20e-6;
  policy.slice_seconds = 0.001;
  return policy;
}

// Takes a shared area's tensor lock as rank `me`. A wait checks whoever holds it (a
// reader, or the owner inside window_update), as a wait for a slot's lock does; the
// holder is read from shared memory, so a value that is not a rank stands for `fallback`.
void LockTensor(TensorState& state, int me, int fallback, int size, const HolderChecks& checks, const char* what) {
  if (!state.lock.TryLock()) {
    HolderCheck check = checks ? checks(what, false) : HolderCheck();
    std::function<void()> probe;
    if (check) {
      probe = [&] {
        const int holder = state.holder.load(std::memory_order_relaxed);
        check(holder >= 0 && holder < size ? holder : fallback);
      };
    }
    state.lock.Lock(LockPolicy(), probe, what);
  }
  state.holder.store(me, std::memory_order_relaxed);
}

void UnlockTensor(TensorState& state) {
  state.holder.store(-1, std::memory_order_relaxed);
  state.lock.Unlock();
}

// Holds a tensor lock (if any) for a scope.
class TensorGuard {
 public:
  TensorGuard(TensorState* state, int me, int fallback, int size, const HolderChecks& checks, const char* what)
      : state_(state) {
    if (state_) LockTensor(*state_, me, fallback, size, checks, what);
  }
  ~TensorGuard() {
    if (state_) UnlockTensor(*state_);
  }
  TensorGuard(const TensorGuard&) = delete;
  TensorGuard& operator=(const TensorGuard&) = delete;

 private:
  TensorState* state_;
};

}  // namespace

Window::Window(uint32_t id, std::string name, const TensorView& tensor, int rank, int size,
               std::vector<int> in_neighbors, std::vector<int> out_neighbors,
               std::shared_ptr<const runtime::TopologyState> topology, const void* initial,
               std::unique_ptr<device::HostAccess> device, const SharedSlotsPlan& share, HolderChecks checks,
               PeerBytesCounter received, PeerBytesCounter sent)
    : id_(id),
      name_(std::move(name)),
      tensor_(tensor),
      device_(std::move(device)),
      rank_(rank),
      in_(std::move(in_neighbors)),
      out_(std::move(out_neighbors)),
      topology_(std::move(topology)),
      checks_(std::move(checks)),
      received_(std::move(received)),
      sent_(std::move(sent)),
      slot_holder_(static_cast<size_t>(size), kFree) {
  const void* fill = tensor_.bytes > 0 ? initial : nullptr;
  if (!share.origins.empty() || !share.readers.empty()) {
    try {
      shared_ = SlotArea::Share(share.name, id_, rank_, share.origins, share.readers, tensor_.bytes, fill,
                                reinterpret_cast<uintptr_t>(tensor_.data));
      readers_ = share.readers;
    } catch (const std::exception& e) {
      shared_error_ = e.what();
    }
  }
  const std::vector<int>& shared = shared_.shared() ? share.origins : std::vector<int>{};
  private_ = SlotArea::Private(in_.size() - shared.size(), tensor_.bytes, fill);
  size_t next_shared = 0, next_private = 0;
  for (int r : in_) {
    const auto it = std::lower_bound(shared.begin(), shared.end(), r);
    const bool in_shared = it != shared.end() && *it == r;
    slots_.push_back(in_shared ? shared_.slot(next_shared++) : private_.slot(next_private++));
    slot_shared_.push_back(in_shared ? 1 : 0);
  }
}

void Window::LockSlot(const Slot& slot, int holder, const char* what) {
  if (slot.state->lock.TryLock()) return;
  HolderCheck check = checks_ ? checks_(what, false) : HolderCheck();
  slot.state->lock.Lock(LockPolicy(), check ? std::function<void()>([&check, holder] { check(holder); })
                                            : std::function<void()>(),
                        what);
}

std::string Window::AttachTargets(const std::vector<Target>& targets) {
  std::string failures;
  auto fail = [&failures](int rank, const std::string& why) {
    failures += Str(failures.empty() ? "" : "; ", "rank ", rank, ": ", why);
  };
  for (const Target& target : targets) {
    RemoteSlot remote{target.rank, SlotArea(), Slot(), ProcessWatch()};
    try {
      size_t index = SlotArea::kNone;
      remote.area = SlotArea::Attach(target.segment, id_, target.rank, rank_, tensor_.bytes, &index);
      if (target.put) {
        STARLING_CHECK(index != SlotArea::kNone, Code::kTransport, "its segment has no slot for rank ", rank_);
        remote.slot = remote.area.slot(index);
      }
    } catch (const std::exception& e) {
      fail(target.rank, e.what());
      continue;
    }
    if (target.get) {
      const std::string refused =
          remote.area.reader() == nullptr
              ? Str("its segment has no read counter for rank ", rank_)
              : transport::shm::ProbeProcessMemory(target.process.pid, remote.area.tensor_address(), tensor_.bytes);
      remote.readable = refused.empty();
      if (!refused.empty()) fail(target.rank, Str("gets through messages (", refused, ")"));
    }
    if (remote.slot.state == nullptr && !remote.readable) continue;
    remote.watch = ProcessWatch(target.process);
    remote_.push_back(std::move(remote));
  }
  return failures;
}

bool Window::TargetExited(int target) const {
  const RemoteSlot* remote = Remote(target);
  return remote != nullptr && remote->watch.Exited();
}

const Window::RemoteSlot* Window::Remote(int rank) const {
  for (const RemoteSlot& r : remote_)
    if (r.rank == rank) return &r;
  return nullptr;
}

void Window::WriteShared(int target, bool require_mutex, const std::function<void(const Slot&)>& write) {
  const RemoteSlot* remote = Remote(target);
  STARLING_CHECK(remote != nullptr, Code::kInternal, "no shared slot on rank ", target);
  const Slot& slot = remote->slot;
  // A write under the mutex holds it only while writing, unless this rank holds it
  // already (window_mutex_acquire, then a write under the mutex).
  const bool take = require_mutex && slot.state->mutex.value.load(std::memory_order_acquire) != kMutexOrigin;
  if (take) MutexShared(target, true);
  try {
    write(slot);
  } catch (...) {
    if (take) MutexShared(target, false);
    throw;
  }
  if (take) MutexShared(target, false);
}

void Window::PutShared(int target, const void* data, double weight, bool has_p, double p, bool require_mutex) {
  WriteShared(target, require_mutex, [&](const Slot& slot) {
    char* other = slot.other();  // only this rank flips it: stable until the flip below
    if (tensor_.numel > 0) {
      if (weight == 1.0) {
        std::memcpy(other, data, tensor_.bytes);
      } else {
        ops::Scale(other, data, weight, tensor_.numel, tensor_.dtype);
      }
    }
    LockSlot(slot, target, "window_put's lock on a peer's buffer");
    slot.state->current.store(slot.state->current.load(std::memory_order_relaxed) ^ 1u, std::memory_order_release);
    ++slot.state->version;
    if (has_p) slot.state->p = p;
    slot.state->bytes_in += tensor_.bytes;
    slot.state->lock.Unlock();
  });
}

void Window::AccumulateShared(int target, const void* data, double weight, bool has_p, double p,
                              bool require_mutex) {
  WriteShared(target, require_mutex, [&](const Slot& slot) {
    LockSlot(slot, target, "window_accumulate's lock on a peer's buffer");
    SlotGuard guard(slot);
    if (tensor_.numel > 0) ops::Axpy(slot.value(), data, weight, tensor_.numel, tensor_.dtype);
    if (has_p) slot.state->p += p;
    slot.state->bytes_in += tensor_.bytes;
  });
}

void Window::AwaitMutex(const Slot& slot, uint32_t seen, double seconds) {
  transport::shm::SharedCounter& mutex = slot.state->mutex;
  // Announce the sleep, then look again (see futex.h: either the releaser sees the
  // sleeper, or this sees the release).
  mutex.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (mutex.value.load(std::memory_order_seq_cst) == seen) transport::shm::FutexWait(mutex.value, seen, seconds);
  mutex.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void Window::MutexShared(int target, bool acquire) {
  const RemoteSlot* remote = Remote(target);
  STARLING_CHECK(remote != nullptr, Code::kInternal, "no shared slot on rank ", target);
  transport::shm::SharedCounter& mutex = remote->slot.state->mutex;
  if (!acquire) {
    uint32_t held = kMutexOrigin;
    STARLING_CHECK(mutex.value.compare_exchange_strong(held, kMutexFree, std::memory_order_seq_cst), Code::kInvalidUsage,
                   "rank ", rank_, " released the mutex of window '", name_, "' on rank ", target,
                   " without holding it");
    if (mutex.sleepers.load(std::memory_order_seq_cst) != 0) transport::shm::FutexWakeAll(mutex.value);
    return;
  }
  HolderCheck check;
  for (int spins = 0;; ++spins) {
    uint32_t seen = kMutexFree;
    if (mutex.value.compare_exchange_strong(seen, kMutexOrigin, std::memory_order_seq_cst)) return;
    if (seen > kMutexOrigin)
      Fail(Code::kTransport, "the mutex of window '", name_, "' on rank ", target, " is corrupted (", seen, ")");
    if (spins < 64) continue;
    if (!check && checks_) check = checks_("window_mutex_acquire", true);
    if (check) check(target);
    AwaitMutex(remote->slot, seen, 0.001);
  }
}

size_t Window::GetShared(int source, double weight) {
  const RemoteSlot* remote = Remote(source);
  const int index = SlotOf(source);
  STARLING_CHECK(remote != nullptr && remote->readable && index >= 0, Code::kInternal, "no shared tensor on rank ",
                 source);
  const Slot& slot = slots_[static_cast<size_t>(index)];
  LockSlot(slot, source, "window_get's lock on its buffer");
  SlotGuard guard(slot);
  int error = 0;
  {
    TensorGuard tensor(remote->area.tensor_state(), rank_, source, static_cast<int>(slot_holder_.size()), checks_,
                       "window_get's lock on a peer's tensor");
    if (tensor_.bytes > 0)
      error = transport::shm::ReadProcessMemory(remote->watch.pid(), remote->area.tensor_address(), slot.value(), tensor_.bytes);
  }
  STARLING_CHECK(error == 0, error == ESRCH ? Code::kPeerFailed : Code::kTransport, "window '", name_,
                 "': reading rank ", source, "'s tensor failed (process_vm_readv: ", std::strerror(error), ")");
  if (weight != 1.0 && tensor_.numel > 0) ops::Scale(slot.value(), slot.value(), weight, tensor_.numel, tensor_.dtype);
  ++slot.state->version;
  remote->area.reader()->fetch_add(tensor_.bytes, std::memory_order_relaxed);
  return tensor_.bytes;
}

void Window::Reshape(int rank, int size, std::vector<int> in_neighbors, std::vector<int> out_neighbors,
                     std::shared_ptr<const runtime::TopologyState> topology, const std::vector<int>& old_to_new) {
  // Nothing else runs on the context: no lock is taken by a survivor, and a dead
  // rank's slot, whatever state it left, is dropped. Every slot becomes private (the
  // shared segments are of the old numbering) and this rank writes through messages.
  std::lock_guard<std::mutex> lock(mutex_);
  std::lock_guard<std::mutex> slots(slot_mutex_);
  const void* fill = device_ || tensor_.bytes == 0 ? nullptr : tensor_.data;
  SlotArea area = SlotArea::Private(in_neighbors.size(), tensor_.bytes, fill);
  std::vector<Slot> fresh;
  for (size_t i = 0; i < in_neighbors.size(); ++i) {
    const int r = in_neighbors[i];
    Slot slot = area.slot(i);
    for (size_t s = 0; s < in_.size(); ++s) {
      const int old = in_[s];
      if (old >= 0 && static_cast<size_t>(old) < old_to_new.size() && old_to_new[static_cast<size_t>(old)] == r) {
        if (tensor_.bytes > 0) std::memcpy(slot.value(), slots_[s].value(), tensor_.bytes);
        slot.state->version = slots_[s].state->version;
        slot.state->p = slots_[s].state->p;
      }
    }
    fresh.push_back(slot);
  }
  slots_ = std::move(fresh);
  slot_shared_.assign(slots_.size(), 0);
  private_ = std::move(area);
  shared_ = SlotArea();
  readers_.clear();
  remote_.clear();
  rank_ = rank;
  in_ = std::move(in_neighbors);
  out_ = std::move(out_neighbors);
  topology_ = std::move(topology);
  slot_holder_.assign(static_cast<size_t>(size), kFree);
  slot_cv_.notify_all();
}

int Window::SlotOf(int rank) const {
  const auto it = std::lower_bound(in_.begin(), in_.end(), rank);
  return it != in_.end() && *it == rank ? static_cast<int>(it - in_.begin()) : -1;
}

void Window::CommitShadow(int slot, double weight, bool count_version, bool has_p, double p) {
  const Slot& s = slots_[static_cast<size_t>(slot)];
  if (weight != 1.0 && tensor_.numel > 0) ops::Scale(s.other(), s.other(), weight, tensor_.numel, tensor_.dtype);
  LockSlot(s, in_[static_cast<size_t>(slot)], "a window buffer's lock");
  s.state->current.store(s.state->current.load(std::memory_order_relaxed) ^ 1u, std::memory_order_release);
  if (count_version) ++s.state->version;
  if (has_p) s.state->p = p;
  s.state->lock.Unlock();
}

void Window::CommitCopy(int slot, const void* data, double weight) {
  const Slot& s = slots_[static_cast<size_t>(slot)];
  LockSlot(s, in_[static_cast<size_t>(slot)], "a window buffer's lock");
  SlotGuard guard(s);
  if (tensor_.numel > 0) ops::Scale(s.value(), data, weight, tensor_.numel, tensor_.dtype);
  ++s.state->version;
}

void Window::Accumulate(int slot, const void* data, double weight, bool has_p, double p) {
  const Slot& s = slots_[static_cast<size_t>(slot)];
  LockSlot(s, in_[static_cast<size_t>(slot)], "a window buffer's lock");
  SlotGuard guard(s);
  if (tensor_.numel > 0) ops::Axpy(s.value(), data, weight, tensor_.numel, tensor_.dtype);
  if (has_p) s.state->p += p;
}

const void* Window::StageForSend(const void* data, size_t bytes) {
  if (send_stage_bytes_ < bytes) {
    for (auto& buffer : send_stage_) buffer.reset(new char[bytes]);
    send_stage_bytes_ = bytes;
  }
  char* stage = send_stage_[send_turn_].get();
  send_turn_ ^= 1;
  std::memcpy(stage, data, bytes);
  return stage;
}

void Window::AbandonSendStage() {
  for (auto& buffer : send_stage_) {
    if (buffer) Quarantine(std::shared_ptr<char[]>(buffer.release()));
  }
  send_stage_bytes_ = 0;
}

void Window::Snapshot(void* dst) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device_) {
    device_->ToHost(dst, false);
  } else if (tensor_.bytes > 0) {
    std::memcpy(dst, tensor_.data, tensor_.bytes);
  }
}

void Window::Update(const UpdateWeights& args, bool with_p, const char* what) {
  // Which buffers take part, with which weights.
  std::vector<int> slots;
  std::vector<double> weights;
  double self_weight = 1.0;
  bool uniform = false;
  if (args.use_weights) {
    self_weight = args.self_weight;
    for (size_t i = 0; i < args.ranks.size(); ++i) {
      const int slot = SlotOf(args.ranks[i]);
      STARLING_CHECK_ARG(slot >= 0, "rank ", args.ranks[i], " is not an in-neighbor of rank ", rank_,
                         " in window '", name_, "'");
      slots.push_back(slot);
      weights.push_back(args.weights[i]);
    }
  } else if (topology_->weighted) {
    const topology::NeighborWeights w = topology_->graph->recv_weights(rank_);
    self_weight = w.self_weight;
    for (size_t i = 0; i < w.ranks.size(); ++i) {
      slots.push_back(SlotOf(w.ranks[i]));
      weights.push_back(w.weights[i]);
    }
  } else {
    uniform = true;
    for (size_t i = 0; i < in_.size(); ++i) slots.push_back(static_cast<int>(i));
  }
  std::vector<int> used_ranks;
  for (int slot : slots) used_ranks.push_back(in_[static_cast<size_t>(slot)]);
  if (args.require_mutex) LockOwnSlots(used_ranks, what);
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    // Every slot's lock, in slot order (nobody holds one while waiting for another):
    // the versions of all of them are reset.
    std::vector<SlotGuard> guards;
    guards.reserve(slots_.size());
    for (size_t s = 0; s < slots_.size(); ++s) {
      LockSlot(slots_[s], in_[s], "a window buffer's lock");
      guards.emplace_back(slots_[s]);
    }
    std::vector<const void*> inputs;
    for (int slot : slots) inputs.push_back(slots_[static_cast<size_t>(slot)].value());
    const int k = static_cast<int>(inputs.size());
    if (tensor_.numel > 0) {
      // A device tensor is combined in a pinned host copy (after the caller's stream).
      device::PooledBuffer staged;
      void* data = tensor_.data;
      if (device_) {
        staged = device_->gpu().TakePinned(tensor_.bytes);
        data = staged.data();
        device_->ToHost(data, true);
      }
      // Readers on this host copy the tensor under this lock: none sees half of it.
      TensorGuard readers(device_ || readers_.empty() ? nullptr : shared_.tensor_state(), rank_, kSelf,
                          static_cast<int>(slot_holder_.size()), checks_,
                          "window_update's lock on its tensor (held by a rank getting it)");
      if (uniform) {
        ops::UniformAverage(data, data, inputs.data(), k, tensor_.numel, tensor_.dtype);
      } else {
        ops::WeightedSum(data, data, self_weight, inputs.data(), weights.data(), k, tensor_.numel, tensor_.dtype);
      }
      if (device_) device_->FromHost(data);
    }
    if (with_p) {
      double p = uniform ? p_ : self_weight * p_;
      for (size_t i = 0; i < slots.size(); ++i)
        p += (uniform ? 1.0 : weights[i]) * slots_[static_cast<size_t>(slots[i])].state->p;
      p_ = uniform ? p / (k + 1) : p;
    }
    for (size_t s = 0; s < slots_.size(); ++s) {
      slots_[s].state->version = 0;
      Count(s);
    }
    CountReads();
    if (args.reset) {
      for (int slot : slots) {
        const Slot& s = slots_[static_cast<size_t>(slot)];
        std::memset(s.value(), 0, std::max<size_t>(tensor_.bytes, 1));
        s.state->p = 0.0;
      }
    }
  } catch (...) {
    if (args.require_mutex) UnlockOwnSlots(used_ranks);
    throw;
  }
  if (args.require_mutex) UnlockOwnSlots(used_ranks);
}

std::vector<int64_t> Window::Versions() {
  std::vector<int64_t> versions;
  for (size_t s = 0; s < slots_.size(); ++s) {
    LockSlot(slots_[s], in_[s], "a window buffer's lock");
    SlotGuard guard(slots_[s]);
    versions.push_back(slots_[s].state->version);
    Count(s);
  }
  CountReads();
  return versions;
}

void Window::CountReads() {
  for (size_t i = 0; i < readers_.size(); ++i) {
    const uint64_t bytes = shared_.read_count(i)->exchange(0, std::memory_order_relaxed);
    if (bytes != 0 && sent_) sent_(readers_[i], bytes);
  }
}

void Window::Count(size_t s) {
  const uint64_t bytes = slots_[s].state->bytes_in;
  if (bytes == 0) return;
  slots_[s].state->bytes_in = 0;
  if (received_) received_(in_[s], bytes);
}

void Window::CountReceived() {
  for (size_t s = 0; s < slots_.size(); ++s) {
    LockSlot(slots_[s], in_[s], "a window buffer's lock");
    SlotGuard guard(slots_[s]);
    Count(s);
  }
  CountReads();
}

double Window::p() {
  std::lock_guard<std::mutex> lock(mutex_);
  return p_;
}

void Window::set_p(double p) {
  std::lock_guard<std::mutex> lock(mutex_);
  p_ = p;
}

void Window::ScaleP(double factor) {
  std::lock_guard<std::mutex> lock(mutex_);
  p_ *= factor;
}

const Slot* Window::SharedSlotOf(int rank) const {
  if (!shared_.shared()) return nullptr;
  const int slot = SlotOf(rank);
  if (slot < 0 || !slot_shared_[static_cast<size_t>(slot)]) return nullptr;
  return &slots_[static_cast<size_t>(slot)];
}

bool Window::TryLockSlot(int rank, int holder) {
  if (const Slot* shared = SharedSlotOf(rank)) {
    uint32_t expected = kMutexFree;
    return shared->state->mutex.value.compare_exchange_strong(expected, holder == kSelf ? kMutexOwner : kMutexOrigin,
                                                              std::memory_order_seq_cst);
  }
  std::lock_guard<std::mutex> lock(slot_mutex_);
  int& slot = slot_holder_[static_cast<size_t>(rank)];
  if (slot != kFree) return false;
  slot = holder;
  return true;
}

bool Window::UnlockSlot(int rank, int holder) {
  if (const Slot* shared = SharedSlotOf(rank)) {
    transport::shm::SharedCounter& mutex = shared->state->mutex;
    uint32_t expected = holder == kSelf ? kMutexOwner : kMutexOrigin;
    if (!mutex.value.compare_exchange_strong(expected, kMutexFree, std::memory_order_seq_cst)) return false;
    if (mutex.sleepers.load(std::memory_order_seq_cst) != 0) transport::shm::FutexWakeAll(mutex.value);
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(slot_mutex_);
    int& slot = slot_holder_[static_cast<size_t>(rank)];
    if (slot != holder) return false;
    slot = kFree;
  }
  slot_cv_.notify_all();
  return true;
}

int Window::SlotHolder(int rank) {
  if (const Slot* shared = SharedSlotOf(rank)) {
    const uint32_t v = shared->state->mutex.value.load(std::memory_order_acquire);
    return v == kMutexFree ? kFree : v == kMutexOwner ? kSelf : rank;
  }
  std::lock_guard<std::mutex> lock(slot_mutex_);
  return slot_holder_[static_cast<size_t>(rank)];
}

void Window::LockOwnSlots(const std::vector<int>& ranks, const char* what) {
  HolderCheck check;  // made at the first wait
  std::vector<int> sorted = ranks;  // a fixed order avoids lock-order deadlocks
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> taken;
  try {
    for (int r : sorted) {
      while (!TryLockSlot(r, kSelf)) {
        // Wait up to 10 ms for a release, then let the checks look at the holder.
        if (const Slot* shared = SharedSlotOf(r)) {
          const uint32_t seen = shared->state->mutex.value.load(std::memory_order_acquire);
          if (seen != kMutexFree) AwaitMutex(*shared, seen, 0.01);
        } else {
          std::unique_lock<std::mutex> lock(slot_mutex_);
          int& slot = slot_holder_[static_cast<size_t>(r)];
          slot_cv_.wait_for(lock, std::chrono::milliseconds(10), [&slot] { return slot == kFree; });
        }
        if (TryLockSlot(r, kSelf)) break;
        const int holder = SlotHolder(r);
        if (holder == kFree) continue;
        if (!check && checks_) check = checks_(what, false);
        if (check) check(holder);
      }
      taken.push_back(r);
    }
  } catch (...) {
    UnlockOwnSlots(taken);
    throw;
  }
}

void Window::UnlockOwnSlots(const std::vector<int>& ranks) {
  for (int r : ranks) UnlockSlot(r, kSelf);
}

}  // namespace starling::windows
