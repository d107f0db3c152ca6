package org.starling;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.junit.Assume.assumeTrue;

import org.junit.FixMethodOrder;
import org.junit.Test;
import org.junit.runners.MethodSorters;

/** Context layout, options, library queries and the JVM's own signals next to MPI. */
@FixMethodOrder(MethodSorters.NAME_ASCENDING)
public class ContextTest extends ContextTestBase {

  @Test
  public void layoutMatchesTheLauncher() {
    // Open MPI's environment is an independent reference for the world layout.
    assertEquals(Integer.parseInt(System.getenv().getOrDefault("OMPI_COMM_WORLD_SIZE", "1")), size);
    assertEquals(Integer.parseInt(System.getenv().getOrDefault("OMPI_COMM_WORLD_RANK", "0")), rank);
    assertEquals(size, ctx.localSize()); // one host
    assertEquals(rank, ctx.localRank());
    assertEquals(1, ctx.machineSize());
    assertEquals(0, ctx.machineRank());
    assertTrue(ctx.isHomogeneous());
  }

  @Test
  public void simulatedMachinesGroupConsecutiveRanks() {
    assumeTrue("needs an even number of ranks", size % 2 == 0);
    try (Context machines = Context.create(new Context.Options().nodesPerMachine(2))) {
      assertEquals(2, machines.localSize());
      assertEquals(rank % 2, machines.localRank());
      assertEquals(size / 2, machines.machineSize());
      assertEquals(rank / 2, machines.machineRank());
      assertNull(machines.machineTopology());
    }
  }

  @Test
  public void versionConfigAndDtypes() {
    assertEquals(Starling.bindingVersion(), Starling.version());
    assertEquals("0.1.0", Starling.versionString());
    assertTrue(Starling.config().contains("STARLING_TIMEOUT_SECONDS"));
    for (DType d : DType.values()) assertTrue(d.toString(), Starling.isSupported(d));
  }

  @Test
  public void statsCountOperations() {
    Stats before = ctx.stats();
    double[] x = {1, 2, 3};
    for (int i = 0; i < 3; ++i) ctx.allreduce(Tensor.of(x), Tensor.of(x), ReduceOp.SUM);
    Stats after = ctx.stats();
    assertEquals(before.operations() + 3, after.operations());
    assertTrue(size == 1 || after.bytesSent() > before.bytesSent());
  }

  @Test
  public void peerStatsMatchWhatEachPeerReceived() {
    double[] x = new double[20000];
    ctx.allreduce(Tensor.of(x), Tensor.of(x), ReduceOp.SUM);
    ctx.barrier(); // every message is now counted on both sides
    // Rank i's row of two size x size matrices, summed: sent[i][j] and received[j][i].
    double[] sent = new double[size * size], received = new double[size * size];
    for (int peer = 0; peer < size; ++peer) {
      PeerStats p = ctx.peerStats(peer);
      sent[rank * size + peer] = p.bytesSent();
      received[peer * size + rank] = p.bytesReceived();
      assertTrue(p.waitNanos() >= p.lastWaitNanos());
    }
    Tensor s = Tensor.allocate(DType.FLOAT64, size * size), r = Tensor.allocate(DType.FLOAT64, size * size);
    ctx.allreduce(Tensor.of(sent), s, ReduceOp.SUM);
    ctx.allreduce(Tensor.of(received), r, ReduceOp.SUM);
    assertArrayEquals(s.toDoubleArray(), r.toDoubleArray(), 0.0);
    if (size > 1) {
      long total = 0;
      for (int peer = 0; peer < size; ++peer) total += (long) sent[rank * size + peer];
      assertTrue("an allreduce of 160 kB sent " + total, total >= 20000L * 8 * (size - 1) / size);
    }
    assertTrue(ctx.stats().blockedNanos() > 0);
    TestSupport.expect(Status.INVALID_ARGUMENT, "peer is -1", () -> ctx.peerStats(-1));
    TestSupport.expect(Status.INVALID_ARGUMENT, "peer is " + size, () -> ctx.peerStats(size));
  }

