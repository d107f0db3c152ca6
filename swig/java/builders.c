/* See builders.h. Every builder lays its struct, then its double arrays, int arrays and
 * string out in one block so that one free releases all of it. */
#include "builders.h"

#include <stdlib.h>
#include <string.h>

typedef struct block {
  char* base;
  size_t used;
  size_t size;
} block_t;

static size_t round8(size_t n) { return (n + 7) & ~(size_t)7; }
static size_t array_bytes(int count, size_t element) { return count > 0 ? round8((size_t)count * element) : 0; }

static int block_init(block_t* b, size_t size) {
  b->base = (char*)calloc(1, size ? size : 1);
  b->used = 0;
  b->size = size;
  return b->base != NULL;
}

/* Copies count elements (none if count <= 0) and returns where they went, or NULL. */
static void* block_copy(block_t* b, const void* data, int count, size_t element) {
  if (count <= 0 || data == NULL) return NULL;
  char* at = b->base + b->used;
  memcpy(at, data, (size_t)count * element);
  b->used += array_bytes(count, element);
  return at;
}

static int64_t address_of(const void* p) { return (int64_t)(intptr_t)p; }

/* An absent weights array is fine; a present one has one entry per rank. */
static int weights_match(int num_ranks, int num_weights) { return num_weights < 0 || num_weights == num_ranks; }
static int count_of(int n) { return n < 0 ? 0 : n; }

/* The descriptor both tensor builders make: dtype (code, bits, lanes 1), row-major shape. */
static int64_t tensor_new(void* data, int device_type, int device_id, int64_t byte_offset, int code, int bits,
                          const long long* shape, int ndim) {
  block_t b;
  /* One spare entry so that a 0-d tensor still has a non-NULL shape. */
  if (!block_init(&b, round8(sizeof(DLTensor)) + array_bytes(ndim + 1, sizeof(int64_t)))) return 0;
  DLTensor* t = (DLTensor*)b.base;
  b.used = round8(sizeof(DLTensor));
  t->data = data;
  t->device.device_type = (DLDeviceType)device_type;
  t->device.device_id = device_id;
  t->ndim = ndim;
  t->dtype.code = (uint8_t)code;
  t->dtype.bits = (uint8_t)bits;
  t->dtype.lanes = 1;
  t->shape = (int64_t*)(b.base + b.used);
  for (int i = 0; i < ndim; ++i) t->shape[i] = (int64_t)shape[i];
  t->strides = NULL;
  t->byte_offset = (uint64_t)byte_offset;
  return address_of(t);
}

/* Element count of a valid shape, or -1 (negative dimension, byte count overflows). */
static int64_t shape_numel(const long long* shape, int ndim) {
  int64_t numel = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0 || (shape[i] > 0 && numel > INT64_MAX / 8 / shape[i])) return -1;
    numel *= shape[i];
  }
  return numel;
}

static int dtype_ok(int code, int bits) { return bits > 0 && bits % 8 == 0 && bits <= 255 && code >= 0 && code <= 255; }

int64_t starling_java_tensor_new(starling_java_buffer_t data, int64_t byte_offset, int code, int bits,
                                 const long long* shape, int ndim) {
  if (data.address == NULL || ndim < 0 || (ndim > 0 && shape == NULL) || !dtype_ok(code, bits) || byte_offset < 0)
    return 0;
  const int64_t numel = shape_numel(shape, ndim);
  if (numel < 0 || byte_offset > data.capacity || numel * (bits / 8) > data.capacity - byte_offset) return 0;
  return tensor_new(data.address, kDLCPU, 0, byte_offset, code, bits, shape, ndim);
}

int64_t starling_java_device_tensor_new(int64_t address, int device, int code, int bits, const long long* shape,
                                        int ndim) {
  if (ndim < 0 || (ndim > 0 && shape == NULL) || !dtype_ok(code, bits) || shape_numel(shape, ndim) < 0) return 0;
  return tensor_new((void*)(intptr_t)address, kDLCUDA, device, 0, code, bits, shape, ndim);
}

int64_t starling_java_context_options_new(int use_host_comm, int64_t host_comm, int nodes_per_machine) {
  starling_context_options_t* o = (starling_context_options_t*)malloc(sizeof *o);
  if (o == NULL) return 0;
  const starling_context_options_t init = STARLING_CONTEXT_OPTIONS_INIT;
  *o = init;
  o->use_host_comm = use_host_comm;
  o->host_comm = host_comm;
  o->nodes_per_machine = nodes_per_machine;
  return address_of(o);
}

