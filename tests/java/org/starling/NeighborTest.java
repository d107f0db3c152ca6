package org.starling;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;
import static org.starling.TestSupport.value;

import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.Before;
import org.junit.FixMethodOrder;
import org.junit.Test;
import org.junit.runners.MethodSorters;

/**
 * Neighbor collectives against float64 references built from the topology's own weight
 * matrix (read back edge by edge) or from the dynamic sets every rank recomputes.
 */
@FixMethodOrder(MethodSorters.NAME_ASCENDING)
public class NeighborTest extends ContextTestBase {
  @Before
  public void resetTopology() {
    TestSupport.resetTopology(ctx);
  }

  private List<IntFunction<Topology>> topologies() {
    return List.of(Topology::exponentialTwo, n -> Topology.ring(n, RingStyle.BIDIRECTIONAL),
        n -> Topology.ring(n, RingStyle.LEFT), n -> Topology.star(n, n - 1), Topology::fullyConnected,
        n -> Topology.meshGrid2D(n, 0, 0));
  }

  @Test
  public void staticTopologiesWithUniformAndTopologyWeights() {
    int salt = 0;
    for (IntFunction<Topology> make : topologies()) {
      try (Topology topo = make.apply(size)) {
        double[][] w = topo.weightMatrix();
        int[] in = topo.inNeighbors(rank);
        for (boolean weighted : new boolean[] {false, true}) {
          ctx.setTopology(topo, weighted);
          ++salt;
          double[] x = new double[6];
          for (int i = 0; i < 6; ++i) x[i] = value(rank, i + salt);
          double[] out = new double[6];
          if (salt % 2 == 0) {
            ctx.neighborAllreduce(Tensor.of(x), Tensor.of(out));
          } else {
            try (Request r = ctx.neighborAllreduceNonblocking(Tensor.of(x), Tensor.of(out))) {
              r.waitFor();
            }
          }
          for (int i = 0; i < 6; ++i) {
            double expected = 0;
            if (weighted) {
              for (int r = 0; r < size; ++r) expected += w[r][rank] * value(r, i + salt);
            } else {
              expected = value(rank, i + salt);
              for (int r : in) expected += value(r, i + salt);
              expected /= in.length + 1;
            }
            assertEquals("topology " + salt + " element " + i, expected, out[i], 1e-12);
          }
        }
      }
    }
  }

  @Test
  public void explicitWeightsOnOneInNeighborInPlace() {
    try (Topology full = Topology.fullyConnected(size)) {
      ctx.setTopology(full, false);
    }
    int next = (rank + 1) % size;
    NeighborArgs args = size == 1 ? NeighborArgs.weighted(1.0, new int[0], new double[0])
        : NeighborArgs.weighted(0.25, new int[] {next}, new double[] {0.75}).withName("explicit");
    Tensor x = Tensor.allocate(DType.FLOAT64, 9);
    for (int i = 0; i < 9; ++i) x.setDouble(i, value(rank, i));
    ctx.neighborAllreduce(x, x, args);
    for (int i = 0; i < 9; ++i) {
      double expected = size == 1 ? value(rank, i) : 0.25 * value(rank, i) + 0.75 * value(next, i);
      assertEquals(expected, x.getDouble(i), 1e-12);
    }
  }

