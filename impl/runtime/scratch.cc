#include "impl/runtime/scratch.h"

#include <algorithm>

namespace starling::runtime {
namespace {
constexpr size_t kMaxFreeSlots = 64;
}

ScratchPool::Buffer ScratchPool::Get(size_t bytes) {
  bytes = std::max<size_t>(bytes, 64);
  // Smallest free buffer that fits.
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i].capacity >= bytes && (best == free_.size() || free_[i].capacity < free_[best].capacity)) best = i;
  }
  if (best != free_.size()) {
    Slot slot = std::move(free_[best]);
    free_.erase(free_.begin() + static_cast<long>(best));
    return Buffer(this, std::move(slot.data), slot.capacity);
  }
  held_ += bytes;
  return Buffer(this, std::unique_ptr<char[]>(new char[bytes]), bytes);
}

void ScratchPool::Return(std::unique_ptr<char[]> data, size_t capacity) {
  if (free_.size() >= kMaxFreeSlots) {
    // Keep the pool bounded: drop the smallest buffer.
    auto smallest = std::min_element(free_.begin(), free_.end(),
                                      [](const Slot& a, const Slot& b) { return a.capacity < b.capacity; });
    held_ -= smallest->capacity;
    free_.erase(smallest);
  }
  free_.push_back(Slot{std::move(data), capacity});
}

}  // namespace starling::runtime
