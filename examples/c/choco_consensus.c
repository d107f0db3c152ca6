/* Compressed average consensus with CHOCO gossip (starling_neighbor_allreduce_compressed).
 *
 * Every rank starts from a random vector and repeatedly gossips compressed differences
 * over the exponential-2 graph. Printed per compressor: the distance to the true average
 * after the given number of steps, and the payload bytes sent against what plain
 * neighbor_allreduce would have sent (starling_get_stats). Exits non-zero if a
 * compressor does not reach 1e-6.
 *
 *   starlingrun -np 4 choco_consensus [steps] [length]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <starling/starling.h>

#include "example_util.h"

struct choice {
  const char* label;
  int compressor;
  double ratio;
  double gamma;
  int steps_factor; /* steps = factor * the steps argument */
};

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  int64_t len = argc > 2 ? atoll(argv[2]) : 64, one = 1, i;
  const struct choice choices[] = {{"float16", STARLING_COMPRESS_FLOAT16, 0, 1.0, 1},
                                   {"top-k 25%", STARLING_COMPRESS_TOPK, 0.25, 0.4, 5},
                                   {"random-k 25%", STARLING_COMPRESS_RANDOMK, 0.25, 0.3, 8}};
  starling_context_t ctx;
  int rank, n, c, t, failures = 0;
  double *x = malloc(sizeof(double) * len), *average = malloc(sizeof(double) * len), local, total;
  DLTensor tx = vector(x, &len), tavg = vector(average, &len), ttotal = vector(&total, &one);

  CHECK(starling_context_create(NULL, &ctx));
  CHECK(starling_rank(ctx, &rank));
  CHECK(starling_size(ctx, &n));
  for (c = 0; c < (int)(sizeof choices / sizeof choices[0]); ++c) {
    starling_compression_t options = STARLING_COMPRESSION_INIT;
    starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
    starling_stats_t before = STARLING_STATS_INIT, after = STARLING_STATS_INIT;
    options.compressor = choices[c].compressor;
    options.ratio = choices[c].ratio;
    options.gamma = choices[c].gamma;
    options.seed = 7;
    args.name = "consensus";
    srand(1234u + 77u * (unsigned)rank);
    for (i = 0; i < len; ++i) x[i] = (double)rand() / RAND_MAX;
    CHECK(starling_allreduce(ctx, &tx, &tavg, STARLING_AVERAGE, "true average"));
    CHECK(starling_get_stats(ctx, &before));
    for (t = 0; t < steps * choices[c].steps_factor; ++t)
      CHECK(starling_neighbor_allreduce_compressed(ctx, &tx, &tx, &args, &options));
    CHECK(starling_get_stats(ctx, &after));
    local = 0;
    for (i = 0; i < len; ++i) local = fmax(local, fabs(x[i] - average[i]));
    total = local;
    CHECK(starling_allreduce(ctx, &ttotal, &ttotal, STARLING_MAX, "distance"));
    if (rank == 0)
      printf("%-13s gamma %.1f: %5d steps, max distance to the average %.2e, payload %llu bytes (plain: %llu)\n",
             choices[c].label, choices[c].gamma, steps * choices[c].steps_factor, total,
             (unsigned long long)(after.bytes_after_compression - before.bytes_after_compression),
             (unsigned long long)(after.bytes_before_compression - before.bytes_before_compression));
    if (!(total < 1e-6)) ++failures;
    CHECK(starling_compression_reset(ctx, "consensus"));
  }
  CHECK(starling_context_destroy(ctx));
  free(x);
  free(average);
  return failures ? 1 : 0;
}
