package org.starling;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.Before;
import org.junit.FixMethodOrder;
import org.junit.Test;
import org.junit.runners.MethodSorters;
import org.starling.internal.StarlingNative;

/**
 * Bad input on purpose: Java-side problems raise IllegalArgumentException before
 * anything is submitted, library-side ones StarlingException with Starling's message;
 * the JVM and the context survive every one of them.
 */
@FixMethodOrder(MethodSorters.NAME_ASCENDING)
public class BadInputTest extends ContextTestBase {
  @Before
  public void resetTopology() {
    TestSupport.resetTopology(ctx);
  }

  /** A collective that must still line up on every rank after the failures above it. */
  private void assertContextWorks() {
    long[] x = {5};
    ctx.allreduce(Tensor.of(x), Tensor.of(x), ReduceOp.SUM, "after bad input");
    assertEquals(5L * size, x[0]);
  }

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
  }

  @Test
  public void buffersThatCannotBeTensors() {
    TestSupport.expect(IllegalArgumentException.class, "direct ByteBuffer",
        () -> Tensor.of(ByteBuffer.allocate(16).order(ByteOrder.nativeOrder()), DType.FLOAT32, 4));
    TestSupport.expect(IllegalArgumentException.class, "byte order is BIG_ENDIAN",
        () -> Tensor.of(ByteBuffer.allocateDirect(16), DType.FLOAT32, 4));
    TestSupport.expect(IllegalArgumentException.class, "shape [2, 3] of float32 needs 24 bytes but the buffer has 20",
        () -> Tensor.of(direct(20), DType.FLOAT32, 2, 3));
    TestSupport.expect(IllegalArgumentException.class, "shape [1] of int64 needs 8 bytes but the buffer has 16",
        () -> Tensor.of(direct(16), DType.INT64, 1));
    TestSupport.expect(IllegalArgumentException.class, "negative dimension",
        () -> Tensor.of(direct(16), DType.FLOAT32, -4));
    TestSupport.expect(IllegalArgumentException.class, "too many elements",
        () -> Tensor.allocate(DType.FLOAT64, Long.MAX_VALUE / 2, 4));
    TestSupport.expect(IllegalArgumentException.class, "has 6 elements but the float[] has 5",
        () -> Tensor.of(new float[5], 2, 3));
    TestSupport.expect(IllegalArgumentException.class, "buffer must not be null",
        () -> Tensor.of((ByteBuffer) null, DType.FLOAT32, 1));
    TestSupport.expect(IllegalArgumentException.class, "data must not be null", () -> Tensor.of((double[]) null));
    TestSupport.expect(IllegalStateException.class, "no buffer", () -> Tensor.of(new int[2]).buffer());
    TestSupport.expect(IndexOutOfBoundsException.class, "index 4", () -> Tensor.of(new int[2]).getDouble(4));
  }

  @Test
  public void javaSideArgumentChecksComeFirst() {
    Tensor t = Tensor.allocate(DType.FLOAT32, 4);
    TestSupport.expect(IllegalArgumentException.class, "in must not be null",
        () -> ctx.allreduce(null, t, ReduceOp.SUM));
    TestSupport.expect(IllegalArgumentException.class, "out must not be null",
        () -> ctx.broadcast(t, null, 0));
    TestSupport.expect(IllegalArgumentException.class, "op must not be null", () -> ctx.allreduce(t, t, null));
    TestSupport.expect(IllegalArgumentException.class, "args must not be null",
        () -> ctx.neighborAllreduce(t, t, null));
    Tensor readOnly = Tensor.of(direct(16).asReadOnlyBuffer().order(ByteOrder.nativeOrder()), DType.FLOAT32);
    TestSupport.expect(IllegalArgumentException.class, "out is a read-only buffer",
        () -> ctx.allreduce(t, readOnly, ReduceOp.SUM));
    TestSupport.expect(IllegalArgumentException.class, "sourceWeights needs one entry per rank",
        () -> NeighborArgs.weighted(0.5, new int[] {1}, new double[] {0.25, 0.25}));
    TestSupport.expect(IllegalArgumentException.class, "dynamic",
        () -> NeighborArgs.defaults().withDestinationWeights(new double[0]));
    assertContextWorks();
  }

  @Test
  public void libraryRejectionsCarryStarlingsMessage() {
    Tensor f32 = Tensor.allocate(DType.FLOAT32, 8);
    StarlingException e = TestSupport.expect(Status.INVALID_ARGUMENT, "same dtype and shape",
        () -> ctx.allreduce(f32, Tensor.allocate(DType.FLOAT32, 4, 2), ReduceOp.SUM));
    assertTrue(e.hint().startsWith("invalid argument"));
    assertEquals(Status.INVALID_ARGUMENT.code(), e.code());
    TestSupport.expect(Status.INVALID_ARGUMENT, "float64[8]",
        () -> ctx.broadcast(f32, Tensor.allocate(DType.FLOAT64, 8), 0));
    TestSupport.expect(Status.UNSUPPORTED, "floating-point",
        () -> ctx.allreduce(Tensor.of(new int[3]), Tensor.of(new int[3]), ReduceOp.AVERAGE));
    TestSupport.expect(Status.INVALID_ARGUMENT, "root -1", () -> ctx.broadcast(f32, f32, -1));
    TestSupport.expect(Status.INVALID_ARGUMENT, "out of range", () -> ctx.broadcast(f32, f32, size));
    // A tensor one byte into its buffer is misaligned for int32.
    ByteBuffer odd = direct(13);
    odd.position(1);
    Tensor misaligned = Tensor.of(odd, DType.INT32, 3);
    TestSupport.expect(Status.INVALID_ARGUMENT, "misaligned", () -> ctx.allreduce(misaligned, misaligned, ReduceOp.SUM));
    if (size > 1) {
      Tensor two = Tensor.allocate(DType.FLOAT32, 2);
      TestSupport.expect(Status.INVALID_ARGUMENT, "in place", () -> ctx.allgather(two, two));
      TestSupport.expect(Status.MISMATCH, "gathered first dimensions add up to " + 2 * size,
          () -> ctx.allgather(two, Tensor.allocate(DType.FLOAT32, 2)));
    }
    NeighborArgs self = NeighborArgs.dynamic(1.0, new int[0], new double[0], new int[] {rank});
    TestSupport.expect(Status.INVALID_ARGUMENT, "", () -> ctx.neighborAllreduce(f32, f32, self));
    NeighborArgs negative = NeighborArgs.weighted(-1.0, new int[0], new double[0]);
    TestSupport.expect(Status.INVALID_ARGUMENT, "", () -> ctx.neighborAllreduce(f32, f32, negative));
    assertContextWorks();
  }

  /** Descriptors Tensor refuses to build (8 float32 = 32 bytes of data), with their messages. */
  private static Map<String, Supplier<RawTensor>> badDescriptors() {
    Map<String, Supplier<RawTensor>> bad = new LinkedHashMap<>();
    bad.put("shape [2305843009213693952] of float32 has a byte size that overflows",
        () -> RawTensor.float32(1L << 61, 0));
    bad.put("shape [4294967296, 4294967296] of float64 has a byte size that overflows",
        () -> new RawTensor(2, 64, new long[] {1L << 32, 1L << 32}, null, 2, 0));
    bad.put("+ byte_offset 9223372036854775808 + 32 bytes runs past the end of the address space",
        () -> RawTensor.float32(8, Long.MIN_VALUE));
    bad.put("+ byte_offset 18446744073709551612 + 32 bytes runs past the end of the address space",
        () -> RawTensor.float32(8, -4));
    bad.put("negative dimension -4 at index 0", () -> RawTensor.float32(-4, 0));
    bad.put("not contiguous (stride -1 at dimension 0, expected 1)",
        () -> new RawTensor(2, 32, new long[] {8}, new long[] {-1}, 1, 0));
    bad.put("ndim 65 (must be between 0 and 64)", () -> new RawTensor(2, 32, new long[65], null, 65, 0));
    bad.put("ndim -1 (must be between 0 and 64)", () -> new RawTensor(2, 32, new long[] {8}, null, -1, 0));
    return bad;
  }

  @Test
  public void descriptorsWhoseSizesOverflowAreRejectedByTheLibrary() {
    int sum = ReduceOp.SUM.code();
    ByteBuffer dims = direct(8 * size);
    try (RawTensor good = RawTensor.float32(8, 0)) {
      for (Map.Entry<String, Supplier<RawTensor>> bad : badDescriptors().entrySet()) {
        String message = bad.getKey();
        try (RawTensor t = bad.getValue().get()) {
          long b = t.address;
          TestSupport.expect(Status.INVALID_ARGUMENT, message, () -> StarlingNative.allreduce(ctx.handle, b, b, sum, "bad"));
          TestSupport.expect(Status.INVALID_ARGUMENT, message,
              () -> StarlingNative.allreduce(ctx.handle, good.address, b, sum, "bad"));
          long[] request = new long[1];
          TestSupport.expect(Status.INVALID_ARGUMENT, message,
              () -> StarlingNative.allreduce_nonblocking(ctx.handle, b, b, sum, "bad", request));
          assertEquals("a failed call left a request behind", 0L, request[0]);
          TestSupport.expect(Status.INVALID_ARGUMENT, message,
              () -> StarlingNative.local_allreduce(ctx.handle, b, b, sum, "bad"));
          TestSupport.expect(Status.INVALID_ARGUMENT, message, () -> StarlingNative.broadcast(ctx.handle, b, b, 0, "bad"));
          TestSupport.expect(Status.INVALID_ARGUMENT, message,
              () -> StarlingNative.allgather_first_dims(ctx.handle, b, dims, "bad"));
          TestSupport.expect(Status.INVALID_ARGUMENT, message, () -> StarlingNative.neighbor_allreduce(ctx.handle, b, b, 0));
          long[] window = new long[1];
          TestSupport.expect(Status.INVALID_ARGUMENT, message,
              () -> StarlingNative.window_create(ctx.handle, b, "never_created", 0, window));
          assertEquals(0L, window[0]);
          assertTrue("nothing may be written through a rejected descriptor", t.untouched() && good.untouched());
        }
      }
    }
    assertContextWorks();
  }

  @Test
  public void ranksThatDisagreeFailTheRequestOnEveryRank() {
    assumeTrue("needs 2 ranks or more", size > 1);
    float[] x = new float[rank == 1 ? 12 : 10];
    Request r = ctx.allreduceNonblocking(Tensor.of(x), Tensor.of(x), ReduceOp.SUM, "mismatch");
    TestSupport.expect(Status.MISMATCH, "disagree", r::waitFor);
    TestSupport.expect(Status.MISMATCH, "disagree", r::test); // the outcome is kept
    r.close(); // already reported: close does not throw it again
    // An unobserved failure surfaces on close.
    Request unobserved = ctx.allreduceNonblocking(Tensor.of(x), Tensor.of(x), ReduceOp.SUM);
    TestSupport.expect(Status.MISMATCH, "disagree", unobserved::close);
    unobserved.close();
    assertContextWorks();
  }

  @Test
  public void closedHandlesThrowInvalidHandle() {
    Topology t = Topology.ring(size, RingStyle.BIDIRECTIONAL);
    t.close();
    TestSupport.expect(Status.INVALID_HANDLE, "already freed", () -> ctx.setTopology(t, false));
    Schedule s;
    try (Topology exp2 = Topology.exponentialTwo(Math.max(size, 2))) {
      s = Schedule.dynamicOnePeer(exp2, 0);
    }
    s.next(); // the schedule copied what it needs from the topology
    s.close();
    TestSupport.expect(Status.INVALID_HANDLE, "already freed", s::next);
    Request r = ctx.barrierNonblocking();
    r.close();
    r.close();
    r.waitFor(); // completed requests keep answering
    assertTrue(r.test());
    assertContextWorks();
  }
}
