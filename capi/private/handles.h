// Handle tables: the C ABI hands out opaque handles that encode a 64-bit id, never a
// pointer. Ids are never reused, so a freed or destroyed handle is always recognised
// (no double free, no use after free) and a NULL handle is id 0, which is never issued.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "impl/common/error.h"

namespace starling::capi {

template <typename Object, typename Handle>
class HandleTable {
 public:
  explicit HandleTable(const char* kind) : kind_(kind) {}

  Handle Add(std::shared_ptr<Object> object) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t id = next_id_++;
    objects_.emplace(id, std::move(object));
    return reinterpret_cast<Handle>(static_cast<uintptr_t>(id));
  }

  std::shared_ptr<Object> Get(Handle handle) const {
    const uint64_t id = Id(handle);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(id);
    if (it == objects_.end()) ThrowUnknown(id);
    return it->second;
  }

  // Removes the handle and returns the object (the caller finishes tearing it down).
  std::shared_ptr<Object> Take(Handle handle) {
    const uint64_t id = Id(handle);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = objects_.find(id);
    if (it == objects_.end()) ThrowUnknown(id);
    std::shared_ptr<Object> object = std::move(it->second);
    objects_.erase(it);
    return object;
  }

 private:
  uint64_t Id(Handle handle) const {
    const auto id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    STARLING_CHECK(id != 0, Code::kInvalidHandle, kind_, " handle is NULL");
    return id;
  }

  [[noreturn]] void ThrowUnknown(uint64_t id) const {
    if (id < next_id_) Fail(Code::kInvalidHandle, kind_, " #", id, " was already freed or destroyed");
    Fail(Code::kInvalidHandle, kind_, " handle ", id, " is not a valid ", kind_, " (corrupt value?)");
  }

  const char* kind_;
  mutable std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<Object>> objects_;
};

}  // namespace starling::capi