  @Test
  public void dynamicOnePeerScheduleWithDestinationWeights() {
    assumeTrue("one-peer schedules need a neighbor", size > 1);
    Schedule[] schedules = new Schedule[size];
    try (Topology exp2 = Topology.exponentialTwo(size)) {
      for (int r = 0; r < size; ++r) schedules[r] = Schedule.dynamicOnePeer(exp2, r);
    }
    for (int step = 0; step < 5; ++step) {
      Schedule.Step[] all = new Schedule.Step[size];
      for (int r = 0; r < size; ++r) all[r] = schedules[r].next();
      int[] sends = all[rank].sendRanks();
      int[] recvs = all[rank].recvRanks();
      double self = 1.0 / (recvs.length + 1);
      double[] srcW = new double[recvs.length];
      java.util.Arrays.fill(srcW, self);
      double[] dstW = new double[sends.length];
      for (int k = 0; k < sends.length; ++k) dstW[k] = 1.0 + 0.25 * rank + 0.125 * sends[k];
      NeighborArgs args = NeighborArgs.dynamic(self, recvs, srcW, sends).withDestinationWeights(dstW)
          .withCheckTopology(step % 2 == 1);
      float[] x = new float[33];
      for (int i = 0; i < 33; ++i) x[i] = (float) value(rank, i + step);
      float[] out = new float[33];
      ctx.neighborAllreduce(Tensor.of(x), Tensor.of(out), args);
      for (int i = 0; i < 33; ++i) {
        double expected = self * value(rank, i + step);
        for (int src : recvs) expected += self * (1.0 + 0.25 * src + 0.125 * rank) * value(src, i + step);
        assertEquals("step " + step + " element " + i, expected, out[i], 1e-5);
      }
    }
    for (Schedule s : schedules) s.close();
  }

  @Test
  public void mismatchedDynamicGraphFailsEverywhereBeforeDataMoves() {
    assumeTrue("needs 2 ranks or more", size > 1);
    // Rank 0 sends to rank 1, which does not expect it.
    int[] dst = rank == 0 ? new int[] {1} : new int[0];
    NeighborArgs args = NeighborArgs.dynamic(1.0, new int[0], new double[0], dst).withCheckTopology(true);
    float[] x = new float[4];
    TestSupport.expect(Status.MISMATCH, "rank 0 sends to rank 1",
        () -> ctx.neighborAllreduce(Tensor.of(x), Tensor.of(x), args));
    ctx.barrier(); // the context still works
  }

  /**
   * Rank 0 calls allreduce, the others neighborAllreduce, under the ring where each rank
   * sends to the one before it: rank 0 and the last rank wait for each other and no
   * message of either operation reaches the other. Their stalled waits tell each other
   * where they are (STARLING_MISMATCH_CHECK_SECONDS): MISMATCH in seconds, or a right
   * result where all of a rank's sources made its call. The context is then left.
   */
  @Test
  public void ranksInDifferentOperationsUnderARingFailWithinSeconds() {
    assumeTrue("needs 3 ranks or more (at 2 the rings are the default graph)", size > 2);
    try (Context c = Context.create(); Topology ring = Topology.ring(size, RingStyle.LEFT)) {
      c.setTopology(ring, false);
      int[] sources = ring.inNeighbors(rank);
      boolean maySucceed = rank != 0 && java.util.Arrays.stream(sources).noneMatch(r -> r == 0);
      double[] x = new double[24];
      java.util.Arrays.fill(x, rank + 1.0);
      double[] out = new double[24];
      long start = System.nanoTime();
      StarlingException failure = null;
      try {
        if (rank == 0) {
          c.allreduce(Tensor.of(x), Tensor.of(out), ReduceOp.SUM);
        } else {
          c.neighborAllreduce(Tensor.of(x), Tensor.of(out));
        }
      } catch (StarlingException e) {
        failure = e;
      }
      double took = (System.nanoTime() - start) / 1e9;
      assertTrue("took " + took + " s", took < 5);
      if (failure == null) {
        assertTrue("rank " + rank + " completed with a wrong result", maySucceed);
        double expected = rank + 1.0;
        for (int r : sources) expected += r + 1.0;
        for (double v : out) assertEquals(expected / (1 + sources.length), v, 1e-12);
      } else {
        assertEquals(failure.getMessage(), Status.MISMATCH, failure.status());
        assertTrue(failure.getMessage(),
            failure.getMessage().matches("(?s).*(ranks disagree|different operations|out of step).*"));
      }
    }
  }

