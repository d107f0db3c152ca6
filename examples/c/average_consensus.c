/* Decentralized average consensus with neighbor_allreduce.
 *
 * Every rank starts from a random vector; each iteration averages with its
 * in-neighbors (x_j <- sum_i W[i][j] x_i). For a doubly stochastic mixing matrix W the
 * distance to the true average shrinks by the factor ||W - 11^T/n||_2 per iteration
 * (the second-largest singular value of W). The program prints that prediction next
 * to the measured ratios, and exits non-zero if they disagree by more than 10%.
 *
 *   starlingrun -np 4 average_consensus [exp2|ring|mesh|star|full|dynamic] [iterations] [length]
 *
 * "dynamic" uses the one-peer exponential-2 schedule: a different W_t every step. The
 * theory is then the product Q_t = W_1 ... W_t: distance_t <= ||Q_t - J||_2 distance_0,
 * printed next to the measured distance_t / distance_0; for a power-of-two number of
 * ranks Q_t = J after log2(n) steps and the average is exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starling/starling.h>

#include "example_util.h"

/* ||M - J||_2 for a column-stochastic n x n matrix M (row = sender), by power
 * iteration on (M - J)^T (M - J) restricted to vectors orthogonal to 1. */
static double contraction(const double* m, int n) {
  double* v = malloc(sizeof(double) * n);
  double* u = malloc(sizeof(double) * n);
  double norm = 0;
  int it, i, j;
  for (i = 0; i < n; ++i) v[i] = sin(1.0 + 3.7 * i);
  for (it = 0; it < 2000; ++it) {
    double mean = 0, len = 0;
    for (i = 0; i < n; ++i) mean += v[i] / n;
    for (i = 0; i < n; ++i) v[i] -= mean;
    for (j = 0; j < n; ++j) { /* u = M^T-applied: u_j = sum_i M[i][j] v_i */
      u[j] = 0;
      for (i = 0; i < n; ++i) u[j] += m[i * n + j] * v[i];
    }
    mean = 0;
    for (j = 0; j < n; ++j) mean += u[j] / n;
    for (j = 0; j < n; ++j) u[j] -= mean;
    for (i = 0; i < n; ++i) { /* v = (M applied)^T u */
      v[i] = 0;
      for (j = 0; j < n; ++j) v[i] += m[i * n + j] * u[j];
    }
    for (i = 0; i < n; ++i) len += v[i] * v[i];
    len = sqrt(len);
    if (len < 1e-300) break;
    norm = sqrt(len);
    for (i = 0; i < n; ++i) v[i] /= len;
  }
  free(u);
  free(v);
  return norm;
}

/* The mixing matrix the default weights of a weighted topology define. */
static void mixing_matrix(starling_topology_t topo, int n, double* m) {
  int edges = 0, e;
  int *src, *dst;
  double* w;
  CHECK(starling_topology_num_edges(topo, &edges));
  src = malloc(sizeof(int) * edges);
  dst = malloc(sizeof(int) * edges);
  w = malloc(sizeof(double) * edges);
  CHECK(starling_topology_edges(topo, src, dst, w, edges));
  memset(m, 0, sizeof(double) * n * n);
  for (e = 0; e < edges; ++e) m[src[e] * n + dst[e]] = w[e];
  free(src);
  free(dst);
  free(w);
}

static starling_status_t make_topology(const char* name, int n, starling_topology_t* out) {
  if (strcmp(name, "ring") == 0) return starling_topology_ring(n, STARLING_RING_BIDIRECTIONAL, out);
  if (strcmp(name, "mesh") == 0) return starling_topology_mesh_grid_2d(n, 0, 0, out);
  if (strcmp(name, "star") == 0) return starling_topology_star(n, 0, out);
  if (strcmp(name, "full") == 0) return starling_topology_fully_connected(n, out);
  return starling_topology_exponential_two(n, out);
}

/* Root-mean-square distance of all ranks' vectors to the true average. */
static double distance(starling_context_t ctx, const double* x, const double* average, int64_t len, int n) {
  double local = 0, total;
  int64_t one = 1, i;
  DLTensor t = vector(&total, &one);
  for (i = 0; i < len; ++i) local += (x[i] - average[i]) * (x[i] - average[i]);
  total = local;
  CHECK(starling_allreduce(ctx, &t, &t, STARLING_SUM, "distance"));
  return sqrt(total / n);
}

