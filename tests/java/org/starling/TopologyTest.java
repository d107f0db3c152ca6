package org.starling;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.List;
import org.junit.FixMethodOrder;
import org.junit.Test;
import org.junit.runners.MethodSorters;

/** Topologies and schedules are local: these checks need no peer. Expected graphs follow BlueFog's definitions. */
@FixMethodOrder(MethodSorters.NAME_ASCENDING)
public class TopologyTest {
  private static final double EPS = 1e-12;

  /** Asserts W equals {@code expected}, given as a dense matrix. */
  private static void assertMatrix(double[][] expected, Topology t) {
    double[][] w = t.weightMatrix();
    assertEquals(expected.length, w.length);
    for (int i = 0; i < w.length; ++i) assertArrayEquals("row " + i, expected[i], w[i], EPS);
  }

  /** A circulant matrix: W[i][(i + offset) % n] = weight for every listed offset. */
  private static double[][] circulant(int n, int[] offsets, double weight) {
    double[][] w = new double[n][n];
    for (int i = 0; i < n; ++i) {
      for (int o : offsets) w[i][((i + o) % n + n) % n] = weight;
    }
    return w;
  }

  @Test
  public void exponentialGraphsMatchBlueFog() {
    try (Topology t = Topology.exponentialTwo(8)) {
      assertMatrix(circulant(8, new int[] {0, 1, 2, 4}, 0.25), t);
      assertArrayEquals(new int[] {1, 2, 4}, t.outNeighbors(0));
      assertArrayEquals(new int[] {4, 6, 7}, t.inNeighbors(0));
      assertEquals(32, t.numEdges());
      assertTrue(t.isRegular());
    }
    try (Topology t = Topology.exponential(12, 3)) {
      assertMatrix(circulant(12, new int[] {0, 1, 3, 9}, 0.25), t);
    }
    try (Topology t = Topology.symmetricExponential(16, 4)) {
      assertMatrix(circulant(16, new int[] {0, 1, 4, 12, 15}, 0.2), t);
    }
  }

  @Test
  public void ringsStarsMeshesAndFullyConnected() {
    try (Topology t = Topology.ring(5, RingStyle.BIDIRECTIONAL)) {
      assertMatrix(circulant(5, new int[] {0, 1, -1}, 1.0 / 3), t);
    }
    try (Topology t = Topology.ring(5, RingStyle.LEFT)) {
      assertMatrix(circulant(5, new int[] {0, -1}, 0.5), t);
      assertArrayEquals(new int[] {1}, t.inNeighbors(0));
    }
    try (Topology t = Topology.ring(5, RingStyle.RIGHT)) {
      assertMatrix(circulant(5, new int[] {0, 1}, 0.5), t);
    }
    try (Topology t = Topology.star(4, 1)) {
      double[][] w = new double[4][4];
      for (int i = 0; i < 4; ++i) {
        w[i][i] = 0.75;
        w[1][i] = 0.25;
        w[i][1] = 0.25;
      }
      assertMatrix(w, t);
    }
    // 2 x 3 grid, Metropolis-Hastings: 1 / max(deg_i, deg_j) with self counted in degrees.
    try (Topology t = Topology.meshGrid2D(6, 0, 0)) {
      int[] deg = {3, 4, 3, 3, 4, 3};
      int[][] links = {{0, 1}, {1, 2}, {3, 4}, {4, 5}, {0, 3}, {1, 4}, {2, 5}};
      double[][] w = new double[6][6];
      for (int[] l : links) {
        w[l[0]][l[1]] = 1.0 / Math.max(deg[l[0]], deg[l[1]]);
        w[l[1]][l[0]] = w[l[0]][l[1]];
      }
      for (int i = 0; i < 6; ++i) {
        double off = 0;
        for (int j = 0; j < 6; ++j) off += w[i][j];
        w[i][i] = 1 - off;
      }
      assertMatrix(w, t);
      assertFalse(t.isRegular());
    }
    try (Topology t = Topology.fullyConnected(3)) {
      assertMatrix(circulant(3, new int[] {0, 1, 2}, 1.0 / 3), t);
    }
  }

  @Test
  public void explicitEdgesWeightsAndEquivalence() {
    try (Topology a = Topology.of(3, new int[] {0, 1, 2, 0}, new int[] {1, 2, 0, 0}, null);
        Topology b = Topology.of(3, new int[] {0, 0, 1, 2}, new int[] {0, 1, 2, 0}, new double[] {1, 1, 1, 1});
        Topology c = Topology.of(3, new int[] {0, 1, 2}, new int[] {1, 2, 0}, new double[] {0.5, 0.5, 0.5})) {
      assertEquals(3, a.size());
      assertEquals(List.of(new Topology.Edge(0, 0, 1), new Topology.Edge(0, 1, 1), new Topology.Edge(1, 2, 1),
          new Topology.Edge(2, 0, 1)), a.edges());
      assertTrue(a.isEquivalent(b));
      assertFalse(a.isEquivalent(c));
      Topology.Weights recv = c.recvWeights(0);
      assertEquals(0.0, recv.selfWeight(), 0);
      assertArrayEquals(new int[] {2}, recv.ranks());
      assertArrayEquals(new double[] {0.5}, recv.weights(), 0);
      Topology.Weights send = a.sendWeights(0);
      assertEquals(1.0, send.selfWeight(), 0);
      assertArrayEquals(new int[] {1}, send.ranks());
    }
  }

