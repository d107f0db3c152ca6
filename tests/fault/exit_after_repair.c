/* The survivors of a death repair, compute once more and leave (issue 29, section 1):
 * rank 2 SIGKILLs itself after a barrier; the survivors' allreduce (or the barrier)
 * fails with PEER_FAILED; each repairs, runs one last allreduce of three float64 (checked
 * exactly), destroys its context and returns 0. Before destroy waited for the others
 * after a repair, a survivor that finished first exited while others were still inside
 * the last allreduce, ULFM reported that exit to them as a new death, and the job
 * ended 1 (7 of 12 runs at 6 ranks). Run under `mpirun --with-ft ulfm` by
 * exit_after_repair.sh, many times in a row. Prints "LEFT rank=R" per survivor. */
#include <starling/starling.h>

#include "example_util.h" /* vector(): a float64 DLTensor */

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int Fail(int rank, const char* what, int status) {
  printf("FAILED rank=%d %s: status %d: %s\n", rank, what, status, starling_last_error());
  fflush(stdout);
  return 1;
}

int main(void) {
  const int victim = 2;
  starling_context_t ctx = NULL;
  int s = starling_context_create(NULL, &ctx);
  if (s != STARLING_SUCCESS) return Fail(-1, "context_create", s);
  int rank = 0, size = 1;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  /* The victim may leave the barrier (and die) while others are still inside it: they
   * may see the death there already (more often over TCP, which fault-tolerant jobs use). */
  const int barrier = starling_barrier(ctx);
  if (barrier != STARLING_SUCCESS && barrier != STARLING_ERR_PEER_FAILED) return Fail(rank, "barrier", barrier);
  if (rank == victim) raise(SIGKILL);
  double x[3] = {1, 2, 3}, y[3];
  int64_t shape[1] = {3};
  DLTensor in = vector(x, shape), out = vector(y, shape);
  s = barrier == STARLING_SUCCESS ? starling_allreduce(ctx, &in, &out, STARLING_SUM, "first") : barrier;
  if (s != STARLING_ERR_PEER_FAILED) return Fail(rank, "barrier + allreduce 'first' (expected PEER_FAILED)", s);
  for (int attempt = 0;; ++attempt) {
    s = starling_context_repair(ctx, NULL, NULL);
    if (s == STARLING_SUCCESS) break;
    if (s != STARLING_ERR_PEER_FAILED || attempt == 3) return Fail(rank, "repair", s);
  }
  s = starling_allreduce(ctx, &in, &out, STARLING_SUM, "last");
  if (s != STARLING_SUCCESS) return Fail(rank, "allreduce 'last'", s);
  const double n = size - 1;
  if (y[0] != n || y[1] != 2 * n || y[2] != 3 * n) {
    printf("FAILED rank=%d wrong sum %g %g %g (expected %g %g %g)\n", rank, y[0], y[1], y[2], n, 2 * n, 3 * n);
    return 1;
  }
  if ((s = starling_context_destroy(ctx)) != STARLING_SUCCESS) return Fail(rank, "destroy", s);
  printf("LEFT rank=%d\n", rank);
  fflush(stdout);
  return 0;
}