int main(int argc, char** argv) {
  const char* kind = argc > 1 ? argv[1] : "exp2";
  const int iterations = argc > 2 ? atoi(argv[2]) : 20;
  int64_t len = argc > 3 ? atoll(argv[3]) : 1000;
  int dynamic = strcmp(kind, "dynamic") == 0;
  starling_context_t ctx;
  starling_topology_t topo;
  starling_schedule_t* all = NULL;
  int rank, n, it, failures = 0, measured_steps = 0;
  double *x, *next, *average, *m, *q = NULL, *step = NULL, *tmp = NULL, predicted, previous, initial,
      sum_log_ratio = 0;
  DLTensor tx, tnext, tavg;
  int64_t i;

  CHECK(starling_context_create(NULL, &ctx));
  CHECK(starling_rank(ctx, &rank));
  CHECK(starling_size(ctx, &n));
  x = malloc(sizeof(double) * len);
  next = malloc(sizeof(double) * len);
  average = malloc(sizeof(double) * len);
  m = malloc(sizeof(double) * n * n);
  srand(1234u + 77u * (unsigned)rank);
  for (i = 0; i < len; ++i) x[i] = (double)rand() / RAND_MAX;
  tx = vector(x, &len);
  tnext = vector(next, &len);
  tavg = vector(average, &len);
  CHECK(starling_allreduce(ctx, &tx, &tavg, STARLING_AVERAGE, "true average"));

  if (dynamic && n == 1) dynamic = 0; /* one rank has no peer to talk to */
  CHECK(make_topology(kind, n, &topo));
  if (dynamic) {
    /* Every rank steps every rank's schedule, to know each step's whole matrix. */
    int r;
    all = malloc(sizeof(starling_schedule_t) * n);
    for (r = 0; r < n; ++r) CHECK(starling_schedule_dynamic_one_peer(topo, r, &all[r]));
    q = calloc((size_t)n * n, sizeof(double));
    step = malloc(sizeof(double) * n * n);
    tmp = malloc(sizeof(double) * n * n);
    for (r = 0; r < n; ++r) q[r * n + r] = 1.0;
  } else {
    CHECK(starling_set_topology(ctx, topo, 1));
  }
  if (dynamic) {
    predicted = 0; /* each step averages with one peer; see the comment at the top */
  } else {
    mixing_matrix(topo, n, m);
    predicted = contraction(m, n);
  }
  previous = initial = distance(ctx, x, average, len, n);
  if (rank == 0) {
    printf("average consensus: %s topology, %d ranks, vectors of %lld doubles\n", kind, n, (long long)len);
    if (!dynamic) printf("second-largest singular value of the mixing matrix: %.6f (predicted ratio per iteration)\n",
                         predicted);
    if (dynamic) printf("%5s %14s %14s %14s\n", "iter", "distance", "d_t / d_0", "bound ||Q_t-J||");
    else printf("%5s %14s %10s %10s\n", "iter", "distance", "ratio", "predicted");
    printf("%5d %14.6e\n", 0, previous);
  }
  for (it = 1; it <= iterations; ++it) {
    if (dynamic) {
      int send[8], recv[64], nsend, nrecv, j, r, k;
      double self, weights[64];
      starling_neighbor_args_t args = STARLING_NEIGHBOR_ARGS_INIT;
      memset(step, 0, sizeof(double) * n * n);
      for (r = 0; r < n; ++r) {
        CHECK(starling_schedule_next(all[r], send, 8, &nsend, recv, 64, &nrecv));
        step[r * n + r] = 1.0 / (nrecv + 1);
        for (j = 0; j < nrecv; ++j) step[recv[j] * n + r] = 1.0 / (nrecv + 1);
        if (r != rank) continue;
        self = 1.0 / (nrecv + 1);
        for (j = 0; j < nrecv; ++j) weights[j] = self;
        args.dynamic = 1;
        args.use_weights = 1;
        args.self_weight = self;
        args.num_sources = nrecv;
        args.source_ranks = recv;
        args.source_weights = weights;
        args.num_destinations = nsend;
        args.destination_ranks = send;
        CHECK(starling_neighbor_allreduce(ctx, &tx, &tnext, &args));
      }
      for (r = 0; r < n; ++r) /* q = q * step */
        for (j = 0; j < n; ++j) {
          tmp[r * n + j] = 0;
          for (k = 0; k < n; ++k) tmp[r * n + j] += q[r * n + k] * step[k * n + j];
        }
      memcpy(q, tmp, sizeof(double) * n * n);
      predicted = contraction(q, n);
    } else {
      CHECK(starling_neighbor_allreduce(ctx, &tx, &tnext, NULL));
    }
    memcpy(x, next, sizeof(double) * len);
    {
      const double d = distance(ctx, x, average, len, n);
      const double ratio = previous > 0 ? d / previous : 0;
      if (rank == 0) {
        if (dynamic) printf("%5d %14.6e %14.6e %14.6e\n", it, d, d / initial, predicted);
        else printf("%5d %14.6e %10.4f %10.4f\n", it, d, ratio, predicted);
      }
      /* Compare the geometric mean of the measured ratios (after a few transient
       * steps, while the distance is far above rounding) with the prediction. */
      if (!dynamic && it > 3 && d > 1e-11 && previous > 0 && predicted > 0) {
        sum_log_ratio += log(ratio);
        ++measured_steps;
      }
      /* The bound must hold (up to rounding of the float64 sums). */
      if (dynamic && d > predicted * initial * (1 + 1e-9) + 1e-12 * initial) {
        if (rank == 0) fprintf(stderr, "distance %.3e exceeds the bound %.3e\n", d, predicted * initial);
        failures = 1;
      }
      previous = d;
    }
  }
  if (!dynamic && measured_steps > 0 && rank == 0) {
    const double measured = exp(sum_log_ratio / measured_steps);
    printf("measured rate %.4f, predicted %.4f\n", measured, predicted);
    if (fabs(measured - predicted) > 0.1 * predicted + 1e-3) {
      fprintf(stderr, "measured and predicted rates disagree\n");
      failures = 1;
    }
  }
  if (dynamic && rank == 0) printf("final distance %.3e\n", previous);
  CHECK(starling_broadcast(ctx, &tx, &tx, 0, NULL)); /* keep ranks together before exit */
  if (all) {
    int r;
    for (r = 0; r < n; ++r) starling_schedule_free(all[r]);
    free(all);
    free(q);
    free(step);
    free(tmp);
  }
  starling_topology_free(topo);
  CHECK(starling_context_destroy(ctx));
  free(x);
  free(next);
  free(average);
  free(m);
  return failures;
}
