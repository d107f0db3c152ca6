package org.starling;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assume.assumeFalse;

import org.junit.Test;

/**
 * Surviving failures, the parts that need no dead rank (FaultRepairMain, run by the
 * fault tests on Open MPI 5, kills one): the failed ranks parsed from the message, bad
 * arguments, and UNSUPPORTED where the job cannot survive a death.
 */
public class RepairTest extends ContextTestBase {
  @Test
  public void peerFailedExceptionNamesTheRanks() {
    PeerFailedException one = new PeerFailedException(Status.PEER_FAILED.code(),
        "allreduce 'x' (float32[4]): rank 2 (pid 1234 on host node1) is gone (killed, crashed or exited)");
    assertArrayEquals(new int[] {2}, one.failedRanks());
    assertEquals(Status.PEER_FAILED, one.status());
    PeerFailedException two = new PeerFailedException(Status.PEER_FAILED.code(),
        "rank 3 (pid 9 on host b) and rank 1 (pid 7 on host a) are gone; rank 0 is fine");
    assertArrayEquals(new int[] {1, 3}, two.failedRanks());
    assertArrayEquals(new int[0],
        new PeerFailedException(Status.PEER_FAILED.code(), "no rank named").failedRanks());
  }

  @Test
  public void repairNeedsUlfm() {
    assumeFalse("this job survives failures (FaultRepairMain tests repair there)", ctx.faultTolerant());
    StarlingException e = TestSupport.expect(Status.UNSUPPORTED, "ULFM", () -> ctx.repair());
    assertFalse(e instanceof PeerFailedException);
    try (Topology ring = Topology.ring(size, RingStyle.BIDIRECTIONAL)) {
      TestSupport.expect(Status.UNSUPPORTED, "ULFM", () -> ctx.repair(ring, false));
    }
    assertEquals(size, ctx.size());  // nothing changed
  }

  @Test
  public void repairRejectsNullTopology() {
    TestSupport.expect(IllegalArgumentException.class, "topology", () -> ctx.repair(null, false));
  }

  @Test
  public void growNeedsUlfmAndValidArguments() {
    assertFalse(ctx.joined());
    TestSupport.expect(IllegalArgumentException.class, "count", () -> ctx.grow(0, null));
    TestSupport.expect(IllegalArgumentException.class, "ranks", () -> ctx.grow(2, new int[] {1}));
    TestSupport.expect(IllegalArgumentException.class, "topology", () -> ctx.grow(1, null, null, false));
    assumeFalse("this job survives failures (GrowMain tests the grow there)", ctx.faultTolerant());
    TestSupport.expect(Status.UNSUPPORTED, "ULFM", () -> ctx.grow(1, null));
    assertEquals(size, ctx.size());  // nothing changed
  }
}
