// The CUDA plugin's implementations of the plugin table's entries (plugin_abi.h has
// their contracts), by file: runtime.cc (setup, memory, streams, events, copies),
// kernels.cu (the four kernels), nccl.cc (NCCL through dlopen). plugin.cc gathers them
// into the exported table.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace starling::device::cuda {

// stream NULL is the legacy default stream (plugin_abi.h), whatever the default-stream
// mode this file is compiled with.
inline cudaStream_t ToStream(void* stream) {
  return stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
}

// runtime.cc
// Runs f() with the stream's device current (the caller's current device is restored):
// kernels must be launched from their stream's device, and the core never changes an
// application thread's current device.
int OnStreamDevice(void* stream, const std::function<int()>& f);
int Init();
const char* Describe();
int DeviceCount(int* count);
int SetDevice(int device);
int DeviceIdentity(int device, char* out, size_t size);
int PointerKind(const void* ptr, int* kind, int* device);
int DeviceAlloc(int device, size_t bytes, void** ptr);
int DeviceFree(void* ptr);
int HostAlloc(int device, size_t bytes, void** ptr);
int HostFree(void* ptr);
int StreamCreate(int device, void** stream);
int StreamDestroy(void* stream);
int StreamSynchronize(void* stream);
int StreamIsCapturing(void* stream, int device, int* capturing);
int EventCreate(int device, void** event);
int EventDestroy(void* event);
int EventRecord(void* event, void* stream);
int EventQuery(void* event);
int EventSynchronize(void* event);
int StreamWaitEvent(void* stream, void* event);
int MemcpyAsync(void* dst, const void* src, size_t bytes, void* stream);

// kernels.cu
int Reduce(void* dst, const void* src, size_t n, int dtype, int op, void* stream);
int Divide(void* data, size_t n, int dtype, double divisor, void* stream);
int WeightedSum(void* out, const void* x, double self_weight, const void* const* in, const double* w, int k,
                size_t n, int dtype, void* stream);
int Convert(void* dst, int dst_dtype, const void* src, int src_dtype, size_t n, void* stream);

// nccl.cc
int NcclLoad();
const char* NcclDescribe();
int NcclUniqueId(void* id);
int NcclCommInit(void** comm, int nranks, const void* id, int rank, int device);
int NcclCommDestroy(void* comm);
int NcclCommAbort(void* comm);
int NcclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream);
int NcclBroadcast(const void* send, void* recv, size_t bytes, int root, void* comm, void* stream);
int NcclAllGather(const void* send, void* recv, size_t bytes, void* comm, void* stream);
int NcclReduceScatter(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream);
int NcclGroupStart();
int NcclGroupEnd();
int NcclSend(const void* buf, size_t bytes, int peer, void* comm, void* stream);
int NcclRecv(void* buf, size_t bytes, int peer, void* comm, void* stream);
int NcclCommStatus(void* comm, int* state);

}  // namespace starling::device::cuda