  @Test
  public void neighborAllgatherStaticAndDynamic() {
    try (Topology ring = Topology.ring(size, RingStyle.BIDIRECTIONAL)) {
      ctx.setTopology(ring, false);
    }
    // Rank r contributes r + 1 rows of (r, j).
    long[] mine = new long[2 * (rank + 1)];
    for (int j = 0; j <= rank; ++j) {
      mine[2 * j] = rank;
      mine[2 * j + 1] = j;
    }
    Tensor in = Tensor.of(mine, rank + 1, 2);
    int[] sources = ctx.inNeighbors();
    checkGathered(sources, ctx.neighborAllgather(in, NeighborArgs.defaults()));
    assumeTrue("needs 2 ranks or more", size > 1);
    // Dynamic: receive from the next rank only, send to the previous one.
    NeighborArgs dynamic = NeighborArgs.dynamic(1.0, new int[] {(rank + 1) % size}, new double[] {1.0},
        new int[] {(rank - 1 + size) % size});
    long rows = (rank + 1) % size + 1;
    long[] out = new long[(int) (2 * rows)];
    assertArrayEquals(new long[] {rows}, ctx.neighborAllgatherFirstDims(in, dynamic));
    try (Request r = ctx.neighborAllgatherNonblocking(in, Tensor.of(out, rows, 2), dynamic)) {
      assertArrayEquals(new long[] {rows}, r.firstDims());
    }
    checkGathered(new int[] {(rank + 1) % size}, Tensor.of(out, rows, 2));
    assertArrayEquals(new long[] {rows}, ctx.neighborAllgather(in, Tensor.of(out, rows, 2), dynamic));
  }

  private void checkGathered(int[] sources, Tensor out) {
    int row = 0;
    for (int s : sources) {
      for (int j = 0; j <= s; ++j, ++row) {
        assertEquals(s, out.getDouble(2 * row), 0);
        assertEquals(j, out.getDouble(2 * row + 1), 0);
      }
    }
    assertEquals(row, out.shape()[0]);
  }

  @Test
  public void hierarchicalAveragesMachineMeans() {
    assumeTrue("needs machines of 2 ranks", size % 2 == 0);
    try (Context machines = Context.create(new Context.Options().nodesPerMachine(2));
        Topology machineGraph = Topology.exponentialTwo(size / 2)) {
      machines.setMachineTopology(machineGraph, false);
      try (Topology copy = machines.machineTopology()) {
        assertTrue(copy.isEquivalent(machineGraph));
      }
      int m = rank / 2;
      double[] mean = new double[size / 2];
      for (int r = 0; r < size; ++r) mean[r / 2] += value(r, 3) / 2;
      int[] in = machineGraph.inNeighbors(m);
      double expected = mean[m];
      for (int j : in) expected += mean[j];
      expected /= in.length + 1;
      double[] x = {value(rank, 3)};
      machines.hierarchicalNeighborAllreduce(Tensor.of(x), Tensor.of(x), NeighborArgs.defaults());
      assertEquals(expected, x[0], 1e-12);
      double[] y = {value(rank, 3)};
      try (Request r = machines.hierarchicalNeighborAllreduceNonblocking(Tensor.of(y), Tensor.of(y),
          NeighborArgs.defaults())) {
        r.waitFor();
      }
      assertEquals(expected, y[0], 1e-12);
    }
  }

  @Test
  public void manySmallNonblockingCallsMatchBlockingResults() {
    List<double[]> xs = new ArrayList<>();
    List<Request> requests = new ArrayList<>();
    int[] in = ctx.inNeighbors();
    for (int k = 0; k < 12; ++k) {
      double[] x = new double[3 + k % 4];
      for (int i = 0; i < x.length; ++i) x[i] = value(rank, i + 5 * k);
      xs.add(x);
      requests.add(ctx.neighborAllreduceNonblocking(Tensor.of(x), Tensor.of(x), NeighborArgs.defaults()));
    }
    for (int k = 0; k < 12; ++k) {
      requests.get(k).close();
      double[] x = xs.get(k);
      for (int i = 0; i < x.length; ++i) {
        double expected = value(rank, i + 5 * k);
        for (int r : in) expected += value(r, i + 5 * k);
        assertEquals(expected / (in.length + 1), x[i], 1e-12);
      }
    }
  }
}