  @Test
  public void dynamicOnePeerScheduleCyclesClockwise() {
    // Exp-2(8): at step k rank r sends to r + 2^(k mod 3) and receives from r - 2^(k mod 3).
    try (Topology t = Topology.exponentialTwo(8); Schedule s = Schedule.dynamicOnePeer(t, 3)) {
      for (int k = 0; k < 7; ++k) {
        int d = 1 << (k % 3);
        Schedule.Step step = s.next();
        assertArrayEquals("step " + k, new int[] {(3 + d) % 8}, step.sendRanks());
        assertArrayEquals("step " + k, new int[] {(3 - d + 8) % 8}, step.recvRanks());
      }
    }
  }

  @Test
  public void fastPairsSkipSlowLinksAndRefuseBadInput() {
    // 4 ranks, rank 0's link to rank 1 slow: the round-robin's rounds are {0,3}{1,2},
    // {1,3}{0,2}, {2,3}{0,1}; in the last, 0 and 1 sit out.
    double[] links = new double[16];
    java.util.Arrays.fill(links, 1e-5);
    links[0 * 4 + 1] = 0.5;
    int[][] expected = {{3, 2, 1, 0}, {2, 3, 0, 1}, {-1, -1, 3, 2}};
    for (int r = 0; r < 4; ++r) {
      try (Schedule s = Schedule.fastPairs(4, r, links, 1e-3)) {
        for (int k = 0; k < 6; ++k) {
          Schedule.Step step = s.next();
          int peer = expected[k % 3][r];
          int[] want = peer < 0 ? new int[0] : new int[] {peer};
          assertArrayEquals("rank " + r + " step " + k, want, step.sendRanks());
          assertArrayEquals("rank " + r + " step " + k, want, step.recvRanks());
        }
      }
    }
    TestSupport.expect(Status.INVALID_ARGUMENT, "threshold_seconds is -1", () -> Schedule.fastPairs(4, 0, links, -1));
    TestSupport.expect(Status.INVALID_ARGUMENT, "link_seconds has 3 figures",
        () -> Schedule.fastPairs(4, 0, new double[3], 1));
    TestSupport.expect(IllegalArgumentException.class, "linkSeconds must not be null", () -> Schedule.fastPairs(4, 0, null, 1));
    double[] split = new double[16];
    java.util.Arrays.fill(split, 1.0);
    split[1] = split[4] = split[11] = split[14] = 1e-5;
    TestSupport.expect(Status.INVALID_ARGUMENT, "{0, 1} {2, 3}", () -> Schedule.fastPairs(4, 0, split, 1e-3));
  }

  @Test
  public void machineAndInnerOuterSchedulesFollowTheirFormulas() {
    // 4 machines of 2: machine m sends to m + 2^(k mod 2), receives from m - 2^(k mod 2).
    try (Schedule s = Schedule.exp2Machine(8, 2, 5, 1)) {
      for (int k = 0; k < 4; ++k) {
        int d = 1 << (k % 2);
        Schedule.Step step = s.next();
        assertArrayEquals(new int[] {(2 + d) % 4}, step.sendRanks());
        assertArrayEquals(new int[] {(2 - d + 4) % 4}, step.recvRanks());
      }
    }
    // 2 machines of 3, rank 4 (machine 1, local 1): at step k local rank k % 3 talks outside.
    try (Schedule s = Schedule.innerOuterRing(6, 3, 4)) {
      assertArrayEquals(new int[] {5}, s.next().sendRanks()); // out = 0: 1 -> 2 inside
      Schedule.Step outside = s.next(); // out = 1: rank 4 itself crosses to machine 0
      assertArrayEquals(new int[] {1}, outside.sendRanks());
      assertArrayEquals(new int[] {1}, outside.recvRanks());
      assertArrayEquals(new int[] {3}, s.next().sendRanks()); // out = 2: 1 -> 2 skipped, wraps to 0
    }
    // Every send of every rank is someone's receive, step by step.
    int world = 8;
    int local = 4;
    Schedule[] all = new Schedule[world];
    for (int r = 0; r < world; ++r) all[r] = Schedule.innerOuterExpo2(world, local, r);
    for (int k = 0; k < 6; ++k) {
      Schedule.Step[] steps = new Schedule.Step[world];
      for (int r = 0; r < world; ++r) steps[r] = all[r].next();
      for (int r = 0; r < world; ++r) {
        for (int d : steps[r].sendRanks()) {
          boolean matched = false;
          for (int src : steps[d].recvRanks()) matched |= src == r;
          assertTrue("step " + k + ": " + r + " sends to " + d + " which does not receive it", matched);
        }
      }
    }
    for (Schedule s : all) s.close();
  }

  @Test
  public void closedAndInvalidTopologiesThrow() {
    Topology t = Topology.ring(4, RingStyle.RIGHT);
    t.close();
    t.close(); // idempotent
    TestSupport.expect(Status.INVALID_HANDLE, "already freed", t::size);
    TestSupport.expect(Status.INVALID_ARGUMENT, "", () -> Topology.exponentialTwo(0));
    TestSupport.expect(Status.INVALID_ARGUMENT, "", () -> Topology.of(2, new int[] {0}, new int[] {5}, null));
    TestSupport.expect(IllegalArgumentException.class, "one entry per edge",
        () -> Topology.of(2, new int[] {0, 1}, new int[] {1}, null));
    TestSupport.expect(IllegalArgumentException.class, "must not be null", () -> Topology.ring(4, null));
    try (Topology ring = Topology.ring(4, RingStyle.LEFT)) {
      TestSupport.expect(Status.INVALID_ARGUMENT, "", () -> ring.inNeighbors(9));
    }
  }
}
