#include "memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "common.h"
#include "impl/device/plugin_abi.h"

namespace starling::emu {

namespace {

constexpr size_t kAlignment = 256;             // cudaMalloc's guarantee
constexpr unsigned char kFreshByte = 0xCD;     // new memory is garbage, as on a GPU
constexpr unsigned char kFreedByte = 0xDD;     // freed memory, while quarantined
constexpr size_t kQuarantineBytes = 64 << 20;  // freed blocks kept before going back to malloc
constexpr size_t kQuarantineBlocks = 1024;

const char* KindName(int kind) {
  switch (kind) {
    case STARLING_MEMORY_DEVICE: return "device memory";
    case STARLING_MEMORY_PINNED: return "pinned host memory";
    case STARLING_MEMORY_MANAGED: return "managed memory";
    default: return "host memory";
  }
}

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;   // by base
  std::map<uintptr_t, Allocation> freed;  // quarantined, by base
  std::deque<uintptr_t> freed_order;      // oldest first
  size_t freed_bytes = 0;
  std::map<int, size_t> device_bytes;  // live device memory by device
};

// Never destroyed: stream workers may still look pointers up while the process exits.
Registry& Reg() {
  static Registry* registry = new Registry;
  return *registry;
}

// The entry of `map` whose [base, base + bytes) contains p, or end().
std::map<uintptr_t, Allocation>::const_iterator Containing(const std::map<uintptr_t, Allocation>& map, uintptr_t p) {
  auto it = map.upper_bound(p);
  if (it == map.begin()) return map.end();
  --it;
  // A zero-byte block cannot exist (Allocate returns nullptr), so p == base is inside.
  return p < it->second.base + it->second.bytes ? it : map.end();
}

// True if [p, end) overlaps any entry of map.
bool Overlaps(const std::map<uintptr_t, Allocation>& map, uintptr_t p, uintptr_t end) {
  if (Containing(map, p) != map.end()) return true;
  auto it = map.upper_bound(p);  // first base > p
  return it != map.end() && it->first < end;
}

// Called with the lock held: drops the oldest quarantined blocks beyond the limits.
void TrimQuarantine(Registry& reg) {
  while (!reg.freed_order.empty() && (reg.freed_bytes > kQuarantineBytes || reg.freed_order.size() > kQuarantineBlocks)) {
    auto it = reg.freed.find(reg.freed_order.front());
    reg.freed_order.pop_front();
    reg.freed_bytes -= it->second.bytes;
    std::free(reinterpret_cast<void*>(it->second.base));
    reg.freed.erase(it);
  }
}

}  // namespace

int Allocate(const char* fn, int kind, int device, size_t bytes, void** ptr) {
  if (ptr == nullptr) return Fail("%s: ptr is NULL", fn);
  *ptr = nullptr;
  if (bytes == 0) return 0;
  if (bytes > SIZE_MAX - kAlignment) return Fail("%s: %zu bytes is too large", fn, bytes);
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  const size_t cap = GetSettings().device_memory;
  if (kind == STARLING_MEMORY_DEVICE) {
    Registry& reg = Reg();
    std::lock_guard<std::mutex> lock(reg.mu);
    size_t& used = reg.device_bytes[device];
    if (cap > 0 && rounded > cap - std::min(cap, used))
      return Fail("%s: out of memory: %zu bytes requested on emulated device %d, %zu of %zu in use "
                  "(STARLING_EMU_DEVICE_MEMORY)", fn, bytes, device, used, cap);
    used += rounded;  // reserved now; Release gives it back
  }
  void* block = std::aligned_alloc(kAlignment, rounded);
  if (block == nullptr) {
    if (kind == STARLING_MEMORY_DEVICE) {
      std::lock_guard<std::mutex> lock(Reg().mu);
      Reg().device_bytes[device] -= rounded;
    }
    return Fail("%s: out of memory allocating %zu bytes (emulated)", fn, bytes);
  }
  if (GetSettings().poison) std::memset(block, kFreshByte, rounded);
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(block);
  a.bytes = bytes;
  a.kind = kind;
  a.device = kind == STARLING_MEMORY_PINNED ? -1 : device;
  a.context = device;
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  // malloc may hand back a block that is still quarantined only if we freed it: we did
  // not (quarantined blocks are not freed), so the two maps never overlap.
  reg.live.emplace(a.base, a);
  *ptr = block;
  return 0;
}

