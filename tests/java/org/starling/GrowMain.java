package org.starling;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Java's grow, end to end (run by tests/fault/run_grow_test.py under
 * {@code mpirun --with-ft ulfm} on Open MPI 5): rank 1 SIGKILLs itself during an
 * allreduce loop; the survivors catch PeerFailedException, repair, and grow by one
 * process at rank 1. The new process is this same JVM command line: its
 * {@link Context#create()} joins the running job and {@link Context#joined()} is true.
 * Then every member checks an allreduce and a neighbor allreduce exactly, and the
 * newcomer pulls rank 0's parameters with one broadcast, bit for bit. Prints one MEMBER
 * line per member of the grown context.
 */
public final class GrowMain {
  private static final int VICTIM = 1;
  private static final int KILL_AT = 3;

  private GrowMain() {}

  public static void main(String[] args) throws Exception {
    Context ctx = Context.create();
    boolean joined = ctx.joined();
    List<String> problems = new ArrayList<>();
    double growSeconds = 0;
    if (!joined) {
      int rank = ctx.rank();
      int size = ctx.size();
      Tensor t = Tensor.of(new double[] {rank});
      PeerFailedException failure = null;
      for (int it = 0; it < 100000 && failure == null; ++it) {
        if (rank == VICTIM && it == KILL_AT) {
          new ProcessBuilder("kill", "-KILL", Long.toString(ProcessHandle.current().pid())).start().waitFor();
          Thread.sleep(60_000);  // not reached
        }
        try {
          ctx.allreduce(t, Tensor.allocate(DType.FLOAT64, 1), ReduceOp.SUM);
        } catch (PeerFailedException e) {
          failure = e;
        }
      }
      if (failure == null) problems.add("no PeerFailedException");
      ctx.repair();
      long start = System.nanoTime();
      GrowResult grown = ctx.grow(1, new int[] {VICTIM});
      growSeconds = (System.nanoTime() - start) / 1e9;
      int[] expectedMap = new int[size - 1];  // survivors' repaired ranks -> grown ranks
      Arrays.setAll(expectedMap, r -> r < VICTIM ? r : r + 1);
      if (grown.newSize() != size || grown.oldSize() != size - 1 || !Arrays.equals(grown.oldToNew(), expectedMap)
          || !Arrays.equals(grown.joinedRanks(), new int[] {VICTIM}) || ctx.size() != size
          || ctx.rank() != expectedMap[grown.oldRank()]) {
        problems.add("grow returned " + grown);
      }
    }
    // Every member, the newcomer included: exact results over the grown context, and the
    // newcomer pulls the parameters the others hold.
    MemberChecks.finish(ctx, joined, "grow_s=" + String.format("%.3f", growSeconds) + " ", problems);
  }
}
