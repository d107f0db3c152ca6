// Reusable scratch memory for the executing operation: buffers are recycled instead of
// allocated per operation. Used only by whoever holds the engine's execution lock.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace starling::runtime {

class ScratchPool {
 public:
  class Buffer {
   public:
    Buffer() = default;
    Buffer(ScratchPool* pool, std::unique_ptr<char[]> data, size_t capacity)
        : pool_(pool), data_(std::move(data)), capacity_(capacity) {}
    Buffer(Buffer&& other) noexcept = default;
    Buffer& operator=(Buffer&& other) noexcept {
      Release();
      pool_ = other.pool_;
      data_ = std::move(other.data_);
      capacity_ = other.capacity_;
      return *this;
    }
    ~Buffer() { Release(); }
    char* data() const { return data_.get(); }
    size_t capacity() const { return capacity_; }

   private:
    void Release() {
      if (data_ && pool_) pool_->Return(std::move(data_), capacity_);
    }
    ScratchPool* pool_ = nullptr;
    std::unique_ptr<char[]> data_;
    size_t capacity_ = 0;
  };

  // A buffer of at least `bytes` (contents undefined), returned to the pool when the
  // Buffer is destroyed.
  Buffer Get(size_t bytes);
  size_t bytes_held() const { return held_; }  // memory owned by the pool now

 private:
  struct Slot {
    std::unique_ptr<char[]> data;
    size_t capacity;
  };
  void Return(std::unique_ptr<char[]> data, size_t capacity);

  std::vector<Slot> free_;
  size_t held_ = 0;
};

}  // namespace starling::runtime
