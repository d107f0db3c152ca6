// Setup, queries, memory, streams, events and copies over the CUDA runtime (statically
// linked: see CMakeLists.txt).
#include <atomic>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "impl/device/cuda/errors.h"
#include "impl/device/cuda/plugin.h"
#include "impl/device/plugin_abi.h"
#include "impl/device/runtime_status.h"

namespace starling::device::cuda {
namespace {

// "13.0" from CUDA's 13000.
std::string VersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

struct InitResult {
  int status = 0;
  std::string message;      // on failure: why CUDA cannot be used
  std::string description;  // Describe() after Init()
};

InitResult Initialize() {
  InitResult r;
  int runtime = 0, driver = 0, count = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  const std::string runtime_name = "CUDA runtime " + VersionString(runtime);
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();
  const std::string detail = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
  if (err == cudaErrorInsufficientDriver && driver == 0) {
    r.message = "no CUDA driver (libcuda.so.1 not found; " + detail + ")";
  } else if (err == cudaErrorInsufficientDriver) {
    r.message = "CUDA driver " + VersionString(driver) + " is too old for " + runtime_name + " (" + detail + ")";
  } else if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    r.message = "no CUDA device (" + detail + ")";
  } else if (err != cudaSuccess) {
    r.message = "CUDA is not usable (" + detail + ")";
  }
  r.status = r.message.empty() ? 0 : 1;
  r.description = runtime_name + ", " +
                  (r.status == 0 ? "driver " + VersionString(driver) + ", " + std::to_string(count) +
                                       (count == 1 ? " device" : " devices")
                                 : r.message);
  return r;
}

std::atomic<const InitResult*> g_init{nullptr};

// The device the calling thread made current through SetDevice, or -1.
thread_local int t_device = -1;

// Runs f() with `device` current on this thread, then makes the previous device
// current again, but only one this thread chose itself: restoring CUDA's implicit
// device 0 would create a context (and take memory) on a GPU the process may not use.
template <class F>
int OnDevice(int device, F f) {
  int current = 0;
  if (int rc = Check(cudaGetDevice(&current), "cudaGetDevice")) return rc;
  if (current == device) return f();
  if (int rc = Check(cudaSetDevice(device), "cudaSetDevice")) return rc;
  const int rc = f();
  if (t_device >= 0) cudaSetDevice(current);  // best effort: f's status is the answer
  return rc;
}

// The device of every stream, event and allocation this plugin made, so that calls on
// them run with their device current (no context is ever created on a device by
// accident: a thread without one would get CUDA's device 0), without
// cudaStreamGetDevice (CUDA 12.8+ drivers only).
class Devices {
 public:
  void Add(const void* handle, int device) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    map_[handle] = device;
  }
  void Remove(const void* handle) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    map_.erase(handle);
  }
  int Find(const void* handle) const {  // -1: not ours
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = map_.find(handle);
    return it == map_.end() ? -1 : it->second;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<const void*, int> map_;
};

Devices& StreamDevices() {
  static Devices* d = new Devices;  // never destroyed: streams may be used during exit
  return *d;
}
Devices& AllocationDevices() {
  static Devices* d = new Devices;
  return *d;
}

// An event and the device it was created on (cudaEventRecord needs that device's stream).
struct Event {
  cudaEvent_t event;
  int device;
};
Event* AsEvent(void* handle) { return static_cast<Event*>(handle); }

// The device of a stream: ours from the map; another's (a caller's) through
// cudaStreamGetDevice where the driver has it (CUDA 12.8+), else -1.
int DeviceOfStream(void* stream) {
  const int device = StreamDevices().Find(stream);
  if (device >= 0 || stream == nullptr) return device;
  static const int driver = [] {
    int v = 0;
    cudaDriverGetVersion(&v);
    return v;
  }();
  int found = -1;
  if (driver >= 12080 && cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &found) != cudaSuccess) {
    cudaGetLastError();
    found = -1;
  }
  return found;
}

// f() on the handle's device when known, else on the current one.
template <class F>
int OnDeviceOf(int device, F f) {
  return device >= 0 ? OnDevice(device, f) : f();
}

}  // namespace

