/* Decentralized least squares with gradient tracking (DIGing: Nedic, Olshevsky and Shi,
 * "Achieving geometric convergence for distributed optimization over time-varying
 * graphs", 2017), a few lines over neighbor_allreduce.
 *
 * Rank i holds (A_i, b_i); all ranks solve min_x sum_i ||A_i x - b_i||^2 / 2 talking
 * only to their ring neighbors (W: uniform weights, symmetric and doubly stochastic):
 *
 *   x_{k+1} = W x_k - lr y_k
 *   y_{k+1} = W y_k + grad_i(x_{k+1}) - grad_i(x_k),   y_0 = grad_i(x_0)
 *
 * y tracks the average gradient, so with a constant step every rank reaches the exact
 * minimizer x*. Decentralized gradient descent with the same step and weights
 * (x_{k+1} = W x_k - lr grad_i(x_k)) stalls at a biased point; it runs alongside for
 * comparison. The program exits non-zero unless gradient tracking is within
 * `tolerance` of x* on every rank (and, with more than one rank, plain decentralized
 * gradient descent is at least 100 times farther).
 *
 *   starlingrun -np 4 gradient_tracking [iterations] [tolerance] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starling/starling.h>

#include "example_util.h"

#define DIM 5
#define ROWS 20

/* Uniform in [-1, 1) from a 64-bit linear congruential generator (the same on every
 * platform, unlike rand()). */
