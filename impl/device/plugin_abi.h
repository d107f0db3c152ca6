/* The device seam: the only way the core reaches a GPU.
 *
 * A device plugin is a shared library that exports one C function,
 *     const starling_device_plugin_t* starling_device_plugin_v1(void);
 * returning a table of the functions below. The core dlopens it on the first CUDA tensor:
 * libstarling_cuda.so (impl/device/cuda: CUDA runtime + NCCL) from the directory of
 * libstarling.so, or the file named by STARLING_DEVICE_PLUGIN (the tests point it at the
 * emulated device of tests/gpu/emulator, which implements the same table over host memory).
 *
 * Conventions, for every function:
 *  - returns 0 on success, nonzero on failure; last_error() then holds a message for the
 *    calling thread (naming what failed: "cudaMemcpyAsync: invalid argument", "no CUDA
 *    driver (libcuda.so.1 not found)"). Nothing is printed, nothing aborts.
 *  - streams, events and NCCL communicators are opaque handles; stream NULL is the legacy
 *    default stream (cudaStreamLegacy semantics) of the device the call runs on: for
 *    event_record, the event's device (not the calling thread's current device).
 *  - dtype values are starling::DType's (impl/common/dtype.h); op values ReduceOp's.
 *  - "async" functions enqueue on `stream` and return; arguments passed by pointer
 *    (the in/w arrays of weighted_sum) are read before the call returns.
 *  - every function may be called from any thread. Functions that take a device, and
 *    those that take a stream or event the plugin created (the stream's or event's
 *    device), run with that device current: none creates a CUDA context on a device it
 *    was not asked to use. A thread whose current device was already that one keeps it,
 *    and one that chose another device through set_device gets it back. (A thread on
 *    CUDA's implicit device 0 may be left on the new device: switching back would create
 *    a context on GPU 0.) The core calls set_device only on threads it owns (a
 *    context's progress thread).
 *  - a failure is reported by the call that failed, never by a later one: a status
 *    such as "not ready" from event_query leaves nothing behind for the next call
 *    (the CUDA runtime's per-thread last-error slot is cleared).
 *
 * Plain C, so that the core (C++), the CUDA plugin (nvcc) and the emulator share it. */
#ifndef STARLING_DEVICE_PLUGIN_ABI_H_
#define STARLING_DEVICE_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STARLING_DEVICE_ABI_VERSION 4

/* What memory a pointer is, as the driver sees it (pointer_kind). */
enum {
  STARLING_MEMORY_HOST = 0,     /* pageable host memory, or unknown to the driver */
  STARLING_MEMORY_DEVICE = 1,   /* device memory of *device */
  STARLING_MEMORY_PINNED = 2,   /* page-locked host memory (cudaMallocHost / registered) */
  STARLING_MEMORY_MANAGED = 3   /* unified memory */
};

/* The size of an NCCL unique id (ncclUniqueId). */
#define STARLING_NCCL_ID_BYTES 128

/* At most this many inputs per weighted_sum call (the core splits longer sums). */
#define STARLING_DEVICE_MAX_INPUTS 32

