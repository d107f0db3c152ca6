package org.starling;

import java.util.Arrays;
import java.util.List;

/**
 * What every member of a resized context checks in {@link GrowMain} and
 * {@link ResizeMain}, the newcomers included: exact collective results over the new
 * context, and the parameters rank 0 holds, pulled bit for bit. Each check adds what it
 * found wrong to {@code problems}.
 */
final class MemberChecks {
  static final double[] PARAMETERS = {3.5, -1.25, 1e-300, 7.0 / 3.0};

  private MemberChecks() {}

  /** The sum of rank + 1 over the context, exact in float64. */
  static void checkAllreduce(Context ctx, List<String> problems) {
    int size = ctx.size();
    Tensor sum = Tensor.allocate(DType.FLOAT64, 1);
    ctx.allreduce(Tensor.of(new double[] {ctx.rank() + 1.0}), sum, ReduceOp.SUM);
    if (sum.getDouble(0) != size * (size + 1) / 2.0) {
      problems.add("allreduce at size " + size + " gave " + sum.getDouble(0));
    }
  }

  /** The neighbor average of the ranks over the context's (regenerated) topology. */
  static void checkNeighborAverage(Context ctx, List<String> problems) {
    int rank = ctx.rank();
    Tensor averaged = Tensor.allocate(DType.FLOAT64, 1);
    ctx.neighborAllreduce(Tensor.of(new double[] {rank}), averaged);
    double expected = rank;
    int[] sources = ctx.inNeighbors();
    for (int s : sources) expected += s;
    expected /= sources.length + 1;
    if (Math.abs(averaged.getDouble(0) - expected) > 1e-12) {
      problems.add("neighbor allreduce gave " + averaged.getDouble(0) + ", expected " + expected);
    }
  }

  /** One broadcast from rank 0: a process that joined pulls {@link #PARAMETERS}. */
  static void checkPulledParameters(Context ctx, boolean joined, List<String> problems) {
    Tensor params = joined ? Tensor.allocate(DType.FLOAT64, PARAMETERS.length) : Tensor.of(PARAMETERS.clone());
    ctx.broadcast(params, params, 0);
    if (!Arrays.equals(params.toDoubleArray(), PARAMETERS)) {
      problems.add("parameters after the broadcast " + Arrays.toString(params.toDoubleArray()));
    }
  }

  /**
   * Runs the three checks, closes the context and prints the MEMBER line the test
   * driver reads ({@code fields}: extra "name=value " pairs); exits 1 on a problem.
   */
  static void finish(Context ctx, boolean joined, String fields, List<String> problems) {
    int rank = ctx.rank();
    int size = ctx.size();
    checkAllreduce(ctx, problems);
    checkNeighborAverage(ctx, problems);
    checkPulledParameters(ctx, joined, problems);
    ctx.close();
    String verdict = problems.isEmpty() ? "ok=1" : "ok=0 reason=" + String.join("; ", problems);
    System.out.println("MEMBER rank=" + rank + " joined=" + (joined ? 1 : 0) + " " + fields + "size=" + size + " "
        + verdict);
    System.out.flush();
    if (!problems.isEmpty()) System.exit(1);
  }
}
