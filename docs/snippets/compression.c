/* ranks: 1 2 4
 * Compressed averaging from C: a top-k allreduce with error feedback, and CHOCO gossip
 * (compressed neighbor averaging) until every rank holds the average. */
#include <math.h>
#include <stdio.h>

#include <starling/starling.h>

#define N 64

int main(void) {
  starling_context_t ctx;
  if (starling_context_create(NULL, &ctx) != STARLING_SUCCESS) return 1;
  int rank, size;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  double grad[N], x[N];
  for (int i = 0; i < N; ++i) grad[i] = x[i] = rank + 0.01 * i;
  int64_t shape[] = {N};
  DLTensor g = {.data = grad, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 64, 1}, .shape = shape};
  DLTensor t = g;
  t.data = x;

  starling_compression_t c = STARLING_COMPRESSION_INIT;
  c.compressor = STARLING_COMPRESS_TOPK;  /* FLOAT16, BFLOAT16, TOPK, RANDOMK, SIGN (NONE = plain) */
  c.ratio = 0.25;                         /* or c.k = 16 (elements) */
  c.error_feedback = 1;                   /* allreduce: keep what was dropped, per name */
  if (starling_allreduce_compressed(ctx, &g, &g, STARLING_AVERAGE, "grad", &c) != STARLING_SUCCESS) {
    fprintf(stderr, "%s\n", starling_last_error());
    return 1;
  }

  c.gamma = 0.4;                          /* CHOCO step size for neighbor averaging */
  starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
  args.name = "x";                        /* CHOCO keeps its state under this name */
  for (int step = 0; step < 400; ++step)
    if (starling_neighbor_allreduce_compressed(ctx, &t, &t, &args, &c) != STARLING_SUCCESS) {
      fprintf(stderr, "%s\n", starling_last_error());
      return 1;
    }
  double average = (size - 1) / 2.0, error = 0;
  for (int i = 0; i < N; ++i) error = fmax(error, fabs(x[i] - (average + 0.01 * i)));
  printf("rank %d: CHOCO with top-k 25%%: distance to the average %.1e\n", rank, error);
  starling_context_destroy(ctx);
  return error < 1e-6 ? 0 : 1;
}
