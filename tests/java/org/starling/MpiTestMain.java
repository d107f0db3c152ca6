package org.starling;

import java.util.ArrayList;
import java.util.List;
import org.junit.runner.Description;
import org.junit.runner.JUnitCore;
import org.junit.runner.Result;
import org.junit.runner.notification.Failure;
import org.junit.runner.notification.RunListener;

/**
 * Runs JUnit 4 test classes on every rank of an mpirun job (each rank runs the same
 * tests in the same order, which is what keeps their collectives matched). Failures are
 * printed with their rank; rank 0 prints the summary; the verdict is agreed through an
 * allreduce so every rank exits 1 if any rank failed.
 *
 * <p>Usage: java -cp ... org.starling.MpiTestMain [TestClass...] (default: all).
 */
public final class MpiTestMain {
  private static final String[] ALL = {
    "org.starling.TopologyTest", "org.starling.ContextTest", "org.starling.CollectivesTest",
    "org.starling.NeighborTest", "org.starling.WindowTest", "org.starling.BadInputTest",
    "org.starling.DeviceTest", "org.starling.AbortTest", "org.starling.RepairTest", "org.starling.ScatterTest",
  };

  private MpiTestMain() {}

  public static void main(String[] args) throws ClassNotFoundException {
    List<Class<?>> classes = new ArrayList<>();
    for (String name : args.length > 0 ? args : ALL) classes.add(Class.forName(name));
    int rank = Integer.parseInt(System.getenv().getOrDefault("OMPI_COMM_WORLD_RANK", "0"));
    JUnitCore core = new JUnitCore();
    core.addListener(new RunListener() {
      @Override
      public void testFailure(Failure failure) {
        System.err.println("[rank " + rank + "] FAILED " + failure.getTestHeader() + ": " + failure.getTrace());
      }

      @Override
      public void testAssumptionFailure(Failure failure) {
        if (rank == 0) System.out.println("skipped " + failure.getTestHeader() + ": " + failure.getMessage());
      }

      @Override
      public void testIgnored(Description description) {
        if (rank == 0) System.out.println("ignored " + description.getDisplayName());
      }
    });
    long start = System.nanoTime();
    Result result = core.run(classes.toArray(new Class<?>[0]));
    long[] failed = {result.getFailureCount()};
    int size = 1;
    try {
      Context context = TestSupport.context();
      size = context.size();
      Tensor t = Tensor.of(failed);
      context.allreduce(t, t, ReduceOp.SUM);
      TestSupport.closeContext();
    } catch (RuntimeException e) {
      System.err.println("[rank " + rank + "] could not agree on the verdict: " + e);
      failed[0] = Math.max(failed[0], 1);
    }
    if (rank == 0) {
      System.out.printf("%s: %d tests, %d failed (all ranks), %d skipped, %.1f s on %d ranks%n",
          failed[0] == 0 ? "OK" : "FAILED", result.getRunCount(), failed[0],
          result.getIgnoreCount() + result.getAssumptionFailureCount(), (System.nanoTime() - start) / 1e9, size);
    }
    System.exit(failed[0] == 0 ? 0 : 1);
  }
}
