package org.starling;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;

import java.util.List;
import java.util.Map;
import org.junit.After;
import org.junit.Before;
import org.junit.FixMethodOrder;
import org.junit.Test;
import org.junit.runners.MethodSorters;

/** One-sided windows through the Java layer, against references from the topology. */
@FixMethodOrder(MethodSorters.NAME_ASCENDING)
public class WindowTest extends ContextTestBase {
  @Before
  public void resetTopology() {
    TestSupport.resetTopology(ctx);
  }

  @After
  public void tearDown() {
    for (String name : ctx.windowNames()) ctx.window(name).close();
  }

  /** Reads this rank's buffer for {@code source} into the window tensor (weight 1, self 0). */
  private static void readBuffer(Window w, int source) {
    w.update(WindowUpdateArgs.weighted(0.0, new int[] {source}, new double[] {1.0}));
  }

  @Test
  public void createLookupNamesAndClose() {
    Window a = ctx.createWindow(Tensor.allocate(DType.FLOAT32, 3), "a", false);
    Window b = ctx.createWindow(Tensor.allocate(DType.FLOAT64, 2, 2), "b", true);
    assertEquals(List.of("a", "b"), ctx.windowNames());
    assertSame(b, ctx.window("b"));
    assertEquals("b", b.name());
    TestSupport.expect(Status.ALREADY_EXISTS, "'a' already exists",
        () -> ctx.createWindow(Tensor.allocate(DType.FLOAT32, 3), "a", false));
    a.close();
    a.close(); // idempotent
    TestSupport.expect(Status.NOT_FOUND, "no window named 'a'", () -> ctx.window("a"));
    TestSupport.expect(Status.INVALID_HANDLE, "already freed", () -> a.put(Tensor.allocate(DType.FLOAT32, 3)));
    b.close();
    assertTrue(ctx.windowNames().isEmpty());
  }

  @Test
  public void putLandsInOutNeighborBuffersWithVersions() {
    Tensor x = Tensor.allocate(DType.FLOAT64, 5);
    for (int i = 0; i < 5; ++i) x.setDouble(i, value(rank, i));
    try (Window w = ctx.createWindow(x, "put", true)) {
      w.put(x);
      ctx.barrier(); // every put was acknowledged before its sender got here
      int[] in = ctx.inNeighbors();
      Map<Integer, Long> versions = w.versions();
      assertEquals(in.length, versions.size());
      for (int s : in) assertEquals(Long.valueOf(1), versions.get(s));
      for (int s : in) {
        readBuffer(w, s);
        for (int i = 0; i < 5; ++i) assertEquals("buffer of " + s, value(s, i), x.getDouble(i), 0);
      }
      for (long v : w.versions().values()) assertEquals(0, v);
      ctx.barrier();
    }
  }

  private static double value(int r, int i) {
    return 1.0 + r + 0.125 * i;
  }

  @Test
  public void weightedPutSelfWeightDefaultUpdateAndGet() {
    try (Topology ring = Topology.ring(size, RingStyle.BIDIRECTIONAL)) {
      ctx.setTopology(ring, false);
    }
    int[] in = ctx.inNeighbors();
    int[] out = ctx.outNeighbors();
    Tensor x = Tensor.allocate(DType.FLOAT64, 8);
    for (int i = 0; i < 8; ++i) x.setDouble(i, value(rank, i));
    try (Window w = ctx.createWindow(x, "ring", false)) {
      double[] weights = new double[out.length];
      for (int k = 0; k < out.length; ++k) weights[k] = 0.5 + 0.25 * out[k];
      try (Request r = w.putNonblocking(x, WindowArgs.defaults().withRanks(out, weights).withSelfWeight(0.5))) {
        r.waitFor();
      }
      for (int i = 0; i < 8; ++i) assertEquals(0.5 * value(rank, i), x.getDouble(i), 0);
      ctx.barrier();
      w.update(); // uniform: (x + sum of buffers) / (k + 1)
      for (int i = 0; i < 8; ++i) {
        double expected = 0.5 * value(rank, i);
        for (int s : in) expected += (0.5 + 0.25 * rank) * value(s, i);
        assertEquals(expected / (in.length + 1), x.getDouble(i), 1e-12);
      }
      ctx.barrier(); // everyone has read before anyone gets
      for (int i = 0; i < 8; ++i) x.setDouble(i, value(rank, i));
      ctx.barrier();
      double[] two = new double[in.length];
      java.util.Arrays.fill(two, 2.0);
      w.get(WindowArgs.defaults().withRanks(in, two));
      for (long v : w.versions().values()) assertEquals("a get counts a version", 1, v);
      ctx.barrier();
      for (int s : in) {
        readBuffer(w, s);
        for (int i = 0; i < 8; ++i) assertEquals(2.0 * value(s, i), x.getDouble(i), 0);
      }
      ctx.barrier();
    }
  }

