package org.starling.examples;

import org.starling.Context;
import org.starling.NeighborArgs;
import org.starling.ReduceOp;
import org.starling.RingStyle;
import org.starling.Tensor;
import org.starling.Topology;

/**
 * Decentralized least squares with exact diffusion (Yuan, Ying, Zhao and Sayed, 2019), a
 * few lines over neighbor allreduce. Rank i holds (A_i, b_i); all ranks solve
 * min_x sum_i ||A_i x - b_i||^2 / 2 talking only to their ring neighbors, combining with
 * W_bar = (I + W) / 2 (W: uniform ring weights, symmetric and doubly stochastic):
 *
 * <pre>
 *   psi_{k+1} = x_k - lr grad_i(x_k)           adapt
 *   phi_{k+1} = psi_{k+1} + x_k - psi_k        correct (psi_0 = x_0)
 *   x_{k+1}   = W_bar phi_{k+1}                combine
 * </pre>
 *
 * <p>With a constant step every rank reaches the exact minimizer x*; plain diffusion
 * (adapt, then combine, same step and weights) stalls at a biased point and runs
 * alongside for comparison. The problem is examples/c/gradient_tracking.c's. Exits 1
 * unless exact diffusion is within the tolerance of x* on every rank (and, with more
 * than one rank, plain diffusion at least 100 times farther). Usage:
 * {@code mpirun -np 4 java -cp starling.jar:examples.jar org.starling.examples.ExactDiffusion
 * [--iterations 300] [--tolerance 1e-10]}
 */
public final class ExactDiffusion {
  private static final int DIM = 5;
  private static final int ROWS = 20;

  private ExactDiffusion() {}

  /** Uniform in [-1, 1) from the 64-bit LCG of the C example (the same numbers). */
  private static final class Lcg {
    private long state;

    Lcg(long seed) {
      state = seed;
    }

    double next() {
      state = state * 6364136223846793005L + 1442695040888963407L;
      return (double) (state >>> 11) / 9007199254740992.0 * 2.0 - 1.0;
    }
  }

  public static void main(String[] args) {
    int iterations = 300;
    double tolerance = 1e-10;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--iterations": iterations = Integer.parseInt(args[i + 1]); break;
        case "--tolerance": tolerance = Double.parseDouble(args[i + 1]); break;
        default: throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    double[] errors;
    int size;
    try (Context ctx = Context.create(); Topology ring = Topology.ring(ctx.size(), RingStyle.BIDIRECTIONAL)) {
      size = ctx.size();
      errors = solve(ctx, ring, iterations);
    }
    if (!(errors[0] <= tolerance) || (size > 1 && !(errors[1] > 100 * errors[0]))) {
      System.err.printf("FAILED: exact diffusion error %.3e (tolerance %.1e), plain diffusion %.3e%n", errors[0],
          tolerance, errors[1]);
      System.exit(1);
    }
  }

  /** {max distance to x* of exact diffusion, of plain diffusion} after the iterations. */
  private static double[] solve(Context ctx, Topology ring, int iterations) {
    int rank = ctx.rank();
    ctx.setTopology(ring, false);
    double[][] a = new double[ROWS][DIM];
    double[] b = new double[ROWS];
    localProblem(rank, a, b);
    double[] xStar = centralizedSolution(ctx, a, b);
    double[] lipschitz = {lipschitzConstant(a)};
    ctx.allreduce(Tensor.of(lipschitz), Tensor.of(lipschitz), ReduceOp.MAX, "lipschitz");
    double lr = 1.0 / lipschitz[0];

    // W_bar = (I + W) / 2 with W uniform over self and the in-neighbors.
    int[] sources = ring.inNeighbors(rank);
    double w = 1.0 / (sources.length + 1);
    double[] sourceWeights = new double[sources.length];
    java.util.Arrays.fill(sourceWeights, w / 2);
    NeighborArgs combine = NeighborArgs.weighted((1 + w) / 2, sources, sourceWeights);

    double[] x = new double[DIM];
    double[] psiPrevious = x.clone();
    double[] plain = new double[DIM];
    double[] errors = new double[2];
    for (int k = 1; k <= iterations; ++k) {
      double[] psi = adapt(a, b, x, lr);
      double[] phi = new double[DIM];
      for (int c = 0; c < DIM; ++c) phi[c] = psi[c] + x[c] - psiPrevious[c];
      psiPrevious = psi;
      ctx.neighborAllreduce(Tensor.of(phi), Tensor.of(x), combine);
      double[] adapted = adapt(a, b, plain, lr);
      ctx.neighborAllreduce(Tensor.of(adapted), Tensor.of(plain), combine);
      if (k == 1 || k % 100 == 0 || k == iterations) {
        errors[0] = distance(x, xStar);
        errors[1] = distance(plain, xStar);
        ctx.allreduce(Tensor.of(errors), Tensor.of(errors), ReduceOp.MAX, "errors");
        if (rank == 0) {
          System.out.printf("iteration %4d: max distance to x*: exact diffusion %.3e, plain diffusion %.3e%n", k,
              errors[0], errors[1]);
        }
      }
    }
    return errors;
  }

