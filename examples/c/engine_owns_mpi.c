/* A C engine that owns MPI and lends Starling its communicator.
 *
 * Programs already built on MPI (a solver, a simulation, a training engine in C) keep
 * initializing and finalizing MPI themselves and hand Starling a communicator as a
 * Fortran handle. Starling then neither initializes nor finalizes MPI, numbers ranks
 * as that communicator does, and duplicates it internally: the engine's own messages
 * and Starling's never mix, even while both are in flight on the same communicator.
 *
 *   mpirun -np 3 engine_owns_mpi [length]
 *
 * Every result is checked against the engine's own MPI computation; exits non-zero
 * on any difference. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <starling/starling.h>

#include "example_util.h"

/* Rank r's vector: small multiples of 1/2, so float64 sums are exact in any order. */
static double value(int rank, int64_t i, double scale) { return scale * (rank + 1) + (double)(i % 7); }

int main(int argc, char** argv) {
  int64_t len = argc > 1 ? atoll(argv[1]) : 1000;
  int provided, world_rank, world_size, rank, size, s_rank, s_size, finalized, k, degree = 0, bad = 0, any_bad;
  int *in = NULL, checks = 0;
  double scale = 0.0, *x, *sum, *reference, *avg;
  int64_t i;
  MPI_Comm comm;
  starling_context_t ctx;
  starling_context_options_t options = STARLING_CONTEXT_OPTIONS_INIT;
  starling_topology_t ring;
  starling_request_t req;
  DLTensor tx, tsum, tavg;

  /* The engine owns MPI. Starling's progress thread calls MPI beside the engine's
   * thread, hence MPI_THREAD_MULTIPLE (context creation refuses anything less). */
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "this MPI does not provide MPI_THREAD_MULTIPLE\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  /* The engine's own communicator, ranks numbered backwards, so that it visibly is not
   * MPI_COMM_WORLD: Starling's rank must be the rank in this communicator. */
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, &comm);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);

  /* Engine: rank 0 decides a parameter and broadcasts it itself. */
  if (rank == 0) scale = 0.5;
  MPI_Bcast(&scale, 1, MPI_DOUBLE, 0, comm);

  options.use_host_comm = 1;
  options.host_comm = MPI_Comm_c2f(comm);
  CHECK(starling_context_create(&options, &ctx));
  CHECK(starling_rank(ctx, &s_rank));
  CHECK(starling_size(ctx, &s_size));
  if (s_rank != rank || s_size != size) {
    fprintf(stderr, "world rank %d: Starling says rank %d of %d, the communicator %d of %d\n", world_rank, s_rank,
            s_size, rank, size);
    bad = 1;
  }

  x = malloc(sizeof(double) * len);
  sum = malloc(sizeof(double) * len);
  reference = malloc(sizeof(double) * len);
  avg = malloc(sizeof(double) * len);
  for (i = 0; i < len; ++i) x[i] = value(rank, i, scale);
  tx = vector(x, &len);
  tsum = vector(sum, &len);
  tavg = vector(avg, &len);

  /* 1. Starling's allreduce, then the engine's MPI_Allreduce on the same communicator. */
  CHECK(starling_allreduce(ctx, &tx, &tsum, STARLING_SUM, "sum"));
  MPI_Allreduce(x, reference, (int)len, MPI_DOUBLE, MPI_SUM, comm);
  for (i = 0; i < len; ++i) bad |= sum[i] != reference[i];
  ++checks;

  /* 2. A Starling neighbor average over a ring in flight while the engine runs its own
   *    collective on the communicator: both proceed, neither sees the other's data. */
  CHECK(starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, &ring));
  CHECK(starling_set_topology(ctx, ring, 0));
  CHECK(starling_topology_free(ring));
  CHECK(starling_neighbor_allreduce_nonblocking(ctx, &tx, &tavg, NULL, &req));
  {
    int step = rank, latest;
    MPI_Allreduce(&step, &latest, 1, MPI_INT, MPI_MAX, comm);
    bad |= latest != size - 1;
  }
  CHECK(starling_request_wait(req));
  CHECK(starling_request_free(req));
  /* Reference: the uniform average over self and in-neighbors (ring: rank +- 1). */
  in = malloc(sizeof(int) * size); /* fewer than size in-neighbors */
  CHECK(starling_in_neighbors(ctx, in, size, &degree));
  for (i = 0; i < len; ++i) {
    double expected = value(rank, i, scale);
    for (k = 0; k < degree; ++k) expected += value(in[k], i, scale);
    expected /= degree + 1;
    bad |= fabs(avg[i] - expected) > 1e-12 * fabs(expected);
  }
  ++checks;

  /* 3. Starling broadcasts the last rank's average; the engine's MPI_Bcast of the
   *    same buffer from that rank must change nothing. */
  CHECK(starling_broadcast(ctx, &tavg, &tavg, size - 1, "average"));
  for (i = 0; i < len; ++i) reference[i] = avg[i];
  MPI_Bcast(reference, (int)len, MPI_DOUBLE, size - 1, comm);
  for (i = 0; i < len; ++i) bad |= reference[i] != avg[i];
  ++checks;

  /* The engine gathers the verdict with its own MPI, then hands Starling back. */
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
  CHECK(starling_context_destroy(ctx));
  MPI_Finalized(&finalized);
  if (finalized) {
    fprintf(stderr, "Starling finalized MPI that the engine owns\n");
    return 1;
  }
  if (rank == 0)
    printf("engine_owns_mpi: %d ranks, %d checks against the engine's MPI results: %s\n", size, checks,
           any_bad ? "MISMATCH" : "all equal");
  free(in);
  free(x);
  free(sum);
  free(reference);
  free(avg);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
