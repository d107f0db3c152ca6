/* Builders for the native structs the Java binding hands to the C ABI: DLTensor views
 * over direct ByteBuffers and the option structs that carry arrays. Each returns the
 * address of one malloc'ed block (struct, arrays and strings together) to release with
 * starling_java_free, or 0 on bad input or no memory. Array arguments come in pairs
 * (array, length); a length < 0 means "absent" (NULL in the struct). */
#ifndef STARLING_SWIG_JAVA_BUILDERS_H_
#define STARLING_SWIG_JAVA_BUILDERS_H_

#include <stdint.h>

#include <starling/starling.h>

/* A direct buffer's address and capacity in bytes. */
typedef struct starling_java_buffer {
  char* address;
  int64_t capacity;
} starling_java_buffer_t;

/* A CPU DLTensor of dtype (code, bits, lanes 1) and row-major shape over data, starting
 * byte_offset bytes in; the shape must fit inside the buffer. The shape is long long,
 * which is what SWIG's stdint.i (and so the generated cast) calls int64_t. */
int64_t starling_java_tensor_new(starling_java_buffer_t data, int64_t byte_offset, int code, int bits,
                                 const long long* shape, int ndim);

/* A DLTensor in CUDA memory (kDLCUDA) of `device` at `address`, dtype and shape as above.
 * Nothing is checked against the memory: the library checks each call's tensors (device
 * index, NULL data, that the pointer is device memory). */
int64_t starling_java_device_tensor_new(int64_t address, int device, int code, int bits, const long long* shape,
                                        int ndim);

int64_t starling_java_context_options_new(int use_host_comm, int64_t host_comm, int nodes_per_machine);

/* Weights arrays, when present, have one entry per rank of the matching ranks array. */
int64_t starling_java_neighbor_args_new(int use_weights, double self_weight, const int* source_ranks,
                                        int num_sources, const double* source_weights,
                                        int num_source_weights, int dynamic,
                                        const int* destination_ranks, int num_destinations,
                                        const double* destination_weights,
                                        int num_destination_weights, int check_topology,
                                        const char* name);

int64_t starling_java_window_args_new(const int* ranks, int num_ranks, const double* weights,
                                      int num_weights, double self_weight, int require_mutex);

int64_t starling_java_window_update_args_new(int use_weights, double self_weight, const int* ranks,
                                             int num_ranks, const double* weights, int num_weights,
                                             int reset, int require_mutex);

/* A starling_compression_t (see starling.h); seed crosses as a Java long. */
int64_t starling_java_compression_new(int compressor, int64_t k, double ratio, int64_t seed, int error_feedback,
                                      double gamma);

/* Releases what a builder returned; 0 is ignored. */
void starling_java_free(int64_t address);

#endif /* STARLING_SWIG_JAVA_BUILDERS_H_ */
