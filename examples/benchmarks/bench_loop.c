/* The C side of examples/benchmarks/python_bench.py: the same Starling calls as the
 * Python benchmark, issued from a C loop on the same context, so the difference is the
 * Python layer's own cost. Loaded with ctypes. */
#include <stdint.h>
#include <time.h>

#include <starling/starling.h>

enum { BENCH_ALLREDUCE = 0, BENCH_NEIGHBOR_ALLREDUCE = 1 };

/* Runs `iterations` blocking calls of `op` on float32 buffers of `count` elements
 * (out of place, in -> out) and returns the elapsed seconds, or -1 after a failed call
 * (*status holds its code). */
double starling_bench_loop(starling_context_t ctx, int op, void* in, void* out, int64_t count, int iterations,
                           int* status) {
  int64_t shape[1] = {count};
  DLTensor a = {0}, b = {0};
  a.data = in;
  a.device.device_type = kDLCPU;
  a.ndim = 1;
  a.dtype.code = kDLFloat;
  a.dtype.bits = 32;
  a.dtype.lanes = 1;
  a.shape = shape;
  b = a;
  b.data = out;
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int i = 0; i < iterations; ++i) {
    *status = op == BENCH_ALLREDUCE ? starling_allreduce(ctx, &a, &b, STARLING_AVERAGE, NULL)
                                    : starling_neighbor_allreduce(ctx, &a, &b, NULL);
    if (*status != STARLING_SUCCESS) return -1.0;
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  return (double)(end.tv_sec - start.tv_sec) + 1e-9 * (double)(end.tv_nsec - start.tv_nsec);
}
