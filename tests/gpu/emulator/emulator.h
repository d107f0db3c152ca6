/* Test helpers of the emulated device (libstarling_emudevice.so), for tests in C, C++ and
 * Python (ctypes). The library also exports starling_device_plugin_v1(), the table of
 * impl/device/plugin_abi.h; the core loads it through STARLING_DEVICE_PLUGIN.
 *
 * Every int function returns 0 on success, nonzero on failure with the message in
 * starling_emu_last_error() (per thread). Streams are the table's handles: NULL is the
 * legacy default stream of the calling thread's current device.
 *
 * Environment (read once):
 *   STARLING_EMU_DEVICES=N        emulated devices (default 1; 0: init fails, no device)
 *   STARLING_EMU_IDENTITY=a[,b..] device_identity of device 0, 1, ... (default
 *                                 "emu-<hostname>-<device>"); ranks that see the same value
 *                                 share a GPU, as far as the core can tell. "%r" becomes the
 *                                 launcher's rank (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK):
 *                                 "gpu-%r" gives every rank its own GPU, "gpu" one for all.
 *                                 Devices past the list get "<last>-dev<device>".
 *   STARLING_EMU_DELAY_US=N       every stream task first sleeps a random 0..N us (default 0)
 *   STARLING_EMU_NO_NCCL=1        nccl_load fails: "libnccl.so.2 not found (emulated)"
 *   STARLING_EMU_NCCL_TIMEOUT=S   seconds a communicator waits for a peer (default 60)
 *   STARLING_EMU_POISON=0         do not fill new and freed memory with garbage bytes
 *   STARLING_EMU_DEVICE_MEMORY=B  bytes of device memory per device (default unbounded):
 *                                 device_alloc beyond it fails with out of memory
 *   STARLING_EMU_NCCL_STALL_RANK=R the comm init of launcher rank R never completes (as
 *                                 when a rank never joins); nothing but an abort ends it
 *   STARLING_EMU_NCCL_PEER_LOSS=hang|error  a peer that goes away without destroying its
 *                                 communicator: operations waiting for it hang silently
 *                                 (default, as NCCL over NVLink/shared memory), or the
 *                                 communicator also reports an async error (network) */
#ifndef STARLING_EMU_EMULATOR_H_
#define STARLING_EMU_EMULATOR_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STARLING_EMU_API __attribute__((visibility("default")))

/* Device memory of `device` (what device_alloc hands out). */
STARLING_EMU_API int starling_emu_alloc(int device, size_t bytes, void** ptr);
/* Managed (unified) memory of `device`: kernels of any device accept it. */
STARLING_EMU_API int starling_emu_alloc_managed(int device, size_t bytes, void** ptr);
/* Frees device, managed or pinned memory; waits for every stream first, like cudaFree. */
STARLING_EMU_API int starling_emu_free(void* ptr);
/* A synchronous copy in any direction (does not wait for any stream). */
STARLING_EMU_API int starling_emu_memcpy(void* dst, const void* src, size_t bytes);
STARLING_EMU_API int starling_emu_stream_create(int device, void** stream);
STARLING_EMU_API int starling_emu_stream_destroy(void* stream);
/* Queues a task that sleeps: work queued after it on the stream starts that much later. */
STARLING_EMU_API int starling_emu_sleep_on_stream(void* stream, int microseconds);
/* Queues a copy of src's current contents (taken now) into dst, done when the stream gets
 * there: proves that an operation waits for the work queued before it. */
STARLING_EMU_API int starling_emu_fill_on_stream(void* stream, void* dst, const void* src, size_t bytes);
/* Queues a task that fails with `message`: the stream becomes sticky-failed when it gets
 * there, as after a failing kernel (tests of the core's error paths). */
STARLING_EMU_API int starling_emu_fail_on_stream(void* stream, const char* message);
/* Marks the stream as being captured into a CUDA graph (cudaStreamBeginCapture): events
 * recorded on it are graph nodes, and using one from outside the capture (query,
 * synchronize, another stream waiting for it) fails and invalidates the capture, as on a
 * GPU. end_capture fails if the capture was invalidated. The legacy stream cannot be
 * captured. */
STARLING_EMU_API int starling_emu_stream_begin_capture(void* stream);
STARLING_EMU_API int starling_emu_stream_end_capture(void* stream);
/* Waits for everything queued so far on the stream; 0 or its sticky error. */
STARLING_EMU_API int starling_emu_stream_synchronize(void* stream);
/* Device, managed and pinned allocations not yet freed. */
STARLING_EMU_API int starling_emu_live_allocations(void);
/* The devices on which a CUDA context was created so far (bit d: device d): every entry
 * that would need one on a GPU counts the device it runs on. */
STARLING_EMU_API unsigned starling_emu_context_devices(void);
/* Device memory allocated on `device` and not yet freed (rounded to 256 bytes). */
STARLING_EMU_API size_t starling_emu_device_bytes_in_use(int device);
/* Pinned host memory allocated and not yet freed (bytes as requested). */
STARLING_EMU_API size_t starling_emu_pinned_bytes_in_use(void);
/* NCCL operations of two communicators that ran at the same time on one device of this
 * process (NCCL's documented deadlock hazard); 0 when operations never overlapped. */
STARLING_EMU_API int starling_emu_concurrent_nccl_ops(void);
/* Calls of one NCCL entry ("nccl_reduce_scatter", "nccl_send", ...) this process made and
 * the emulator accepted, so a test can tell which path an operation took. */
STARLING_EMU_API int starling_emu_nccl_calls(const char* fn);
STARLING_EMU_API const char* starling_emu_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* STARLING_EMU_EMULATOR_H_ */