  @Test
  public void probePeersFillsThePeerStats() {
    long start = System.nanoTime();
    ctx.probePeers(2, 100000);
    long elapsed = System.nanoTime() - start;
    for (int peer = 0; peer < size; ++peer) {
      PeerStats p = ctx.peerStats(peer);
      if (peer == rank) {
        assertEquals(0, p.probeLatencyNanos());
        continue;
      }
      // The best of 2 round trips is at most their mean.
      assertTrue(p.toString(), p.probeLatencyNanos() > 0 && 2 * p.probeLatencyNanos() <= elapsed / 2);
      assertTrue(p.toString(), p.probeBytesPerSecond() > 0 && 100000.0 / p.probeBytesPerSecond() <= elapsed / 2e9);
    }
    TestSupport.expect(Status.INVALID_ARGUMENT, "repetitions is 1001", () -> ctx.probePeers(1001, 1));
    TestSupport.expect(Status.INVALID_ARGUMENT, "bulk_bytes is", () -> ctx.probePeers(1, (1L << 30) + 1));
    TestSupport.expect(IllegalArgumentException.class, "repetitions must be >= 1", () -> ctx.probePeers(0, 1));
    TestSupport.expect(IllegalArgumentException.class, "bulkBytes must be >= 1", () -> ctx.probePeers(1, -1));
  }

  @Test
  public void linkLatenciesAreTheSameMatrixOnEveryRank() {
    double[] links = ctx.linkLatencies(2);
    assertEquals(size * size, links.length);
    for (int i = 0; i < size; ++i) {
      for (int j = 0; j < size; ++j) assertTrue(i + "," + j, i == j ? links[i * size + j] == 0 : links[i * size + j] > 0);
    }
    double[] max = links.clone();
    double[] min = links.clone();
    ctx.allreduce(Tensor.of(links, links.length), Tensor.of(max, max.length), ReduceOp.MAX);
    ctx.allreduce(Tensor.of(links, links.length), Tensor.of(min, min.length), ReduceOp.MIN);
    assertArrayEquals(max, min, 0.0);
    try (Schedule s = Schedule.fastPairs(size, rank, links, 1.0)) {
      Schedule.Step step = s.next();
      assertArrayEquals(step.sendRanks(), step.recvRanks());
    }
  }

  @Test
  public void timelineIsOffByDefaultAndSaysSo() {
    assertFalse(ctx.timelineEnabled());  // the tests run without STARLING_TIMELINE
    try {
      ctx.timelineStartActivity("lane", "FORWARD");
      fail("an activity without a timeline must throw");
    } catch (StarlingException e) {
      assertTrue(e.getMessage(), e.getMessage().contains("STARLING_TIMELINE"));
    }
  }

  @Test
  public void defaultTopologyIsExponentialTwo() {
    TestSupport.resetTopology(ctx);
    try (Topology t = ctx.topology(); Topology exp2 = Topology.exponentialTwo(size)) {
      assertTrue(t.isEquivalent(exp2));
      assertFalse(ctx.isTopologyWeighted());
      assertArrayEquals(exp2.inNeighbors(rank), ctx.inNeighbors());
      assertArrayEquals(exp2.outNeighbors(rank), ctx.outNeighbors());
    }
  }

  @Test
  public void closedContextThrowsAndCloseIsIdempotent() {
    Context other = Context.create();
    other.close();
    other.close();
    TestSupport.expect(Status.INVALID_HANDLE, "already freed or destroyed", other::rank);
    TestSupport.expect(Status.INVALID_HANDLE, "destroyed", other::barrier);
    double[] x = {1};
    TestSupport.expect(Status.INVALID_HANDLE, "context",
        () -> other.allreduce(Tensor.of(x), Tensor.of(x), ReduceOp.SUM));
  }

  @Test
  public void requestsOutliveTheirContext() {
    double[] x = {rank};
    Request r;
    try (Context other = Context.create()) {
      r = other.allreduceNonblocking(Tensor.of(x), Tensor.of(x), ReduceOp.SUM);
    } // destroy lets submitted operations finish
    r.waitFor();
    r.close();
    assertEquals(size * (size - 1) / 2.0, x[0], 0);
  }

  private static int length(int[] a) {
    return a.length;
  }

  /**
   * The JVM turns SIGSEGV (implicit null checks in compiled code) and SIGFPE (integer
   * division) into exceptions; MPI, initialized after the JVM installed its handlers,
   * must leave them alone.
   */
  @Test
  public void jvmSignalsStillBecomeExceptionsAfterMpiInit() {
    long sum = 0;
    int npes = 0;
    int divisions = 0;
    for (int i = 0; i < 2_000_000; ++i) {
      int[] a = i % 1000 == 999 ? null : new int[i % 5];
      try {
        sum += length(a);
      } catch (NullPointerException e) {
        npes++;
      }
      try {
        sum += 7 / (i % 1000);
      } catch (ArithmeticException e) {
        divisions++;
      }
    }
    assertEquals(2000, npes);
    assertEquals(2000, divisions);
    assertTrue(sum > 0);
    ctx.barrier();
  }
}