int Release(const char* fn, void* ptr, unsigned kind_mask) {
  if (ptr == nullptr) return 0;
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  auto it = reg.live.find(p);
  if (it == reg.live.end()) {
    if (Containing(reg.freed, p) != reg.freed.end()) return Fail("%s: %p was already freed", fn, ptr);
    auto inside = Containing(reg.live, p);
    if (inside != reg.live.end())
      return Fail("%s: %p is inside the allocation at %p, not its start", fn, ptr,
                  reinterpret_cast<void*>(inside->second.base));
    return Fail("%s: %p was not allocated by the emulated device", fn, ptr);
  }
  const Allocation a = it->second;
  if ((kind_mask & (1u << a.kind)) == 0) return Fail("%s: %p is %s, freed by the wrong function", fn, ptr, KindName(a.kind));
  reg.live.erase(it);
  if (a.kind == STARLING_MEMORY_DEVICE)
    reg.device_bytes[a.device] -= (a.bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (GetSettings().poison) std::memset(ptr, kFreedByte, a.bytes);
  reg.freed.emplace(a.base, a);
  reg.freed_order.push_back(a.base);
  reg.freed_bytes += a.bytes;
  TrimQuarantine(reg);
  return 0;
}

Allocation Lookup(const void* p) {
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = Containing(reg.live, reinterpret_cast<uintptr_t>(p));
  if (it != reg.live.end()) return it->second;
  Allocation host;
  host.kind = STARLING_MEMORY_HOST;
  return host;
}

int AllocationContext(const void* ptr) {
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.live.find(reinterpret_cast<uintptr_t>(ptr));
  return it != reg.live.end() ? it->second.context : -1;
}

size_t DeviceBytesInUse(int device) {
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.device_bytes.find(device);
  return it != reg.device_bytes.end() ? it->second : 0;
}

size_t PinnedBytesInUse() {
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  size_t total = 0;
  for (const auto& [base, a] : reg.live)
    if (a.kind == STARLING_MEMORY_PINNED) total += a.bytes;
  return total;
}

size_t LiveAllocations() {
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.live.size();
}

bool Classify(const void* ptr, size_t bytes, Allocation* out, std::string* why) {
  *out = Allocation();
  if (bytes == 0) return true;
  if (ptr == nullptr) {
    *why = Format("is NULL (%zu bytes)", bytes);
    return false;
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p > UINTPTR_MAX - bytes) {
    *why = Format("%p + %zu bytes wraps around", ptr, bytes);
    return false;
  }
  const uintptr_t end = p + bytes;
  Registry& reg = Reg();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = Containing(reg.live, p);
  if (it != reg.live.end()) {
    const Allocation& a = it->second;
    if (end > a.base + a.bytes) {
      *why = Format("%p (%zu bytes) runs %zu bytes past the end of the %zu-byte allocation at %p", ptr, bytes,
                    static_cast<size_t>(end - (a.base + a.bytes)), a.bytes, reinterpret_cast<void*>(a.base));
      return false;
    }
    *out = a;
    return true;
  }
  if (Overlaps(reg.freed, p, end)) {
    *why = Format("%p (%zu bytes) is in freed emulated memory (use after free)", ptr, bytes);
    return false;
  }
  if (Overlaps(reg.live, p, end)) {
    *why = Format("%p (%zu bytes) starts in host memory but runs into an emulated allocation", ptr, bytes);
    return false;
  }
  out->kind = STARLING_MEMORY_HOST;
  return true;
}

int CheckCopyable(const char* fn, const char* arg, const void* p, size_t bytes) {
  Allocation a;
  std::string why;
  if (!Classify(p, bytes, &a, &why)) return Fail("%s: %s %s", fn, arg, why.c_str());
  return 0;
}

int CheckDevice(const char* fn, const char* arg, const void* p, size_t bytes, int device) {
  if (bytes == 0) return 0;
  Allocation a;
  std::string why;
  if (!Classify(p, bytes, &a, &why)) return Fail("%s: %s %s", fn, arg, why.c_str());
  if (a.kind != STARLING_MEMORY_DEVICE && a.kind != STARLING_MEMORY_MANAGED)
    return Fail("%s: %s %p (%zu bytes) is %s, not memory of emulated device %d (a host pointer passed as a device pointer?)",
                fn, arg, p, bytes, KindName(a.kind), device);
  // Managed memory is reachable from every device; device memory only from its own.
  if (a.kind == STARLING_MEMORY_DEVICE && a.device != device)
    return Fail("%s: %s %p is memory of emulated device %d, but the stream's device is %d", fn, arg, p, a.device, device);
  return 0;
}

}  // namespace starling::emu
