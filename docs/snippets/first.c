/* ranks: 1 2 4
 * Decentralized averaging from C: build and run with
 *   cc first.c $(pkg-config --cflags --libs starling) -o first && starlingrun -np 4 ./first */
#include <math.h>
#include <stdio.h>

#include <starling/starling.h>

static int check(starling_status_t status, const char* what) {
  if (status != STARLING_SUCCESS)
    fprintf(stderr, "%s: %s (%s)\n", what, starling_status_string(status), starling_last_error());
  return status == STARLING_SUCCESS;
}

int main(void) {
  starling_context_t ctx;
  if (!check(starling_context_create(NULL, &ctx), "context_create")) return 1; /* collective */
  int rank, size;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);

  double x[1024];
  for (int i = 0; i < 1024; ++i) x[i] = rank;
  int64_t shape[] = {1024};
  DLTensor t = {.data = x, .device = {kDLCPU, 0}, .ndim = 1,
                .dtype = {kDLFloat, 64, 1}, .shape = shape};

  /* Blocking, in place (input and output are the same tensor). */
  if (!check(starling_allreduce(ctx, &t, &t, STARLING_AVERAGE, "mean"), "allreduce")) return 1;
  double mean = (size - 1) / 2.0;
  if (fabs(x[0] - mean) > 1e-12) return 1;

  /* Average with the in-neighbors of the default exponential-2 graph: x stays at the
   * average, since every rank already holds it. */
  if (!check(starling_neighbor_allreduce(ctx, &t, &t, NULL), "neighbor_allreduce")) return 1;

  /* Nonblocking: overlap with computation, then wait and free the request. */
  starling_request_t req;
  if (!check(starling_neighbor_allreduce_nonblocking(ctx, &t, &t, NULL, &req), "submit")) return 1;
  /* ... compute ... */
  if (!check(starling_request_wait(req), "wait")) return 1;
  starling_request_free(req);

  printf("rank %d of %d: %.3f (expected %.3f)\n", rank, size, x[0], mean);
  int ok = fabs(x[1023] - mean) < 1e-12;
  starling_context_destroy(ctx); /* collective; finalizes MPI if Starling started it */
  return ok ? 0 : 1;
}
