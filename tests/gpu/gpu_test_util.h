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

#include "emulator/emulator.h"
#include "test_util.h"

namespace starling_test {

#define ASSERT_EMU(call) ASSERT_EQ((call), 0) << #call << ": " << starling_emu_last_error()

// A host Buffer and a device tensor of the same dtype and shape.
struct DeviceBuffer {
  Buffer host;
  void* device = nullptr;
  DLTensor t{};  // the device view

  DeviceBuffer(Kind k, std::vector<int64_t> shape, int device_index = 0) : host(k, std::move(shape)) {
    const size_t bytes = std::max<size_t>(host.numel() * KindSize(k), 1);
    EXPECT_EQ(starling_emu_alloc(device_index, bytes, &device), 0) << starling_emu_last_error();
    t = host.t;
    t.data = device;
    t.device = {kDLCUDA, device_index};
  }
  ~DeviceBuffer() {
    if (device) {
      EXPECT_EQ(starling_emu_free(device), 0) << starling_emu_last_error();
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  size_t bytes() const { return host.numel() * KindSize(host.kind); }
  void Upload() { ASSERT_EQ(starling_emu_memcpy(device, host.bytes(), bytes()), 0) << starling_emu_last_error(); }
  // The device contents (the host twin is left alone).
  std::vector<char> Download() const {
    std::vector<char> out(bytes());
    EXPECT_EQ(starling_emu_memcpy(out.data(), device, bytes()), 0) << starling_emu_last_error();
    return out;
  }
  // Fills host and device with Value(kind, rank, i, salt).
  void Fill(int rank, int salt) {
    for (size_t i = 0; i < host.numel(); ++i) host.set(i, Value(host.kind, rank, i, salt));
    Upload();
  }
};

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
