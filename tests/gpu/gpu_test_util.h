// Helpers for the GPU tests: tensors in (emulated, or real) CUDA memory next to host
// twins, so that every test can run an operation on both and compare the bytes. The
// staged path runs the CPU algorithms on pinned copies, so its results must equal the
// host path's bit for bit; the host path itself is checked against float64 references
// by tests/mpi.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>

#include "impl/device/plugin_abi.h"
#include "test_util.h"

namespace starling_test {

// The device the tests allocate on, through the same plugin table the core loads
// (STARLING_DEVICE_PLUGIN, else libstarling_cuda.so beside libstarling.so): the
// emulated device in CI, a real GPU elsewhere, with the same test code. dlopen of the
// path the core opens gives the same library, so both see one device.
// Emulator-only helpers (a sleep queued on a stream) are found by name; tests that
// need them skip on real hardware.
class TestDevice {
 public:
  static TestDevice& Get() {
    static TestDevice device;
    return device;
  }
  bool ok() const { return table_ != nullptr; }
  const std::string& error() const { return error_; }
  const starling_device_plugin_t& table() const { return *table_; }
  // This rank's device: 0, or with STARLING_TEST_GPU_PER_RANK=1 the local rank's GPU.
  int index() const { return index_; }
  int count() const { return count_; }
  const char* last_error() const { return table_ ? table_->last_error() : error_.c_str(); }
  bool emulated() const { return sleep_on_stream_ != nullptr; }
  int Alloc(int device, size_t bytes, void** ptr) const { return table_->device_alloc(device, bytes, ptr); }
  int Free(void* ptr) const { return table_->device_free(ptr); }
  // A synchronous copy in any direction.
  int Copy(void* dst, const void* src, size_t bytes) const {
    void* stream = nullptr;
    int rc = table_->stream_create(index_, &stream);
    if (rc == 0) rc = table_->memcpy_async(dst, src, bytes, stream);
    if (rc == 0) rc = table_->stream_synchronize(stream);
    if (stream) table_->stream_destroy(stream);
    return rc;
  }
  // Emulator only (returns -1 elsewhere): unified memory of `device`.
  int AllocManaged(int device, size_t bytes, void** ptr) const {
    return alloc_managed_ ? alloc_managed_(device, bytes, ptr) : -1;
  }
  // Emulator only (-1 elsewhere): bit d set when a CUDA context exists on device d.
  long ContextDevices() const { return context_devices_ ? static_cast<long>(context_devices_()) : -1; }
  // Emulator only (-1 elsewhere): NCCL operations of two communicators that overlapped.
  int ConcurrentNcclOps() const { return concurrent_nccl_ops_ ? concurrent_nccl_ops_() : -1; }
  // Emulator only (-1 elsewhere): calls of the NCCL entry `fn` ("nccl_send", ...) so far.
  int NcclCalls(const char* fn) const { return nccl_calls_ ? nccl_calls_(fn) : -1; }
  // Emulator only (0 elsewhere): device memory in use on `device`.
  size_t DeviceBytesInUse(int device) const { return device_bytes_in_use_ ? device_bytes_in_use_(device) : 0; }
  // Emulator only (returns -1 elsewhere): work queued after it starts that much later.
  int SleepOnStream(void* stream, int microseconds) const {
    return sleep_on_stream_ ? sleep_on_stream_(stream, microseconds) : -1;
  }
  // Emulator only (-1 elsewhere): cudaStreamBeginCapture / cudaStreamEndCapture.
  // Emulator only (0 elsewhere): pinned host memory in use.
  size_t PinnedBytesInUse() const { return pinned_bytes_in_use_ ? pinned_bytes_in_use_() : 0; }
  int BeginCapture(void* stream) const { return begin_capture_ ? begin_capture_(stream) : -1; }
  int EndCapture(void* stream) const { return end_capture_ ? end_capture_(stream) : -1; }