int OnStreamDevice(void* stream, const std::function<int()>& f) {
  if (stream == nullptr) return f();  // the legacy stream of the current device
  const int device = DeviceOfStream(stream);
  if (device < 0)
    return Fail("kernel launch: the stream is not one this plugin created, and this driver cannot tell its device");
  return OnDevice(device, f);
}

int Init() {
  static const InitResult result = Initialize();  // once, thread-safe
  g_init.store(&result);
  return result.status != 0 ? Fail(result.message) : 0;
}

const char* Describe() {
  const InitResult* r = g_init.load();
  return r != nullptr ? r->description.c_str() : "CUDA plugin (init not called)";
}

int DeviceCount(int* count) {
  *count = 0;
  return Check(cudaGetDeviceCount(count), "cudaGetDeviceCount");
}

int SetDevice(int device) {
  if (int rc = Check(cudaSetDevice(device), "cudaSetDevice")) return rc;
  t_device = device;
  return 0;
}

int DeviceIdentity(int device, char* out, size_t size) {
  if (out == nullptr || size == 0) return Fail("device_identity: no output buffer");
  // The UUID: unique across hosts (a PCI bus id repeats on every host, and host names
  // may repeat in containers). cudaGetDeviceProperties needs no context.
  cudaDeviceProp prop{};
  if (int rc = Check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties")) return rc;
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
    text += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
  }
  if (text.size() + 1 > size) return Fail("device_identity: " + std::to_string(size) + " bytes are too few");
  std::snprintf(out, size, "%s", text.c_str());
  return 0;
}

int PointerKind(const void* ptr, int* kind, int* device) {
  *kind = STARLING_MEMORY_HOST;
  *device = -1;
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err == cudaErrorInvalidValue) {  // a pointer the driver does not know: host memory
    cudaGetLastError();
    return 0;
  }
  if (int rc = Check(err, "cudaPointerGetAttributes")) return rc;
  switch (attr.type) {
    case cudaMemoryTypeHost: *kind = STARLING_MEMORY_PINNED; break;
    case cudaMemoryTypeDevice:
      *kind = STARLING_MEMORY_DEVICE;
      *device = attr.device;
      break;
    case cudaMemoryTypeManaged:
      // attr.device is the device current at the allocation, not where the memory
      // lives: every device may use managed memory (the core does not check it).
      *kind = STARLING_MEMORY_MANAGED;
      *device = attr.device;
      break;
    default: break;  // cudaMemoryTypeUnregistered: pageable host memory
  }
  return 0;
}

// Runs f() in the relaxed stream-capture mode: Starling's own allocations, made on its
// threads, must not invalidate a capture the application runs meanwhile in global mode
// (PyTorch's default), as they would otherwise (cudaThreadExchangeStreamCaptureMode).
template <class F>
int Relaxed(F f) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  const int rc = f();
  cudaThreadExchangeStreamCaptureMode(&mode);
  return rc;
}

int DeviceAlloc(int device, size_t bytes, void** ptr) {
  *ptr = nullptr;
  const int rc = OnDevice(device, [&] { return Relaxed([&] { return Check(cudaMalloc(ptr, bytes), "cudaMalloc"); }); });
  if (rc == 0 && *ptr != nullptr) AllocationDevices().Add(*ptr, device);
  return rc;
}

int DeviceFree(void* ptr) {
  const int device = AllocationDevices().Find(ptr);
  AllocationDevices().Remove(ptr);
  return OnDeviceOf(device, [&] { return Relaxed([&] { return Check(cudaFree(ptr), "cudaFree"); }); });
}

int HostAlloc(int device, size_t bytes, void** ptr) {
  *ptr = nullptr;
  // Portable: pinned for every device's context, not only the current one's. With
  // `device` current: on a thread without a context, cudaHostAlloc would create one on
  // device 0.
  const int rc = OnDevice(device, [&] {
    return Relaxed([&] { return Check(cudaHostAlloc(ptr, bytes, cudaHostAllocPortable), "cudaHostAlloc"); });
  });
  if (rc == 0 && *ptr != nullptr) AllocationDevices().Add(*ptr, device);
  return rc;
}

int HostFree(void* ptr) {
  const int device = AllocationDevices().Find(ptr);
  AllocationDevices().Remove(ptr);
  return OnDeviceOf(device, [&] { return Relaxed([&] { return Check(cudaFreeHost(ptr), "cudaFreeHost"); }); });
}

