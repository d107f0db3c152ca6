package org.starling;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

/**
 * Context.abort(): rank 0 aborts a second context from another thread while its main
 * thread is blocked in a call that the other ranks never make; the shared context keeps
 * the ranks in step.
 */
public class AbortTest extends ContextTestBase {
  private static final double ABORT_BOUND_SECONDS = 0.1;

  private static double seconds(long fromNanos) {
    return (System.nanoTime() - fromNanos) * 1e-9;
  }

  @Test
  public void abortReleasesBlockedAndPendingCalls() throws InterruptedException {
    Context victim = Context.create();
    Tensor x = Tensor.allocate(DType.FLOAT32, 1024);
    if (rank == 0) {
      long[] abortedAt = {0};
      Thread aborter = new Thread(() -> {
        try {
          Thread.sleep(300);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        abortedAt[0] = System.nanoTime();
        victim.abort();
      });
      Request pending = size > 1 ? victim.allreduceNonblocking(x, x, ReduceOp.SUM, "pending") : null;
      aborter.start();
      if (size > 1) {
        TestSupport.expect(Status.ABORTED, "abort", () -> victim.allreduce(x, x, ReduceOp.SUM, "blocked"));
        double after = seconds(abortedAt[0]);
        assertTrue("returned " + after + " s after the abort", after < ABORT_BOUND_SECONDS);
        TestSupport.expect(Status.ABORTED, "allreduce 'pending'", pending::waitFor);
        pending.close();
      }
      aborter.join();
      long start = System.nanoTime();
      TestSupport.expect(Status.ABORTED, "aborted", victim::barrier);
      TestSupport.expect(Status.ABORTED, "aborted", () -> victim.allreduceNonblocking(x, x, ReduceOp.SUM));
      TestSupport.expect(Status.ABORTED, "aborted", () -> victim.createWindow(x, "w", false));
      assertTrue(seconds(start) < ABORT_BOUND_SECONDS);
      assertEquals(0, victim.rank()); // local queries still work
      victim.abort(); // idempotent
      start = System.nanoTime();
      victim.close(); // local
      assertTrue(seconds(start) < 1.0);
      TestSupport.expect(Status.INVALID_HANDLE, "context", victim::abort);
    }
    ctx.barrier();
    victim.close();
    ctx.barrier();
  }

  @Test
  public void windowsOfAnAbortedContextCloseLocally() {
    Context victim = Context.create();
    Window w = victim.createWindow(Tensor.allocate(DType.FLOAT64, 8), "abort.w", true);
    ctx.barrier();
    victim.abort();
    TestSupport.expect(Status.ABORTED, "aborted", () -> w.put(Tensor.allocate(DType.FLOAT64, 8)));
    TestSupport.expect(Status.ABORTED, "aborted", w::update);
    w.close();
    victim.close();
    ctx.barrier();
  }

  @Test
  public void statusesOfTheNewCodes() {
    assertEquals(Status.ABORTED, Status.of(-13));
    assertEquals(Status.PEER_FAILED, Status.of(-14));
  }
}
