// What every part of the emulated device shares: the per-thread error message, the
// settings read from the environment, the per-thread current device, and dtype sizes.
// The emulator is a test tool: it implements the plugin table of
// impl/device/plugin_abi.h over host memory so that the core's GPU code runs in CI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace starling::emu {

// --- errors: every table function returns 0 or Fail(...), which stores the message
// for last_error() on the calling thread (the plugin ABI's convention).
int Fail(const std::string& message);
int Fail(const char* format, ...) __attribute__((format(printf, 1, 2)));
const char* LastError();
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Hex(const void* p);  // "0x7f..." for messages

// --- settings (read once, on first use).
struct Settings {
  int devices = 1;              // STARLING_EMU_DEVICES (0: a machine without a GPU)
  int delay_us = 0;             // STARLING_EMU_DELAY_US: each stream task sleeps 0..N us first
  bool no_nccl = false;         // STARLING_EMU_NO_NCCL=1: nccl_load fails as without libnccl
  double nccl_timeout_s = 60;   // STARLING_EMU_NCCL_TIMEOUT: bootstrap and per-wait limit
  bool poison = true;           // STARLING_EMU_POISON=0 disables the fill of new/freed memory
  std::string identity;         // STARLING_EMU_IDENTITY: comma list, one per device; %r = rank
  size_t device_memory = 0;     // STARLING_EMU_DEVICE_MEMORY: bytes of device memory per device (0: unbounded)
  int nccl_stall_rank = -1;     // STARLING_EMU_NCCL_STALL_RANK: this launcher rank's comm init never completes
  bool nccl_peer_loss_error = false;  // STARLING_EMU_NCCL_PEER_LOSS=error: a peer gone is an async error
  std::string settings_error;   // a malformed variable, reported by init()
};
const Settings& GetSettings();

// The device of the calling thread (set_device); 0 until set, like CUDA's.
int CurrentDevice();
void SetCurrentDevice(int device);
bool ValidDevice(int device);
// The rank the MPI launcher gave this process, or "0".
std::string LauncherRank();

// --- CUDA contexts: the runtime creates a device's primary context at the first call that
// needs one, on the device the call runs on. Every entry that would need a context calls
// this with that device, so tests can check that nothing touched a device the process was
// not asked to use (starling_emu_context_devices).
void UseDevice(int device);
unsigned ContextDevices();  // bit d: a context exists on device d

// --- the runtime's per-thread last-error slot (cudaGetLastError's): every failing runtime
// call leaves its code, cudaErrorNotReady from an event query included, until read.
enum : int { kRtSuccess = 0, kRtLaunchFailure = 719, kRtNotReady = 600 };
void SetRuntimeError(int code);
int TakeRuntimeError();  // returns the slot and clears it
const char* RuntimeErrorName(int code);

// --- dtypes (starling::DType values) and ops (ReduceOp values), without linking the core.
enum : int { kFloat16 = 0, kBFloat16, kFloat32, kFloat64, kInt8, kInt16, kInt32, kInt64, kUInt8, kNumDTypes };
enum : int { kSum = 0, kAverage = 1, kMin = 2, kMax = 3 };
size_t DTypeSize(int dtype);  // 0 for an unknown dtype
const char* DTypeName(int dtype);
// n elements of dtype in bytes; false on overflow or unknown dtype.
bool ElementBytes(size_t n, int dtype, size_t* bytes);

}  // namespace starling::emu