  private static void localProblem(int rank, double[][] a, double[] b) {
    Lcg truth = new Lcg(7);
    Lcg rows = new Lcg(1000 + rank);
    double[] xTrue = new double[DIM];
    for (int c = 0; c < DIM; ++c) xTrue[c] = truth.next();
    for (int r = 0; r < ROWS; ++r) {
      b[r] = 0.3 * rows.next();
      for (int c = 0; c < DIM; ++c) {
        a[r][c] = rows.next() * (1.0 + 0.5 * rank);
        b[r] += a[r][c] * xTrue[c];
      }
    }
  }

  /** A^T (A x - b). */
  private static double[] gradient(double[][] a, double[] b, double[] x) {
    double[] g = new double[DIM];
    for (int r = 0; r < ROWS; ++r) {
      double residual = -b[r];
      for (int c = 0; c < DIM; ++c) residual += a[r][c] * x[c];
      for (int c = 0; c < DIM; ++c) g[c] += a[r][c] * residual;
    }
    return g;
  }

  private static double[] adapt(double[][] a, double[] b, double[] x, double lr) {
    double[] g = gradient(a, b, x);
    double[] next = new double[DIM];
    for (int c = 0; c < DIM; ++c) next[c] = x[c] - lr * g[c];
    return next;
  }

  /** The largest eigenvalue of A^T A, by power iteration. */
  private static double lipschitzConstant(double[][] a) {
    double[] v = new double[DIM];
    java.util.Arrays.fill(v, 1.0 / Math.sqrt(DIM));
    double norm = 0;
    for (int it = 0; it < 200; ++it) {
      double[] u = gradient(a, new double[ROWS], v);
      norm = Math.sqrt(dot(u, u));
      for (int c = 0; c < DIM; ++c) v[c] = u[c] / norm;
    }
    return norm;
  }

  /** x* = (sum_i A_i^T A_i)^{-1} sum_i A_i^T b_i: one allreduce, then Gaussian elimination. */
  private static double[] centralizedSolution(Context ctx, double[][] a, double[] b) {
    double[] normal = new double[DIM * DIM + DIM];
    for (int r = 0; r < ROWS; ++r) {
      for (int i = 0; i < DIM; ++i) {
        for (int c = 0; c < DIM; ++c) normal[i * DIM + c] += a[r][i] * a[r][c];
        normal[DIM * DIM + i] += a[r][i] * b[r];
      }
    }
    ctx.allreduce(Tensor.of(normal), Tensor.of(normal), ReduceOp.SUM, "normal equations");
    double[][] m = new double[DIM][DIM + 1];
    for (int i = 0; i < DIM; ++i) {
      System.arraycopy(normal, i * DIM, m[i], 0, DIM);
      m[i][DIM] = normal[DIM * DIM + i];
    }
    for (int k = 0; k < DIM; ++k) {
      int pivot = k;
      for (int i = k + 1; i < DIM; ++i) {
        if (Math.abs(m[i][k]) > Math.abs(m[pivot][k])) pivot = i;
      }
      double[] t = m[k];
      m[k] = m[pivot];
      m[pivot] = t;
      for (int i = k + 1; i < DIM; ++i) {
        double f = m[i][k] / m[k][k];
        for (int j = k; j <= DIM; ++j) m[i][j] -= f * m[k][j];
      }
    }
    double[] x = new double[DIM];
    for (int k = DIM - 1; k >= 0; --k) {
      double s = m[k][DIM];
      for (int j = k + 1; j < DIM; ++j) s -= m[k][j] * x[j];
      x[k] = s / m[k][k];
    }
    return x;
  }

  private static double dot(double[] u, double[] v) {
    double s = 0;
    for (int c = 0; c < u.length; ++c) s += u[c] * v[c];
    return s;
  }

  private static double distance(double[] x, double[] y) {
    double s = 0;
    for (int c = 0; c < x.length; ++c) s += (x[c] - y[c]) * (x[c] - y[c]);
    return Math.sqrt(s);
  }
}
