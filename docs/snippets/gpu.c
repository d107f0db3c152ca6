/* ranks: none (needs a GPU: no machine this project runs on has one; the gpu tests run
 * the same calls on the emulated device)
 * Neighbor averaging of a CUDA tensor: build with the CUDA runtime,
 *   cc gpu.c $(pkg-config --cflags --libs starling) -lcudart -o gpu && starlingrun -np 2 ./gpu */
#include <stdio.h>

#include <cuda_runtime.h>
#include <starling/starling.h>

int main(void) {
  starling_context_t ctx;
  if (starling_context_create(NULL, &ctx) != STARLING_SUCCESS) return 1;
  int local_rank, devices = 0;
  starling_local_rank(ctx, &local_rank);
  cudaGetDeviceCount(&devices);
  if (devices == 0) return 1;
  cudaSetDevice(local_rank % devices);           /* one GPU per rank: the usual setup */

  int64_t n = 1 << 20;
  float* device_ptr;
  cudaMalloc((void**)&device_ptr, n * sizeof(float));
  cudaMemset(device_ptr, 0, n * sizeof(float));
  cudaStream_t stream;
  cudaStreamCreate(&stream);

  starling_set_cuda_stream(stream);              /* this thread's stream (NULL: legacy default) */
  DLTensor x = {.data = device_ptr, .device = {kDLCUDA, local_rank % devices}, .ndim = 1,
                .dtype = {kDLFloat, 32, 1}, .shape = &n};
  if (starling_neighbor_allreduce(ctx, &x, &x, NULL) != STARLING_SUCCESS) {
    fprintf(stderr, "%s\n", starling_last_error());
    return 1;
  }
  const char* path;
  starling_gpu_path(ctx, &path);                 /* "nccl on cuda:0: every rank has a GPU of its own ..." */
  printf("%s\n", path);
  cudaFree(device_ptr);
  starling_context_destroy(ctx);
  return 0;
}
