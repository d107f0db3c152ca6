/* Links against an installed library and runs an allreduce on every rank: alone (a
 * world of size 1) or under a launcher (tests/packaging/deb_test.sh runs 2 ranks). */
#include <stdio.h>

#include <starling/starling.h>

int main(void) {
  starling_context_t ctx;
  double x[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  int rank = -1, size = 0;
  DLTensor t = {x, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, NULL, 0};
  if (starling_get_version() != STARLING_VERSION_CODE) return 1;
  if (starling_context_create(NULL, &ctx) != STARLING_SUCCESS) {
    fprintf(stderr, "%s\n", starling_last_error());
    return 1;
  }
  if (starling_rank(ctx, &rank) != STARLING_SUCCESS || starling_size(ctx, &size) != STARLING_SUCCESS) return 1;
  if (starling_allreduce(ctx, &t, &t, STARLING_SUM, "x") != STARLING_SUCCESS || x[2] != 3.0 * size) {
    fprintf(stderr, "rank %d: allreduce gave %g, expected %g\n", rank, x[2], 3.0 * size);
    return 1;
  }
  if (starling_context_destroy(ctx) != STARLING_SUCCESS) return 1;
  printf("installed Starling %d works (rank %d of %d)\n", starling_get_version(), rank, size);
  return 0;
}
