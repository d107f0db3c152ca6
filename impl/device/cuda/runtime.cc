// Setup, queries, memory, streams, events and copies over the CUDA runtime (statically
// linked: see CMakeLists.txt).
#include <atomic>
#include <string>

#include "impl/device/cuda/errors.h"
#include "impl/device/cuda/plugin.h"
#include "impl/device/plugin_abi.h"

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

}  // namespace

int OnStreamDevice(void* stream, const std::function<int()>& f) {
  if (stream == nullptr) return f();  // the legacy stream of the current device
  int device = 0;
  if (int rc = Check(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &device), "cudaStreamGetDevice")) return rc;
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
  // "0000:3b:00.0" is 13 bytes with its NUL.
  return Check(cudaDeviceGetPCIBusId(out, static_cast<int>(size), device), "cudaDeviceGetPCIBusId");
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
      *kind = STARLING_MEMORY_MANAGED;
      *device = attr.device;
      break;
    default: break;  // cudaMemoryTypeUnregistered: pageable host memory
  }
  return 0;
}

int DeviceAlloc(int device, size_t bytes, void** ptr) {
  *ptr = nullptr;
  return OnDevice(device, [&] { return Check(cudaMalloc(ptr, bytes), "cudaMalloc"); });
}

int DeviceFree(void* ptr) { return Check(cudaFree(ptr), "cudaFree"); }

int HostAlloc(size_t bytes, void** ptr) {
  *ptr = nullptr;
  // Portable: pinned for every device's context, not only the current one's.
  return Check(cudaHostAlloc(ptr, bytes, cudaHostAllocPortable), "cudaHostAlloc");
}

int HostFree(void* ptr) { return Check(cudaFreeHost(ptr), "cudaFreeHost"); }

int StreamCreate(int device, void** stream) {
  *stream = nullptr;
  return OnDevice(device, [&] {
    cudaStream_t s = nullptr;
    if (int rc = Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags")) return rc;
    *stream = s;
    return 0;
  });
}

int StreamDestroy(void* stream) {
  if (stream == nullptr) return Fail("stream_destroy: the default stream cannot be destroyed");
  return Check(cudaStreamDestroy(static_cast<cudaStream_t>(stream)), "cudaStreamDestroy");
}

int StreamSynchronize(void* stream) { return Check(cudaStreamSynchronize(ToStream(stream)), "cudaStreamSynchronize"); }

int EventCreate(int device, void** event) {
  *event = nullptr;
  return OnDevice(device, [&] {
    cudaEvent_t e = nullptr;
    if (int rc = Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags")) return rc;
    *event = e;
    return 0;
  });
}

int EventDestroy(void* event) { return Check(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy"); }

int EventRecord(void* event, void* stream) {
  return Check(cudaEventRecord(static_cast<cudaEvent_t>(event), ToStream(stream)), "cudaEventRecord");
}

int EventQuery(void* event) {
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) return 1;
  return Check(err, "cudaEventQuery") != 0 ? 2 : 0;
}

int EventSynchronize(void* event) {
  return Check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}

int StreamWaitEvent(void* stream, void* event) {
  return Check(cudaStreamWaitEvent(ToStream(stream), static_cast<cudaEvent_t>(event), 0), "cudaStreamWaitEvent");
}

int MemcpyAsync(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return 0;
  return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ToStream(stream)), "cudaMemcpyAsync");
}

}  // namespace starling::device::cuda
