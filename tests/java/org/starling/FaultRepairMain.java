package org.starling;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Java's repair, end to end (run by tests/fault/run_ulfm_test.py under
 * {@code mpirun --with-ft ulfm} on Open MPI 5): a repair with no failure renumbers
 * nothing; rank 1 SIGKILLs itself during an allreduce loop; every survivor catches a
 * PeerFailedException naming it; a repair with a topology of the wrong size fails with
 * INVALID_ARGUMENT and leaves the context failed; repair() then drops rank 1, and an
 * allreduce and a neighbor allreduce over the survivors are exact. Prints the driver's
 * VICTIM / SURVIVOR lines (times on CLOCK_MONOTONIC, which System.nanoTime reads).
 */
public final class FaultRepairMain {
  private static final int VICTIM = 1;
  private static final int KILL_AT = 5;

  private FaultRepairMain() {}

  private static String seconds(long nanos) {
    return String.format("%.6f", nanos / 1e9);
  }

  public static void main(String[] args) throws Exception {
    Context ctx = Context.create();
    int rank = ctx.rank();
    int size = ctx.size();
    List<String> problems = new ArrayList<>();
    if (!ctx.faultTolerant()) {
      System.out.println("SURVIVOR rank=" + rank + " ok=0 reason=not_fault_tolerant");
      System.exit(1);
    }
    RepairResult none = ctx.repair();  // no failure: nothing dropped, nothing renumbered
    int[] identity = new int[size];
    Arrays.setAll(identity, i -> i);
    if (none.newSize() != size || none.newRank() != rank || none.failedRanks().length != 0
        || !Arrays.equals(none.oldToNew(), identity)) {
      problems.add("repair without a failure returned " + none);
    }

    Tensor t = Tensor.of(new double[] {rank + 1.0, 2.0 * rank});
    PeerFailedException failure = null;
    for (int it = 0; it < 100000 && failure == null; ++it) {
      if (rank == VICTIM && it == KILL_AT) {
        long pid = ProcessHandle.current().pid();
        System.out.println("VICTIM rank=" + rank + " pid=" + pid + " mono=" + seconds(System.nanoTime()));
        System.out.flush();
        new ProcessBuilder("kill", "-KILL", Long.toString(pid)).start().waitFor();
        Thread.sleep(60_000);  // not reached
      }
      try {
        ctx.allreduce(t, Tensor.allocate(DType.FLOAT64, 2), ReduceOp.SUM);
      } catch (PeerFailedException e) {
        failure = e;
      }
    }
    long detect = System.nanoTime();
    if (failure == null || !Arrays.equals(failure.failedRanks(), new int[] {VICTIM})) {
      problems.add("expected a PeerFailedException naming rank " + VICTIM + ", got " + failure);
    }
    if (failure != null && failure.status() != Status.PEER_FAILED) problems.add("status " + failure.status());

    // Bad input after a failure: a topology over the old size. The context stays failed.
    try (Topology wrong = Topology.exponentialTwo(size)) {
      ctx.repair(wrong, false);
      problems.add("repair with a topology of " + size + " ranks over " + (size - 1) + " survivors succeeded");
    } catch (StarlingException e) {
      if (e.status() != Status.INVALID_ARGUMENT || !e.getMessage().contains("survived")) {
        problems.add("wrong-size topology: " + e);
      }
    }
    long start = System.nanoTime();
    RepairResult result = ctx.repair();
    int[] expectedMap = new int[size];
    Arrays.setAll(expectedMap, r -> r < VICTIM ? r : r == VICTIM ? -1 : r - 1);
    int newRank = ctx.rank();
    int newSize = ctx.size();
    if (result.newSize() != size - 1 || newSize != size - 1 || result.oldRank() != rank || result.oldSize() != size
        || newRank != expectedMap[rank] || result.newRank() != newRank
        || !Arrays.equals(result.oldToNew(), expectedMap)
        || !Arrays.equals(result.failedRanks(), new int[] {VICTIM})) {
      problems.add("repair returned " + result + " (size() " + newSize + ", rank() " + newRank + ")");
    }
    // Exact over the survivors: their old ranks' values (0-based old numbering).
    double sum = 0;
    for (int r = 0; r < size; ++r) {
      if (r != VICTIM) sum += r + 1.0;
    }
    Tensor out = Tensor.allocate(DType.FLOAT64, 2);
    ctx.allreduce(t, out, ReduceOp.SUM);
    long repaired = System.nanoTime();
    if (out.getDouble(0) != sum || out.getDouble(1) != 2.0 * (sum - (size - 1))) {
      problems.add("allreduce over the survivors gave " + Arrays.toString(out.toDoubleArray()) + ", expected ["
          + sum + ", " + 2.0 * (sum - (size - 1)) + "]");
    }
    // The topology is the same generator (exponential-2) over the survivors.
    Tensor mine = Tensor.of(new double[] {newRank});
    Tensor averaged = Tensor.allocate(DType.FLOAT64, 1);
    ctx.neighborAllreduce(mine, averaged);
    int[] sources = ctx.inNeighbors();
    double expected = newRank;
    for (int s : sources) expected += s;
    expected /= sources.length + 1;
    if (Math.abs(averaged.getDouble(0) - expected) > 1e-12) {
      problems.add("neighbor allreduce gave " + averaged.getDouble(0) + ", expected " + expected + " (in-neighbors "
          + Arrays.toString(sources) + ")");
    }
    ctx.close();
    if (!problems.isEmpty()) {
      System.out.println("SURVIVOR rank=" + rank + " ok=0 reason=" + String.join("; ", problems));
      System.exit(1);
    }
    System.out.println("SURVIVOR rank=" + rank + " ok=1 detect_mono=" + seconds(detect) + " repaired_mono="
        + seconds(repaired) + " repair_s=" + seconds(repaired - start) + " new_rank=" + newRank + " new_size="
        + newSize + " message=" + failure.getMessage());
  }
}
