package org.starling;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import org.junit.function.ThrowingRunnable;

/** The context every test shares (MPI can be initialized once per process) and helpers. */
final class TestSupport {
  private static Context context;

  private TestSupport() {}

  static synchronized Context context() {
    if (context == null) context = Context.create();
    return context;
  }

  static synchronized void closeContext() {
    if (context != null) context.close();
    context = null;
  }

  /** Element i of rank r's test data: small integers, exact in every dtype and sum. */
  static double value(int rank, int i) {
    return ((i * 7 + rank * 13) % 17) - 8;
  }

  /** Asserts that {@code call} throws {@code type} with a message containing {@code fragment}. */
  static <T extends Throwable> T expect(Class<T> type, String fragment, ThrowingRunnable call) {
    T e = assertThrows(type, call);
    assertTrue("message '" + e.getMessage() + "' lacks '" + fragment + "'", e.getMessage().contains(fragment));
    return e;
  }

  /** As expect, for a StarlingException with {@code status}. */
  static StarlingException expect(Status status, String fragment, ThrowingRunnable call) {
    StarlingException e = expect(StarlingException.class, fragment, call);
    assertEquals(e.getMessage(), status, e.status());
    return e;
  }

  /** Restores the context's default topology (unweighted exponential-2). */
  static void resetTopology(Context ctx) {
    try (Topology t = Topology.exponentialTwo(ctx.size())) {
      ctx.setTopology(t, false);
    }
  }
}
