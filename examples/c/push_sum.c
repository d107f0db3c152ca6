/* Asynchronous push-sum average consensus over one-sided windows.
 *
 * Each rank holds a value vector x (random) and a weight p = 1. In every iteration it
 * pushes half of (x, p) into one out-neighbor's buffer (win_accumulate with
 * associated p) and keeps the other half, then folds whatever has arrived into its own
 * (update_then_collect). Nothing waits for anybody inside the loop, and ranks run at
 * different speeds on purpose; mass is never lost, so x / p converges to the exact
 * average of the initial vectors on every rank.
 *
 *   starlingrun -np 4 push_sum [iterations] [length]
 *
 * Prints each rank's final error and exits non-zero if any exceeds 1e-6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <starling/starling.h>

#include "example_util.h"

static void sleep_microseconds(long us) {
  struct timespec ts;
  ts.tv_sec = us / 1000000;
  ts.tv_nsec = (us % 1000000) * 1000;
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? atoi(argv[1]) : 300;
  int64_t len = argc > 2 ? atoll(argv[2]) : 64;
  starling_context_t ctx;
  starling_topology_t topo;
  starling_window_t win;
  int rank, n, it, out_count = 0, *out;
  double *x, *average, p, worst = 0, error = 0;
  DLTensor tx, tavg;
  int64_t i;

  CHECK(starling_context_create(NULL, &ctx));
  CHECK(starling_rank(ctx, &rank));
  CHECK(starling_size(ctx, &n));
  CHECK(starling_topology_exponential_two(n, &topo));
  CHECK(starling_set_topology(ctx, topo, 0));
  starling_topology_free(topo);
  starling_out_neighbors(ctx, NULL, 0, &out_count);
  out = malloc(sizeof(int) * (out_count > 0 ? out_count : 1));
  if (out_count > 0) CHECK(starling_out_neighbors(ctx, out, out_count, &out_count));

  x = malloc(sizeof(double) * len);
  average = malloc(sizeof(double) * len);
  srand(99u + 31u * (unsigned)rank);
  for (i = 0; i < len; ++i) x[i] = 10.0 * rand() / RAND_MAX;
  tx = vector(x, &len);
  tavg = vector(average, &len);
  CHECK(starling_allreduce(ctx, &tx, &tavg, STARLING_AVERAGE, "true average"));

  CHECK(starling_set_window_associated_p_enabled(ctx, 1));
  CHECK(starling_window_create(ctx, &tx, "x", 1, &win));
  for (it = 0; it < iterations; ++it) {
    if (out_count > 0) {
      const int target = out[it % out_count];
      const double half = 0.5;
      starling_window_args_t args = STARLING_WINDOW_ARGS_INIT;
      args.num_ranks = 1;
      args.ranks = &target;
      args.weights = &half;
      args.self_weight = 0.5; /* keep the other half of x and p */
      CHECK(starling_window_accumulate(win, &tx, &args));
    }
    CHECK(starling_window_update_then_collect(win, 0));
    /* Ranks run at different speeds: rank r works (r + 1) * 50 us per iteration. */
    sleep_microseconds(50L * (rank + 1));
  }
  /* Drain: once everyone stopped pushing, collect what is still in the buffers. */
  CHECK(starling_barrier(ctx));
  CHECK(starling_window_update_then_collect(win, 0));
  CHECK(starling_window_associated_p(win, &p));
  for (i = 0; i < len; ++i) {
    const double e = fabs(x[i] / p - average[i]);
    if (e > error) error = e;
  }
  printf("[rank %d] push-sum after %d iterations: p = %.3e, max |x/p - average| = %.3e\n", rank, iterations, p, error);
  {
    int64_t one = 1;
    DLTensor t = vector(&error, &one);
    worst = error;
    t.data = &worst;
    CHECK(starling_allreduce(ctx, &t, &t, STARLING_MAX, "worst error"));
  }
  CHECK(starling_window_free(win));
  CHECK(starling_context_destroy(ctx));
  free(out);
  free(x);
  free(average);
  if (rank == 0) printf("worst error over all ranks: %.3e (%s)\n", worst, worst < 1e-6 ? "converged" : "NOT converged");
  return worst < 1e-6 ? 0 : 1;
}
