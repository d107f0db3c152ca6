package org.starling;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Java's resize, end to end (run by tests/fault/run_grow_test.py under
 * {@code mpirun --with-ft ulfm} on Open MPI 5): 4 ranks; {@code resize(2)} makes ranks 2
 * and 3 leave (they print LEFT and exit 0); the 2 that stay check an allreduce exactly;
 * {@code resize(5)} starts 3 JVMs with this same command line, which join inside
 * {@link Context#create()}; then every member checks an allreduce and a neighbor
 * allreduce exactly and the newcomers pull rank 0's parameters bit for bit. Prints one
 * MEMBER line per member of the final context.
 */
public final class ResizeMain {
  private ResizeMain() {}

  public static void main(String[] args) throws Exception {
    Context ctx = Context.create();
    boolean joined = ctx.joined();
    List<String> problems = new ArrayList<>();
    if (!joined) {
      int first = ctx.rank();
      if (ctx.size() != 4) problems.add("started at size " + ctx.size() + ", not 4");
      Renumbering shrunk = ctx.resize(2);
      if (!(shrunk instanceof ShrinkResult) || !Arrays.equals(((ShrinkResult) shrunk).leftRanks(), new int[] {2, 3})
          || !Arrays.equals(shrunk.oldToNew(), new int[] {0, 1, -1, -1})) {
        problems.add("resize(2) returned " + shrunk);
      }
      if (((ShrinkResult) shrunk).leftThisRank()) {
        try {
          MemberChecks.checkAllreduce(ctx, problems);
          problems.add("an allreduce after leaving did not throw");
        } catch (StarlingException e) {
          if (e.status() != Status.INVALID_USAGE) problems.add("after leaving: " + e);
        }
        ctx.close();  // local
        System.out.println("LEFT rank=" + first + (problems.isEmpty() ? "" : " problems=" + problems));
        System.out.flush();
        System.exit(problems.isEmpty() ? 0 : 1);
      }
      if (ctx.size() != 2 || ctx.rank() != first) problems.add("rank " + ctx.rank() + " of " + ctx.size());
      MemberChecks.checkAllreduce(ctx, problems);
      Renumbering grown = ctx.resize(5);
      if (!(grown instanceof GrowResult) || !Arrays.equals(((GrowResult) grown).joinedRanks(), new int[] {2, 3, 4})) {
        problems.add("resize(5) returned " + grown);
      }
    }
    if (ctx.size() != 5) problems.add("final size " + ctx.size());
    MemberChecks.finish(ctx, joined, "", problems);
  }
}
