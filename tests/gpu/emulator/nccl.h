// The NCCL half of the table (see nccl_comm.h for the transport). Operations are tasks on
// the given stream. Collectives: every rank sends one frame to every peer per call (its
// contribution, or an empty frame that still names the call), so ranks that call
// different operations or sizes get an error instead of corrupt data; all_reduce reduces
// the contributions in rank order 0..n-1 with HostReduce, so every rank gets the same
// bits. Point-to-point: a send completes when the peer has received it (as in NCCL), so
// an ungrouped send/send exchange fails with a timeout where NCCL would hang, while
// group_start/group_end issue every send before any receive completes.
#pragma once

#include <cstddef>

namespace starling::emu {

int NcclLoad();
const char* NcclDescribe();
int NcclUniqueId(void* id);
int NcclCommInit(void** comm, int nranks, const void* id, int rank, int device);
int NcclCommDestroy(void* comm);
int NcclCommAbort(void* comm);
int NcclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream);
int NcclReduceScatter(const void* send, void* recv, size_t count, int dtype, int op, void* comm, void* stream);
int NcclBroadcast(const void* send, void* recv, size_t bytes, int root, void* comm, void* stream);
int NcclAllGather(const void* send, void* recv, size_t bytes, void* comm, void* stream);
int NcclGroupStart();
int NcclGroupEnd();
int NcclSend(const void* buf, size_t bytes, int peer, void* comm, void* stream);
int NcclRecv(void* buf, size_t bytes, int peer, void* comm, void* stream);
int NcclCommStatus(void* comm, int* state);
// How often operations of two communicators overlapped on one device (see emulator.h).
int NcclConcurrentOps();
// Calls of the NCCL function `fn` ("nccl_all_reduce", ...) accepted so far (see emulator.h).
int NcclCalls(const char* fn);

}  // namespace starling::emu