 private:
  TestDevice() {
    std::string path;
    if (const char* env = std::getenv("STARLING_DEVICE_PLUGIN"); env && *env) {
      path = env;
    } else {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(&starling_get_version), &info) && info.dli_fname) {
        path = info.dli_fname;
        path = path.substr(0, path.rfind('/') + 1) + "libstarling_cuda.so";
      }
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      error_ = "cannot load " + path;
      return;
    }
    auto entry = reinterpret_cast<starling_device_plugin_entry_t>(dlsym(handle, STARLING_DEVICE_PLUGIN_ENTRY));
    const starling_device_plugin_t* table = entry ? entry() : nullptr;
    if (!table || table->init() != 0 || table->device_count(&count_) != 0 || count_ < 1) {
      error_ = path + ": no usable device";
      return;
    }
    table_ = table;
    sleep_on_stream_ = reinterpret_cast<int (*)(void*, int)>(dlsym(handle, "starling_emu_sleep_on_stream"));
    alloc_managed_ = reinterpret_cast<int (*)(int, size_t, void**)>(dlsym(handle, "starling_emu_alloc_managed"));
    context_devices_ = reinterpret_cast<unsigned (*)()>(dlsym(handle, "starling_emu_context_devices"));
    concurrent_nccl_ops_ = reinterpret_cast<int (*)()>(dlsym(handle, "starling_emu_concurrent_nccl_ops"));
    nccl_calls_ = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "starling_emu_nccl_calls"));
    device_bytes_in_use_ = reinterpret_cast<size_t (*)(int)>(dlsym(handle, "starling_emu_device_bytes_in_use"));
    pinned_bytes_in_use_ = reinterpret_cast<size_t (*)()>(dlsym(handle, "starling_emu_pinned_bytes_in_use"));
    begin_capture_ = reinterpret_cast<int (*)(void*)>(dlsym(handle, "starling_emu_stream_begin_capture"));
    end_capture_ = reinterpret_cast<int (*)(void*)>(dlsym(handle, "starling_emu_stream_end_capture"));
    const char* per_rank = std::getenv("STARLING_TEST_GPU_PER_RANK");
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (per_rank && std::string(per_rank) == "1" && local) index_ = std::atoi(local) % count_;
    // STARLING_TEST_GPU_INDEX=d: every rank uses device d (a device other than 0).
    if (const char* fixed = std::getenv("STARLING_TEST_GPU_INDEX"); fixed && *fixed) index_ = std::atoi(fixed) % count_;
  }
  const starling_device_plugin_t* table_ = nullptr;
  int (*sleep_on_stream_)(void*, int) = nullptr;
  int (*alloc_managed_)(int, size_t, void**) = nullptr;
  unsigned (*context_devices_)() = nullptr;
  int (*concurrent_nccl_ops_)() = nullptr;
  int (*nccl_calls_)(const char*) = nullptr;
  size_t (*device_bytes_in_use_)(int) = nullptr;
  size_t (*pinned_bytes_in_use_)() = nullptr;
  int (*begin_capture_)(void*) = nullptr;
  int (*end_capture_)(void*) = nullptr;
  std::string error_;
  int index_ = 0;
  int count_ = 0;
};

// A host Buffer and a device tensor of the same dtype and shape.
struct DeviceBuffer {
  Buffer host;
  void* device = nullptr;
  DLTensor t{};  // the device view

