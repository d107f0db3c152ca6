#include "impl/windows/window.h"

#include "impl/common/quarantine.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "impl/ops/reduce.h"

namespace starling::windows {

Window::Window(uint32_t id, std::string name, const TensorView& tensor, int rank, int size,
               std::vector<int> in_neighbors, std::vector<int> out_neighbors,
               std::shared_ptr<const runtime::TopologyState> topology, const void* initial,
               std::unique_ptr<device::HostAccess> device)
    : id_(id),
      name_(std::move(name)),
      tensor_(tensor),
      device_(std::move(device)),
      rank_(rank),
      in_(std::move(in_neighbors)),
      out_(std::move(out_neighbors)),
      topology_(std::move(topology)),
      slot_holder_(static_cast<size_t>(size), kFree) {
  const size_t bytes = std::max<size_t>(tensor_.bytes, 1);
  for (size_t i = 0; i < in_.size(); ++i) {
    buffers_.emplace_back(new char[bytes]);
    shadow_.emplace_back(new char[bytes]);
    if (initial == nullptr || tensor_.bytes == 0) {
      std::memset(buffers_.back().get(), 0, bytes);
    } else {
      std::memcpy(buffers_.back().get(), initial, tensor_.bytes);
    }
  }
  versions_.assign(in_.size(), 0);
  p_buffers_.assign(in_.size(), 0.0);
}

void Window::Reshape(int rank, int size, std::vector<int> in_neighbors, std::vector<int> out_neighbors,
                     std::shared_ptr<const runtime::TopologyState> topology, const std::vector<int>& old_to_new) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::lock_guard<std::mutex> slots(slot_mutex_);
  const size_t bytes = std::max<size_t>(tensor_.bytes, 1);
  std::vector<std::unique_ptr<char[]>> buffers, shadow;
  std::vector<int64_t> versions;
  std::vector<double> p_buffers;
  for (int r : in_neighbors) {
    int kept = -1;  // the old slot of new rank r, if r was an in-neighbor before
    for (size_t s = 0; s < in_.size(); ++s) {
      const int old = in_[s];
      if (old >= 0 && static_cast<size_t>(old) < old_to_new.size() && old_to_new[static_cast<size_t>(old)] == r)
        kept = static_cast<int>(s);
    }
    if (kept >= 0) {
      const auto k = static_cast<size_t>(kept);
      buffers.push_back(std::move(buffers_[k]));
      shadow.push_back(std::move(shadow_[k]));
      versions.push_back(versions_[k]);
      p_buffers.push_back(p_buffers_[k]);
      continue;
    }
    buffers.emplace_back(new char[bytes]);
    shadow.emplace_back(new char[bytes]);
    if (device_ || tensor_.bytes == 0) {
      std::memset(buffers.back().get(), 0, bytes);
    } else {
      std::memcpy(buffers.back().get(), tensor_.data, tensor_.bytes);
    }
    versions.push_back(0);
    p_buffers.push_back(0.0);
  }
  buffers_ = std::move(buffers);
  shadow_ = std::move(shadow);
  versions_ = std::move(versions);
  p_buffers_ = std::move(p_buffers);
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
  const auto s = static_cast<size_t>(slot);
  if (weight != 1.0 && tensor_.numel > 0)
    ops::Scale(shadow_[s].get(), shadow_[s].get(), weight, tensor_.numel, tensor_.dtype);
  std::lock_guard<std::mutex> lock(mutex_);
  std::swap(buffers_[s], shadow_[s]);
  if (count_version) ++versions_[s];
  if (has_p) p_buffers_[s] = p;
}

void Window::CommitCopy(int slot, const void* data, double weight) {
  const auto s = static_cast<size_t>(slot);
  std::lock_guard<std::mutex> lock(mutex_);
  if (tensor_.numel > 0) ops::Scale(buffers_[s].get(), data, weight, tensor_.numel, tensor_.dtype);
  ++versions_[s];
}

void Window::Accumulate(int slot, const void* data, double weight, bool has_p, double p) {
  const auto s = static_cast<size_t>(slot);
  std::lock_guard<std::mutex> lock(mutex_);
  if (tensor_.numel > 0) ops::Axpy(buffers_[s].get(), data, weight, tensor_.numel, tensor_.dtype);
  if (has_p) p_buffers_[s] += p;
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

void Window::Update(const UpdateWeights& args, bool with_p, const std::function<void(int holder)>& wait_check) {
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
  if (args.require_mutex) LockOwnSlots(used_ranks, wait_check);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<const void*> inputs;
    for (int slot : slots) inputs.push_back(buffers_[static_cast<size_t>(slot)].get());
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
        p += (uniform ? 1.0 : weights[i]) * p_buffers_[static_cast<size_t>(slots[i])];
      p_ = uniform ? p / (k + 1) : p;
    }
    std::fill(versions_.begin(), versions_.end(), 0);
    if (args.reset) {
      for (int slot : slots) {
        std::memset(buffers_[static_cast<size_t>(slot)].get(), 0, std::max<size_t>(tensor_.bytes, 1));
        p_buffers_[static_cast<size_t>(slot)] = 0.0;
      }
    }
  }
  if (args.require_mutex) UnlockOwnSlots(used_ranks);
}

std::vector<int64_t> Window::Versions() {
  std::lock_guard<std::mutex> lock(mutex_);
  return versions_;
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

bool Window::TryLockSlot(int rank, int holder) {
  std::lock_guard<std::mutex> lock(slot_mutex_);
  int& slot = slot_holder_[static_cast<size_t>(rank)];
  if (slot != kFree) return false;
  slot = holder;
  return true;
}

bool Window::UnlockSlot(int rank, int holder) {
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
  std::lock_guard<std::mutex> lock(slot_mutex_);
  return slot_holder_[static_cast<size_t>(rank)];
}

void Window::LockOwnSlots(const std::vector<int>& ranks, const std::function<void(int holder)>& wait_check) {
  std::vector<int> sorted = ranks;  // a fixed order avoids lock-order deadlocks
  std::sort(sorted.begin(), sorted.end());
  std::unique_lock<std::mutex> lock(slot_mutex_);
  std::vector<int> taken;
  for (int r : sorted) {
    int& slot = slot_holder_[static_cast<size_t>(r)];
    while (slot != kFree) {
      if (slot_cv_.wait_for(lock, std::chrono::milliseconds(10), [&slot] { return slot == kFree; })) break;
      const int holder = slot;
      lock.unlock();
      try {
        wait_check(holder);
      } catch (...) {
        lock.lock();
        for (int t : taken) slot_holder_[static_cast<size_t>(t)] = kFree;
        lock.unlock();
        slot_cv_.notify_all();
        throw;
      }
      lock.lock();
    }
    slot = kSelf;
    taken.push_back(r);
  }
}

void Window::UnlockOwnSlots(const std::vector<int>& ranks) {
  {
    std::lock_guard<std::mutex> lock(slot_mutex_);
    for (int r : ranks) {
      int& slot = slot_holder_[static_cast<size_t>(r)];
      if (slot == kSelf) slot = kFree;
    }
  }
  slot_cv_.notify_all();
}

}  // namespace starling::windows
