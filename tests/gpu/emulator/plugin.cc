// The exported surface: starling_device_plugin_v1() (the table of plugin_abi.h) and the
// starling_emu_* test helpers of emulator.h. Setup, identity and memory entries live here;
// streams, events, kernels and NCCL in their own files.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "common.h"
#include "emulator.h"
#include "event.h"
#include "impl/device/plugin_abi.h"
#include "kernels.h"
#include "memory.h"
#include "nccl.h"
#include "stream.h"

namespace starling::emu {
namespace {

constexpr unsigned kDeviceKinds = (1u << STARLING_MEMORY_DEVICE) | (1u << STARLING_MEMORY_MANAGED);
constexpr unsigned kPinnedKinds = 1u << STARLING_MEMORY_PINNED;

int Init() {
  const Settings& s = GetSettings();
  if (!s.settings_error.empty()) return Fail("init: %s", s.settings_error.c_str());
  if (s.devices == 0) return Fail("init: no CUDA-capable device (emulated: STARLING_EMU_DEVICES=0)");
  return 0;
}

const char* Describe() {
  static const std::string text = [] {
    const Settings& s = GetSettings();
    return Format("emulated device (host memory), %d device%s, stream delays up to %d us", s.devices,
                  s.devices == 1 ? "" : "s", s.delay_us);
  }();
  return text.c_str();
}

int DeviceCount(int* count) {
  if (count == nullptr) return Fail("device_count: count is NULL");
  *count = GetSettings().devices;
  return 0;
}

int SetDevice(int device) {
  if (!ValidDevice(device)) return Fail("set_device: invalid device %d (%d emulated)", device, GetSettings().devices);
  SetCurrentDevice(device);
  UseDevice(device);  // cudaSetDevice initializes the device's primary context (CUDA 12+)
  return 0;
}

// Unique per (host, device) by default. STARLING_EMU_IDENTITY lets a test say which ranks
// share a physical GPU (same string) and which own one (different strings).
int DeviceIdentity(int device, char* out, size_t size) {
  if (!ValidDevice(device)) return Fail("device_identity: invalid device %d", device);
  if (out == nullptr) return Fail("device_identity: out is NULL");
  std::string id;
  const std::string& list = GetSettings().identity;
  if (list.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    id = Format("emu-%s-%d", host, device);
  } else {
    std::vector<std::string> entries;
    size_t start = 0;
    for (size_t comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1)
      entries.push_back(list.substr(start, comma - start));
    entries.push_back(list.substr(start));
    id = static_cast<size_t>(device) < entries.size() ? entries[device] : Format("%s-dev%d", entries.back().c_str(), device);
    // "%r": the launcher's rank, so that one setting for all ranks gives each its own GPU.
    for (size_t at; (at = id.find("%r")) != std::string::npos;) id.replace(at, 2, LauncherRank());
  }
  if (id.size() + 1 > size) return Fail("device_identity: %zu bytes are too few for \"%s\"", size, id.c_str());
  std::memcpy(out, id.c_str(), id.size() + 1);
  return 0;
}

int PointerKind(const void* ptr, int* kind, int* device) {
  if (kind == nullptr || device == nullptr) return Fail("pointer_kind: kind or device is NULL");
  const Allocation a = Lookup(ptr);
  *kind = a.kind;
  *device = a.device;
  return 0;
}

int DeviceAlloc(int device, size_t bytes, void** ptr) {
  if (!ValidDevice(device)) return Fail("device_alloc: invalid device %d", device);
  UseDevice(device);
  return Allocate("device_alloc", STARLING_MEMORY_DEVICE, device, bytes, ptr);
}

// cudaFree and cudaFreeHost wait for the device to be idle; so do these, which also keeps
// a queued task from touching freed memory.
int DeviceFree(void* ptr) {
  SynchronizeAllStreams();
  UseDevice(AllocationContext(ptr));
  return Release("device_free", ptr, kDeviceKinds);
}

int HostAlloc(int device, size_t bytes, void** ptr) {
  if (!ValidDevice(device)) return Fail("host_alloc: invalid device %d", device);
  UseDevice(device);
  return Allocate("host_alloc", STARLING_MEMORY_PINNED, device, bytes, ptr);
}

int HostFree(void* ptr) {
  SynchronizeAllStreams();
  UseDevice(AllocationContext(ptr));
  return Release("host_free", ptr, kPinnedKinds);
}

int StreamCreate(int device, void** stream) { return CreateStream("stream_create", device, stream); }
int StreamDestroy(void* stream) { return DestroyStream("stream_destroy", stream); }

int StreamSynchronize(void* handle) {
  auto stream = ResolveStream("stream_synchronize", handle);
  return stream ? stream->Synchronize("stream_synchronize") : 1;
}

int NcclStatus(void* comm, int* state) { return NcclCommStatus(comm, state); }

const starling_device_plugin_t* Table() {
  static const starling_device_plugin_t table = [] {
    starling_device_plugin_t t;
    std::memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.abi_version = STARLING_DEVICE_ABI_VERSION;
    t.last_error = LastError;
    t.init = Init;
    t.describe = Describe;
    t.device_count = DeviceCount;
    t.set_device = SetDevice;
    t.device_identity = DeviceIdentity;
    t.pointer_kind = PointerKind;
    t.device_alloc = DeviceAlloc;
    t.device_free = DeviceFree;
    t.host_alloc = HostAlloc;
    t.host_free = HostFree;
    t.stream_create = StreamCreate;
    t.stream_destroy = StreamDestroy;
    t.stream_synchronize = StreamSynchronize;
    t.event_create = EventCreate;
    t.event_destroy = EventDestroy;
    t.event_record = EventRecord;
    t.event_query = EventQuery;
    t.event_synchronize = EventSynchronize;
    t.stream_wait_event = StreamWaitEvent;
    t.memcpy_async = MemcpyAsync;
    t.reduce = Reduce;
    t.divide = Divide;
    t.weighted_sum = WeightedSum;
    t.convert = Convert;
    t.nccl_load = NcclLoad;
    t.nccl_describe = NcclDescribe;
    t.nccl_unique_id = NcclUniqueId;
    t.nccl_comm_init = NcclCommInit;
    t.nccl_comm_destroy = NcclCommDestroy;
    t.nccl_comm_abort = NcclCommAbort;
    t.nccl_all_reduce = NcclAllReduce;
    t.nccl_broadcast = NcclBroadcast;
    t.nccl_all_gather = NcclAllGather;
    t.nccl_group_start = NcclGroupStart;
    t.nccl_group_end = NcclGroupEnd;
    t.nccl_send = NcclSend;
    t.nccl_recv = NcclRecv;
    t.nccl_comm_status = NcclStatus;
    t.stream_is_capturing = StreamIsCapturing;
    t.nccl_reduce_scatter = NcclReduceScatter;
    return t;
  }();
  return &table;
}

}  // namespace
}  // namespace starling::emu