static double uniform(unsigned long long* state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Rank-dependent rows of one noisy linear model: the local minimizers all differ. */
static void local_problem(int rank, double* a, double* b) {
  unsigned long long truth = 7, state = 1000u + (unsigned)rank;
  double x_true[DIM];
  int r, c;
  for (c = 0; c < DIM; ++c) x_true[c] = uniform(&truth);
  for (r = 0; r < ROWS; ++r) {
    b[r] = 0.3 * uniform(&state);
    for (c = 0; c < DIM; ++c) {
      a[r * DIM + c] = uniform(&state) * (1.0 + 0.5 * rank);
      b[r] += a[r * DIM + c] * x_true[c];
    }
  }
}

/* g = A^T (A x - b) */
static void gradient(const double* a, const double* b, const double* x, double* g) {
  int r, c;
  memset(g, 0, sizeof(double) * DIM);
  for (r = 0; r < ROWS; ++r) {
    double residual = -b[r];
    for (c = 0; c < DIM; ++c) residual += a[r * DIM + c] * x[c];
    for (c = 0; c < DIM; ++c) g[c] += a[r * DIM + c] * residual;
  }
}

/* v <- M^{-1} v for the DIM x DIM matrix M (Gaussian elimination, partial pivoting). */
static void solve(double* m, double* v) {
  int i, j, k;
  for (k = 0; k < DIM; ++k) {
    int pivot = k;
    for (i = k + 1; i < DIM; ++i)
      if (fabs(m[i * DIM + k]) > fabs(m[pivot * DIM + k])) pivot = i;
    for (j = 0; j < DIM; ++j) {
      double t = m[k * DIM + j];
      m[k * DIM + j] = m[pivot * DIM + j];
      m[pivot * DIM + j] = t;
    }
    { double t = v[k]; v[k] = v[pivot]; v[pivot] = t; }
    for (i = k + 1; i < DIM; ++i) {
      double f = m[i * DIM + k] / m[k * DIM + k];
      for (j = k; j < DIM; ++j) m[i * DIM + j] -= f * m[k * DIM + j];
      v[i] -= f * v[k];
    }
  }
  for (k = DIM - 1; k >= 0; --k) {
    for (j = k + 1; j < DIM; ++j) v[k] -= m[k * DIM + j] * v[j];
    v[k] /= m[k * DIM + k];
  }
}

/* The largest eigenvalue of A^T A (the local gradient's Lipschitz constant), by power
 * iteration. */
static double lipschitz_constant(const double* a) {
  double v[DIM], w[DIM], zero[ROWS] = {0}, norm = 0;
  int it, c;
  for (c = 0; c < DIM; ++c) v[c] = 1.0 / sqrt((double)DIM);
  for (it = 0; it < 200; ++it) {
    gradient(a, zero, v, w); /* w = A^T A v */
    norm = 0;
    for (c = 0; c < DIM; ++c) norm += w[c] * w[c];
    norm = sqrt(norm);
    for (c = 0; c < DIM; ++c) v[c] = w[c] / norm;
  }
  return norm;
}

/* max over ranks of ||x - x_star||. */
static double max_distance(starling_context_t ctx, const double* x, const double* x_star, const char* name) {
  double d = 0;
  int64_t one = 1;
  int c;
  DLTensor t = vector(&d, &one);
  for (c = 0; c < DIM; ++c) d += (x[c] - x_star[c]) * (x[c] - x_star[c]);
  d = sqrt(d);
  CHECK(starling_allreduce(ctx, &t, &t, STARLING_MAX, name));
  return d;
}

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? atoi(argv[1]) : 400;
  const double tolerance = argc > 2 ? atof(argv[2]) : 1e-8;
  double a[ROWS * DIM], b[ROWS], normal[DIM * DIM + DIM], x_star[DIM], lipschitz = 0;
  double x[DIM] = {0}, y[DIM], g[DIM], g_new[DIM], wx[DIM], wy[DIM], xd[DIM] = {0}, gd[DIM], wxd[DIM];
  double lr, error_gt, error_plain;
  int64_t dim = DIM, normal_len = DIM * DIM + DIM, one = 1;
  DLTensor tx = vector(x, &dim), ty = vector(y, &dim), twx = vector(wx, &dim), twy = vector(wy, &dim);
  DLTensor txd = vector(xd, &dim), twxd = vector(wxd, &dim);
  DLTensor tnormal = vector(normal, &normal_len), tl = vector(&lipschitz, &one);
  starling_context_t ctx;
  starling_topology_t ring;
  int rank, size, k, r, c, i;

  if (iterations < 1 || !(tolerance > 0)) {
    fprintf(stderr, "usage: gradient_tracking [iterations >= 1] [tolerance > 0]\n");
    return 2;
  }
  CHECK(starling_context_create(NULL, &ctx));
  CHECK(starling_rank(ctx, &rank));
  CHECK(starling_size(ctx, &size));
  CHECK(starling_topology_ring(size, STARLING_RING_BIDIRECTIONAL, &ring));
  CHECK(starling_set_topology(ctx, ring, 0)); /* unweighted: uniform over self and in-neighbors */
  local_problem(rank, a, b);

  /* Reference: x* = (sum_i A_i^T A_i)^{-1} sum_i A_i^T b_i, one allreduce. */
  for (i = 0; i < DIM; ++i)
    for (c = 0; c < DIM + 1; ++c) {
      double s = 0;
      for (r = 0; r < ROWS; ++r) s += a[r * DIM + i] * (c < DIM ? a[r * DIM + c] : b[r]);
      if (c < DIM) normal[i * DIM + c] = s;
      else normal[DIM * DIM + i] = s;
    }
  CHECK(starling_allreduce(ctx, &tnormal, &tnormal, STARLING_SUM, "normal equations"));
  memcpy(x_star, normal + DIM * DIM, sizeof x_star);
  solve(normal, x_star);
  /* Step 1 / (4 L), L the largest local Lipschitz constant (gradient tracking needs a
   * smaller step than gradient descent: 1 / (2 L) diverges on the ring of 4). */
  lipschitz = lipschitz_constant(a);
  CHECK(starling_allreduce(ctx, &tl, &tl, STARLING_MAX, "lipschitz"));
  lr = 0.25 / lipschitz;

  gradient(a, b, x, g);
  memcpy(y, g, sizeof y);
  for (k = 1; k <= iterations; ++k) {
    /* Gradient tracking: both averages with the neighbors, then the local updates. */
    CHECK(starling_neighbor_allreduce(ctx, &tx, &twx, NULL));
    CHECK(starling_neighbor_allreduce(ctx, &ty, &twy, NULL));
    for (c = 0; c < DIM; ++c) x[c] = wx[c] - lr * y[c];
    gradient(a, b, x, g_new);
    for (c = 0; c < DIM; ++c) y[c] = wy[c] + g_new[c] - g[c];
    memcpy(g, g_new, sizeof g);
    /* Plain decentralized gradient descent, same step and weights. */
    gradient(a, b, xd, gd);
    CHECK(starling_neighbor_allreduce(ctx, &txd, &twxd, NULL));
    for (c = 0; c < DIM; ++c) xd[c] = wxd[c] - lr * gd[c];
    if (k == 1 || k % 100 == 0 || k == iterations) {
      error_gt = max_distance(ctx, x, x_star, "error gt");
      error_plain = max_distance(ctx, xd, x_star, "error plain");
      if (rank == 0)
        printf("iteration %4d: max distance to x*: gradient tracking %.3e, decentralized gradient descent %.3e\n",
               k, error_gt, error_plain);
    }
  }
  CHECK(starling_topology_free(ring));
  CHECK(starling_context_destroy(ctx));
  if (!(error_gt <= tolerance) || (size > 1 && !(error_plain > 100 * error_gt))) {
    if (rank == 0) fprintf(stderr, "FAILED: gradient tracking error %.3e (tolerance %.1e), plain %.3e\n", error_gt,
                           tolerance, error_plain);
    return 1;
  }
  return 0;
}