  @Test
  public void accumulateCollectAndMutexes() {
    assumeTrue("needs 2 ranks or more", size > 1);
    try (Topology star = Topology.star(size, 0)) {
      ctx.setTopology(star, false);
    }
    Tensor x = Tensor.allocate(DType.INT64, 10);
    try (Window w = ctx.createWindow(x, "acc", true)) {
      if (rank != 0) {
        for (int round = 0; round < 5; ++round) {
          for (int i = 0; i < 10; ++i) x.setDouble(i, rank * 3 + round + i % 7);
          Request r = w.accumulateNonblocking(x, WindowArgs.defaults().withRanks(new int[] {0}));
          r.close();
        }
        w.accumulate(Tensor.of(new long[10]), WindowArgs.defaults().withRanks(new int[] {0}).withRequireMutex(true));
      }
      ctx.barrier();
      if (rank == 0) {
        for (int i = 0; i < 10; ++i) x.setDouble(i, 0);
        w.mutexAcquire(null, true);
        w.mutexRelease(null, true);
        w.updateThenCollect(true);
        for (int i = 0; i < 10; ++i) {
          long expected = 0;
          for (int r = 1; r < size; ++r) {
            for (int round = 0; round < 5; ++round) expected += r * 3 + round + i % 7;
          }
          assertEquals("element " + i, expected, x.getDouble(i), 0);
        }
      }
      ctx.barrier();
    }
  }

  @Test
  public void associatedPTravelsWithPushSum() {
    ctx.setWindowAssociatedPEnabled(true);
    try {
      int[] out = ctx.outNeighbors();
      int[] in = ctx.inNeighbors();
      Tensor x = Tensor.allocate(DType.FLOAT64, 4);
      for (int i = 0; i < 4; ++i) x.setDouble(i, rank * 10.0);
      try (Window w = ctx.createWindow(x, "ps", true)) {
        assertEquals(1.0, w.associatedP(), 0);
        double weight = 1.0 / (out.length + 1);
        double[] weights = new double[out.length];
        java.util.Arrays.fill(weights, weight);
        w.accumulate(x, WindowArgs.defaults().withRanks(out, weights).withSelfWeight(weight));
        ctx.barrier();
        w.updateThenCollect(false);
        // Exp-2 is regular: p = w + in_degree * w.
        assertEquals(weight + in.length * weight, w.associatedP(), 1e-12);
        double expected = weight * rank * 10.0;
        for (int s : in) expected += weight * s * 10.0;
        assertEquals(expected, x.getDouble(0), 1e-12);
        w.setAssociatedP(0.25);
        assertEquals(0.25, w.associatedP(), 0);
        ctx.barrier();
      }
    } finally {
      ctx.setWindowAssociatedPEnabled(false);
    }
  }

  @Test
  public void badWindowInput() {
    TestSupport.expect(IllegalArgumentException.class, "needs a direct tensor",
        () -> ctx.createWindow(Tensor.of(new float[3]), "heap", false));
    TestSupport.expect(IllegalArgumentException.class, "must not be null",
        () -> ctx.createWindow(Tensor.allocate(DType.FLOAT32, 3), null, false));
    try (Window w = ctx.createWindow(Tensor.allocate(DType.FLOAT32, 3), "bad", false)) {
      TestSupport.expect(Status.INVALID_ARGUMENT, "", () -> w.put(Tensor.allocate(DType.FLOAT32, 4)));
      TestSupport.expect(IllegalArgumentException.class, "one entry per rank",
          () -> WindowArgs.defaults().withRanks(new int[] {0}, new double[] {1, 2}));
      TestSupport.expect(Status.INVALID_USAGE, "window", () -> TestSupport.resetTopology(ctx));
    }
  }
}