int64_t starling_java_neighbor_args_new(int use_weights, double self_weight, const int* source_ranks,
                                        int num_sources, const double* source_weights,
                                        int num_source_weights, int dynamic,
                                        const int* destination_ranks, int num_destinations,
                                        const double* destination_weights,
                                        int num_destination_weights, int check_topology,
                                        const char* name) {
  num_sources = count_of(num_sources);
  num_destinations = count_of(num_destinations);
  if (!weights_match(num_sources, num_source_weights) || !weights_match(num_destinations, num_destination_weights))
    return 0;
  const size_t name_bytes = name ? strlen(name) + 1 : 0;
  block_t b;
  if (!block_init(&b, round8(sizeof(starling_neighbor_args_t)) + array_bytes(num_source_weights, sizeof(double)) +
                          array_bytes(num_destination_weights, sizeof(double)) +
                          array_bytes(num_sources, sizeof(int)) + array_bytes(num_destinations, sizeof(int)) +
                          name_bytes))
    return 0;
  starling_neighbor_args_t* a = (starling_neighbor_args_t*)b.base;
  const starling_neighbor_args_t init = STARLING_NEIGHBOR_ARGS_INIT;
  *a = init;
  b.used = round8(sizeof *a);
  a->use_weights = use_weights;
  a->self_weight = self_weight;
  a->num_sources = num_sources;
  a->source_weights = (const double*)block_copy(&b, source_weights, num_source_weights, sizeof(double));
  a->destination_weights = (const double*)block_copy(&b, destination_weights, num_destination_weights, sizeof(double));
  a->source_ranks = (const int*)block_copy(&b, source_ranks, num_sources, sizeof(int));
  a->dynamic = dynamic;
  a->num_destinations = num_destinations;
  a->destination_ranks = (const int*)block_copy(&b, destination_ranks, num_destinations, sizeof(int));
  a->check_topology = check_topology;
  if (name) {
    memcpy(b.base + b.used, name, name_bytes);
    a->name = b.base + b.used;
  }
  return address_of(a);
}

int64_t starling_java_window_args_new(const int* ranks, int num_ranks, const double* weights,
                                      int num_weights, double self_weight, int require_mutex) {
  if (num_ranks < 0 && num_weights >= 0) return 0;  /* weights need explicit ranks */
  if (!weights_match(count_of(num_ranks), num_weights)) return 0;
  block_t b;
  if (!block_init(&b, round8(sizeof(starling_window_args_t)) + array_bytes(num_weights, sizeof(double)) +
                          array_bytes(num_ranks, sizeof(int))))
    return 0;
  starling_window_args_t* a = (starling_window_args_t*)b.base;
  const starling_window_args_t init = STARLING_WINDOW_ARGS_INIT;
  *a = init;
  b.used = round8(sizeof *a);
  a->weights = (const double*)block_copy(&b, weights, num_weights, sizeof(double));
  a->num_ranks = count_of(num_ranks);
  a->ranks = (const int*)block_copy(&b, ranks, num_ranks, sizeof(int));
  a->self_weight = self_weight;
  a->require_mutex = require_mutex;
  return address_of(a);
}

int64_t starling_java_window_update_args_new(int use_weights, double self_weight, const int* ranks,
                                             int num_ranks, const double* weights, int num_weights,
                                             int reset, int require_mutex) {
  if (!weights_match(count_of(num_ranks), num_weights)) return 0;
  block_t b;
  if (!block_init(&b, round8(sizeof(starling_window_update_args_t)) + array_bytes(num_weights, sizeof(double)) +
                          array_bytes(num_ranks, sizeof(int))))
    return 0;
  starling_window_update_args_t* a = (starling_window_update_args_t*)b.base;
  const starling_window_update_args_t init = STARLING_WINDOW_UPDATE_ARGS_INIT;
  *a = init;
  b.used = round8(sizeof *a);
  a->use_weights = use_weights;
  a->self_weight = self_weight;
  a->weights = (const double*)block_copy(&b, weights, num_weights, sizeof(double));
  a->num_ranks = count_of(num_ranks);
  a->ranks = (const int*)block_copy(&b, ranks, num_ranks, sizeof(int));
  a->reset = reset;
  a->require_mutex = require_mutex;
  return address_of(a);
}

int64_t starling_java_compression_new(int compressor, int64_t k, double ratio, int64_t seed, int error_feedback,
                                      double gamma) {
  starling_compression_t* c = (starling_compression_t*)malloc(sizeof *c);
  if (!c) return 0;
  const starling_compression_t init = STARLING_COMPRESSION_INIT;
  *c = init;
  c->compressor = compressor;
  c->k = k;
  c->ratio = ratio;
  c->seed = (uint64_t)seed;
  c->error_feedback = error_feedback;
  c->gamma = gamma;
  return (int64_t)(intptr_t)c;
}

void starling_java_free(int64_t address) { free((void*)(intptr_t)address); }
