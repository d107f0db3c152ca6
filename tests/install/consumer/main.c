/* Links against the installed library and runs an allreduce in a world of size 1. */
#include <stdio.h>

#include <starling/starling.h>

int main(void) {
  starling_context_t ctx;
  double x[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  DLTensor t = {x, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, NULL, 0};
  if (starling_get_version() != STARLING_VERSION_CODE) return 1;
  if (starling_context_create(NULL, &ctx) != STARLING_SUCCESS) {
    fprintf(stderr, "%s\n", starling_last_error());
    return 1;
  }
  if (starling_allreduce(ctx, &t, &t, STARLING_SUM, "x") != STARLING_SUCCESS || x[2] != 3.0) return 1;
  if (starling_context_destroy(ctx) != STARLING_SUCCESS) return 1;
  printf("installed Starling %d works\n", starling_get_version());
  return 0;
}