typedef struct starling_device_plugin {
  size_t struct_size; /* sizeof(starling_device_plugin_t) */
  int abi_version;    /* STARLING_DEVICE_ABI_VERSION */

  /* --- setup and queries --- */
  /* Message for the last failing call on this thread. Never NULL. */
  const char* (*last_error)(void);
  /* Loads the runtime and checks for a usable driver and at least one device. The
   * message names what is missing. Idempotent. */
  int (*init)(void);
  /* "CUDA runtime 13.0, driver 13.0, 2 devices" (after init). Never NULL. */
  const char* (*describe)(void);
  int (*device_count)(int* count);
  int (*set_device)(int device);
  /* A string naming the physical device, unique across hosts (the GPU UUID). */
  int (*device_identity)(int device, char* out, size_t size);
  /* kind: STARLING_MEMORY_*; device: the owning device for DEVICE/MANAGED, else -1. */
  int (*pointer_kind)(const void* ptr, int* kind, int* device);

  /* --- memory --- */
  int (*device_alloc)(int device, size_t bytes, void** ptr);
  int (*device_free)(void* ptr);
  /* pinned, usable from every device; allocated with `device` current */
  int (*host_alloc)(int device, size_t bytes, void** ptr);
  int (*host_free)(void* ptr);

  /* --- streams and events --- */
  int (*stream_create)(int device, void** stream); /* non-blocking w.r.t. the legacy stream */
  int (*stream_destroy)(void* stream);
  int (*stream_synchronize)(void* stream);
  int (*event_create)(int device, void** event); /* timing disabled */
  int (*event_destroy)(void* event);
  /* stream NULL: the legacy stream of the event's device; a stream of another device
   * fails, naming both devices. */
  int (*event_record)(void* event, void* stream);
  /* 0: complete; 1: not yet; other: error. */
  int (*event_query)(void* event);
  int (*event_synchronize)(void* event);
  int (*stream_wait_event)(void* stream, void* event);
  /* Copies in any direction (cudaMemcpyDefault). */
  int (*memcpy_async)(void* dst, const void* src, size_t bytes, void* stream);

  /* --- kernels: the code of impl/device/kernels, results bit-identical to the CPU's ---
   * reduce:       dst[i] = op(dst[i], src[i]) (AVERAGE adds: callers divide)
   * divide:       data[i] /= divisor (floating dtypes)
   * weighted_sum: out = self_weight * x + sum_{j<k} w[j] * in[j], in order; out may be x;
   *               k <= STARLING_DEVICE_MAX_INPUTS; in[] and w[] are host arrays
   * convert:      dst[i] = src[i] converted (float16/bfloat16 <-> float32, int16 <-> int32,
   *               or equal dtypes), round to nearest even / wrap-around as a cast */
  int (*reduce)(void* dst, const void* src, size_t n, int dtype, int op, void* stream);
  int (*divide)(void* data, size_t n, int dtype, double divisor, void* stream);
  int (*weighted_sum)(void* out, const void* x, double self_weight, const void* const* in, const double* w,
                      int k, size_t n, int dtype, void* stream);
  int (*convert)(void* dst, int dst_dtype, const void* src, int src_dtype, size_t n, void* stream);

  /* --- NCCL (bytes-typed where NCCL allows). nccl_load fails, naming the reason, when
   * the library is absent; the other NCCL functions then fail too. --- */
  int (*nccl_load)(void);
  /* "NCCL 2.28.3" after nccl_load. Never NULL. */
  const char* (*nccl_describe)(void);
  int (*nccl_unique_id)(void* id); /* STARLING_NCCL_ID_BYTES bytes */
  /* Collective over the nranks processes that pass the same id. Non-blocking: may
   * return with *comm set before the communicator is ready; the caller polls
   * nccl_comm_status until it is not 1 (and may nccl_comm_abort it meanwhile). */
  int (*nccl_comm_init)(void** comm, int nranks, const void* id, int rank, int device);
  /* Each frees the communicator: the handle must never be used again (a second
   * destroy or abort is a use after free). */
  int (*nccl_comm_destroy)(void* comm);
  int (*nccl_comm_abort)(void* comm);
  /* dtype: float16, bfloat16, float32, float64, int8, int32, int64, uint8 (no int16);
   * op: SUM, MIN, MAX (the core divides for AVERAGE). */
  int (*nccl_all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, void* comm,
                         void* stream);
  int (*nccl_broadcast)(const void* send, void* recv, size_t bytes, int root, void* comm, void* stream);
  /* recv holds nranks * bytes, rank r's block at r * bytes. */
  int (*nccl_all_gather)(const void* send, void* recv, size_t bytes, void* comm, void* stream);
  int (*nccl_group_start)(void);
  int (*nccl_group_end)(void);
  int (*nccl_send)(const void* buf, size_t bytes, int peer, void* comm, void* stream);
  int (*nccl_recv)(void* buf, size_t bytes, int peer, void* comm, void* stream);
  /* ncclCommGetAsyncError: *state 0 ready and healthy, 1 still initializing, 2 failed
   * (an asynchronous error, e.g. a network error or a peer gone: last_error() says which;
   * the communicator must then be aborted). Returns nonzero only for a bad handle.
   * NCCL operations wait for peers forever: waits poll this besides their event. */
  int (*nccl_comm_status)(void* comm, int* state);

  /* --- since ABI 3 --- */
  /* *capturing = 1 when work queued on `stream` now would be captured into a CUDA graph
   * (cudaStreamIsCapturing: active or invalidated), or when a call on it would
   * invalidate another thread's capture in global mode; else 0. stream NULL: the legacy
   * stream of `device`. */
  int (*stream_is_capturing)(void* stream, int device, int* capturing);

  /* --- since ABI 4 --- */
  /* ncclReduceScatter: send holds nranks blocks of count elements (block r at
   * r * count); recv gets this rank's block of their reduction. In place when recv is
   * send + rank * count elements. dtype and op as nccl_all_reduce. */
  int (*nccl_reduce_scatter)(const void* send, void* recv, size_t count, int dtype, int op, void* comm,
                             void* stream);
} starling_device_plugin_t;

typedef const starling_device_plugin_t* (*starling_device_plugin_entry_t)(void);
#define STARLING_DEVICE_PLUGIN_ENTRY "starling_device_plugin_v1"

#ifdef __cplusplus
}
#endif

#endif /* STARLING_DEVICE_PLUGIN_ABI_H_ */