using namespace starling::emu;

extern "C" {

STARLING_EMU_API const starling_device_plugin_t* starling_device_plugin_v1(void) { return Table(); }

int starling_emu_alloc(int device, size_t bytes, void** ptr) { return DeviceAlloc(device, bytes, ptr); }

int starling_emu_alloc_managed(int device, size_t bytes, void** ptr) {
  if (!ValidDevice(device)) return Fail("starling_emu_alloc_managed: invalid device %d", device);
  return Allocate("starling_emu_alloc_managed", STARLING_MEMORY_MANAGED, device, bytes, ptr);
}

int starling_emu_free(void* ptr) {
  SynchronizeAllStreams();
  return Release("starling_emu_free", ptr, kDeviceKinds | kPinnedKinds);
}

int starling_emu_memcpy(void* dst, const void* src, size_t bytes) {
  const char* fn = "starling_emu_memcpy";
  if (CheckCopyable(fn, "dst", dst, bytes) != 0 || CheckCopyable(fn, "src", src, bytes) != 0) return 1;
  if (bytes != 0) std::memmove(dst, src, bytes);
  return 0;
}

int starling_emu_stream_create(int device, void** stream) { return CreateStream("starling_emu_stream_create", device, stream); }
int starling_emu_stream_destroy(void* stream) { return DestroyStream("starling_emu_stream_destroy", stream); }

int starling_emu_sleep_on_stream(void* handle, int microseconds) {
  const char* fn = "starling_emu_sleep_on_stream";
  auto stream = ResolveStream(fn, handle);
  if (!stream) return 1;
  if (microseconds < 0) return Fail("%s: %d microseconds", fn, microseconds);
  return stream->Submit(fn, [microseconds]() -> std::string {
    std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
    return "";
  });
}

int starling_emu_fill_on_stream(void* handle, void* dst, const void* src, size_t bytes) {
  const char* fn = "starling_emu_fill_on_stream";
  auto stream = ResolveStream(fn, handle);
  if (!stream) return 1;
  if (CheckCopyable(fn, "dst", dst, bytes) != 0 || CheckCopyable(fn, "src", src, bytes) != 0) return 1;
  const char* s = static_cast<const char*>(src);
  auto data = std::make_shared<std::vector<char>>(s, s + bytes);  // taken now: src may be a temporary
  return stream->Submit(fn, [dst, data]() -> std::string {
    if (!data->empty()) std::memcpy(dst, data->data(), data->size());
    return "";
  });
}

int starling_emu_fail_on_stream(void* handle, const char* message) {
  const char* fn = "starling_emu_fail_on_stream";
  auto stream = ResolveStream(fn, handle);
  if (!stream) return 1;
  std::string text = message != nullptr && *message != '\0' ? message : "injected failure";
  return stream->Submit(fn, [text]() { return text; });
}

int starling_emu_stream_synchronize(void* stream) { return StreamSynchronize(stream); }

int starling_emu_stream_begin_capture(void* stream) {
  return SetCapture("starling_emu_stream_begin_capture", stream, true);
}

int starling_emu_stream_end_capture(void* stream) { return SetCapture("starling_emu_stream_end_capture", stream, false); }

int starling_emu_live_allocations(void) { return static_cast<int>(LiveAllocations()); }

unsigned starling_emu_context_devices(void) { return ContextDevices(); }

size_t starling_emu_device_bytes_in_use(int device) { return DeviceBytesInUse(device); }

size_t starling_emu_pinned_bytes_in_use(void) { return PinnedBytesInUse(); }

int starling_emu_concurrent_nccl_ops(void) { return NcclConcurrentOps(); }
int starling_emu_nccl_calls(const char* fn) { return NcclCalls(fn); }

const char* starling_emu_last_error(void) { return LastError(); }

}  // extern "C"
