/* A job in which rank 0 leaves early while the others keep calling allreduce; run by
 * run_exit_test.py, which checks that the job ends non-zero within a bound.
 *
 *   exit_program <mode> <step> [linger]
 *     return    rank 0 returns from main at <step> without destroying its context
 *     exit1     rank 0 calls exit(1) at <step>
 *     destroy   rank 0 destroys its context at <step>, then returns 0
 *     window    as exit1, with a window alive (put + barrier each step)
 *
 * Rank 0 prints "T_LEAVE <CLOCK_MONOTONIC seconds>" as it leaves. The others print
 * "PEER rank=R status=S message=..." for their first failing call and return 1
 * without destroying (their own exit then tells the rest); with "linger", they first
 * sleep 4 s (as a program that saves its state after an error), so that no rank
 * learns of the failure from another's exit. Plain C: the header must serve C
 * programs. */
#include <starling/starling.h>

#include "example_util.h" /* vector(): a float64 DLTensor */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double Mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: exit_program return|exit1|destroy|window <step>\n");
    return 2;
  }
  const char* mode = argv[1];
  const int step = atoi(argv[2]);
  const int windowed = strcmp(mode, "window") == 0;
  const int linger = argc > 3 && strcmp(argv[3], "linger") == 0;
  starling_context_t ctx = NULL;
  if (starling_context_create(NULL, &ctx) != STARLING_SUCCESS) {
    fprintf(stderr, "context_create: %s\n", starling_last_error());
    return 2;
  }
  int rank = 0, size = 1;
  starling_rank(ctx, &rank);
  starling_size(ctx, &size);
  double x[3] = {1, 2, 3}, y[3], w[3] = {0, 0, 0};
  int64_t shape[1] = {3};
  DLTensor in = vector(x, shape), out = vector(y, shape), wt = vector(w, shape);
  starling_window_t win = NULL;
  if (windowed && starling_window_create(ctx, &wt, "w", 1, &win) != STARLING_SUCCESS) {
    fprintf(stderr, "window_create: %s\n", starling_last_error());
    return 2;
  }
  for (int i = 0; i < 1000; ++i) {
    if (rank == 0 && i == step) {
      printf("T_LEAVE %.6f\n", Mono());
      fflush(stdout);
      if (strcmp(mode, "return") == 0) return 0;
      if (strcmp(mode, "destroy") == 0) {
        starling_context_destroy(ctx);
        return 0;
      }
      exit(1);
    }
    int s = starling_allreduce(ctx, &in, &out, STARLING_SUM, "step");
    if (s == STARLING_SUCCESS && (y[0] != size || y[2] != 3.0 * size)) {
      printf("WRONG rank=%d step=%d got %g\n", rank, i, y[0]);
      return 1;
    }
    if (s == STARLING_SUCCESS && windowed) {
      s = starling_window_put(win, &wt, NULL);
      if (s == STARLING_SUCCESS) s = starling_barrier(ctx);
    }
    if (s != STARLING_SUCCESS) {
      printf("PEER rank=%d status=%d step=%d mono=%.6f message=%s\n", rank, s, i, Mono(), starling_last_error());
      fflush(stdout);
      if (linger) {
        struct timespec wait = {4, 0};
        nanosleep(&wait, NULL);
      }
      return 1;
    }
  }
  starling_context_destroy(ctx);
  return 0;
}