  DeviceBuffer(Kind k, std::vector<int64_t> shape, int device_index = -1) : host(k, std::move(shape)) {
    const TestDevice& dev = TestDevice::Get();
    if (device_index < 0) device_index = dev.index();
    const size_t bytes = std::max<size_t>(host.numel() * KindSize(k), 1);
    EXPECT_EQ(dev.Alloc(device_index, bytes, &device), 0) << dev.last_error();
    t = host.t;
    t.data = device;
    t.device = {kDLCUDA, device_index};
  }
  ~DeviceBuffer() {
    if (device) {
      EXPECT_EQ(TestDevice::Get().Free(device), 0) << TestDevice::Get().last_error();
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  size_t bytes() const { return host.numel() * KindSize(host.kind); }
  void Upload() {
    ASSERT_EQ(TestDevice::Get().Copy(device, host.bytes(), bytes()), 0) << TestDevice::Get().last_error();
  }
  // The device contents (the host twin is left alone).
  std::vector<char> Download() const {
    std::vector<char> out(bytes());
    EXPECT_EQ(TestDevice::Get().Copy(out.data(), device, bytes()), 0) << TestDevice::Get().last_error();
    return out;
  }
  // Fills host and device with Value(kind, rank, i, salt).
  void Fill(int rank, int salt) {
    for (size_t i = 0; i < host.numel(); ++i) host.set(i, Value(host.kind, rank, i, salt));
    Upload();
  }
};

// The GPU tests need a device (the emulator in CI): without one they fail loudly.
class GpuEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_TRUE(TestDevice::Get().ok()) << TestDevice::Get().error()
                                        << " (set STARLING_DEVICE_PLUGIN to the emulated device, or run on a GPU)";
  }
};
inline ::testing::Environment* const kGpuEnvironment = ::testing::AddGlobalTestEnvironment(new GpuEnvironment);

// On the NCCL path (tests registered with STARLING_TEST_TOLERANT=1) results may differ
// from the host path's in rounding: NCCL sums in its own order, senders apply
// destination weights before sending, uniform averages multiply by 1/(k+1). Floats are
// then compared within Tolerance() and integers within 1.
inline bool Tolerant() {
  const char* v = std::getenv("STARLING_TEST_TOLERANT");
  return v != nullptr && std::string(v) == "1";
}

inline void ExpectClose(const DeviceBuffer& d, const std::string& what) {
  const std::vector<char> got = d.Download();
  if (got.empty()) return;
  Buffer device_copy(d.host.kind, d.host.shape);
  std::memcpy(device_copy.bytes(), got.data(), got.size());
  for (size_t i = 0; i < d.host.numel(); ++i) {
    const double want = d.host.get(i), value = device_copy.get(i);
    const double tolerance = IsFloat(d.host.kind) ? Tolerance(d.host.kind, std::fabs(want) + 1.0) : 1.0;
    if (std::isnan(want) && std::isnan(value)) continue;
    if (std::fabs(value - want) <= tolerance) continue;
    ADD_FAILURE() << what << ": element " << i << " of " << d.host.numel() << " (" << KindName(d.host.kind)
                  << "): device " << value << ", host " << want;
    return;
  }
}

// Expects the device tensor to hold exactly the host twin's bytes (or, on the NCCL
// path, values within rounding of them).
inline void ExpectSameBytes(const DeviceBuffer& d, const std::string& what) {
  if (Tolerant()) return ExpectClose(d, what);
  const std::vector<char> got = d.Download();
  const char* want = reinterpret_cast<const char*>(d.host.storage.data());
  size_t first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      first = i;
      break;
    }
  if (first == got.size()) return;
  const size_t element = first / KindSize(d.host.kind);
  Buffer device_copy(d.host.kind, d.host.shape);
  std::memcpy(device_copy.bytes(), got.data(), got.size());
  ADD_FAILURE() << what << ": device result differs from the host path's from byte " << first << " (element "
                << element << " of " << d.host.numel() << ", " << KindName(d.host.kind)
                << "): device " << device_copy.get(element) << ", host " << d.host.get(element);
}

// Element counts around the staged path's chunk (tests run with
// STARLING_GPU_CHUNK_BYTES=4096): below, at and above one chunk, and several chunks.
inline std::vector<size_t> SizesAroundChunks(Kind k) {
  const size_t chunk = 4096 / KindSize(k);
  return {0, 1, 7, chunk - 1, chunk, chunk + 1, 3 * chunk + 5};
}

}  // namespace starling_test
