/* Helpers shared by the C examples: stop on any Starling error (printing its message),
 * and wrap a float64 vector as a DLTensor. */
#ifndef STARLING_EXAMPLE_UTIL_H_
#define STARLING_EXAMPLE_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starling/starling.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    starling_status_t s_ = (call);                                                         \
    if (s_ != STARLING_SUCCESS) {                                                          \
      fprintf(stderr, "%s failed: %s\n", #call, starling_last_error());                    \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

/* A 1-D float64 tensor over `data`; `length` must outlive the returned view. */
static DLTensor vector(double* data, int64_t* length) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 64;
  t.dtype.lanes = 1;
  t.shape = length;
  return t;
}

#endif /* STARLING_EXAMPLE_UTIL_H_ */
