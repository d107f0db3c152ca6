// Emulated device memory: host memory handed out by device_alloc/host_alloc and recorded
// in a registry of address ranges, so that pointer_kind and the argument checks of copies
// and kernels can tell device, pinned and plain host memory apart (the way a driver does
// with unified addressing). Freed blocks are poisoned and kept a while in a quarantine, so
// a use after free is named as such instead of silently reading recycled heap memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace starling::emu {

struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;  // as requested (the block behind it is rounded up to 256)
  int kind = 0;      // STARLING_MEMORY_*; HOST for memory the registry does not know
  int device = -1;   // owner for DEVICE/MANAGED, else -1
  int context = -1;  // the device whose context allocated it (pinned memory too)
};

// bytes == 0 gives *ptr = nullptr, like cudaMalloc(0). kind: DEVICE, PINNED or MANAGED;
// `device` is the owner, or for PINNED the device current at the allocation. Device memory
// is finite with STARLING_EMU_DEVICE_MEMORY: beyond it, an out-of-memory failure.
int Allocate(const char* fn, int kind, int device, size_t bytes, void** ptr);
// The device whose context holds ptr's allocation (-1 if none): what freeing it touches.
int AllocationContext(const void* ptr);
// Bytes of device memory allocated on `device` and not freed.
size_t DeviceBytesInUse(int device);
// Pinned host memory allocated and not yet freed (bytes as requested).
size_t PinnedBytesInUse();
// Unregisters and poisons ptr, which must be the start of a live allocation of one of the
// kinds in kind_mask (bit 1 << kind). nullptr is accepted, like cudaFree(NULL).
int Release(const char* fn, void* ptr, unsigned kind_mask);
// The allocation containing p; an Allocation of kind HOST for anything else.
Allocation Lookup(const void* p);
size_t LiveAllocations();

// What [p, p + bytes) is: one live allocation, or plain host memory (kind HOST). False,
// with a message, for a range that straddles an allocation's end, overlaps one from
// outside, lies in freed emulated memory, or is NULL.
bool Classify(const void* p, size_t bytes, Allocation* out, std::string* why);

// Argument checks, returning 0 or Fail("<fn>: <arg> ..."). bytes == 0 passes.
// Copies: any live allocation or plain host memory.
int CheckCopyable(const char* fn, const char* arg, const void* p, size_t bytes);
// Kernels and NCCL buffers: device (or managed) memory of `device`.
int CheckDevice(const char* fn, const char* arg, const void* p, size_t bytes, int device);

}  // namespace starling::emu