int StreamCreate(int device, void** stream) {
  *stream = nullptr;
  return OnDevice(device, [&] {
    cudaStream_t s = nullptr;
    if (int rc = Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) return rc;
    StreamDevices().Add(s, device);
    *stream = s;
    return 0;
  });
}

int StreamDestroy(void* stream) {
  if (stream == nullptr) return Fail("stream_destroy: the default stream cannot be destroyed");
  const int device = StreamDevices().Find(stream);
  StreamDevices().Remove(stream);
  return OnDeviceOf(device, [&] {
    return Check(cudaStreamDestroy(static_cast<cudaStream_t>(stream)), "cudaStreamDestroy");
  });
}

int StreamSynchronize(void* stream) {
  return OnDeviceOf(DeviceOfStream(stream),
                    [&] { return Check(cudaStreamSynchronize(ToStream(stream)), "cudaStreamSynchronize"); });
}

int StreamIsCapturing(void* stream, int device, int* capturing) {
  *capturing = 0;
  return OnDevice(device, [&] {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(ToStream(stream), &status);
    if (err == cudaErrorStreamCaptureImplicit) {  // the legacy stream, while another thread captures
      cudaGetLastError();                          // in global mode: using it would invalidate that
      *capturing = 1;
      return 0;
    }
    if (int rc = Check(err, "cudaStreamIsCapturing")) return rc;
    *capturing = status != cudaStreamCaptureStatusNone;  // active, or invalidated and not yet ended
    return 0;
  });
}

int EventCreate(int device, void** event) {
  *event = nullptr;
  return OnDevice(device, [&] {
    cudaEvent_t e = nullptr;
    if (int rc = Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags")) return rc;
    *event = new Event{e, device};
    return 0;
  });
}

int EventDestroy(void* event) {
  if (event == nullptr) return Fail("event_destroy: event is NULL");
  Event* e = AsEvent(event);
  const int rc = OnDevice(e->device, [&] { return Check(cudaEventDestroy(e->event), "cudaEventDestroy"); });
  delete e;
  return rc;
}

int EventRecord(void* event, void* stream) {
  Event* e = AsEvent(event);
  // NULL: the legacy stream of the event's device, which must be current for that.
  // Another stream must belong to the event's device too (cudaEventRecord requires it).
  const int stream_device = stream == nullptr ? e->device : DeviceOfStream(stream);
  if (stream_device >= 0 && stream_device != e->device)
    return Fail("cudaEventRecord: the stream is on cuda:" + std::to_string(stream_device) + " but the event on cuda:" +
                std::to_string(e->device) + " (pass a stream of the tensors' device: starling_set_cuda_stream)");
  const std::string what = "cudaEventRecord (is the stream on cuda:" + std::to_string(e->device) + "?)";
  return OnDevice(e->device, [&] { return Check(cudaEventRecord(e->event, ToStream(stream)), what.c_str()); });
}

int EventQuery(void* event) {
  Event* e = AsEvent(event);
  int answer = 2;
  const int rc = OnDevice(e->device, [&] {
    const cudaError_t err = cudaEventQuery(e->event);
    // NotReady is also left in the runtime's per-thread last-error slot: cleared here,
    // or the next kernel launch on this thread would report it (runtime_status.h).
    answer = EventQueryAnswer(err, cudaSuccess, cudaErrorNotReady, [] { cudaGetLastError(); });
    if (answer == 2) Check(err, "cudaEventQuery");
    return 0;
  });
  return rc != 0 ? 2 : answer;
}

int EventSynchronize(void* event) {
  Event* e = AsEvent(event);
  return OnDevice(e->device, [&] { return Check(cudaEventSynchronize(e->event), "cudaEventSynchronize"); });
}

int StreamWaitEvent(void* stream, void* event) {
  Event* e = AsEvent(event);
  const int device = stream == nullptr ? -1 : DeviceOfStream(stream);
  return OnDeviceOf(device, [&] {
    return Check(cudaStreamWaitEvent(ToStream(stream), e->event, 0), "cudaStreamWaitEvent");
  });
}

int MemcpyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return 0;
  return OnDeviceOf(DeviceOfStream(stream), [&] {
    return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ToStream(stream)), "cudaMemcpyAsync");
  });
}

}  // namespace starling::device::cuda
