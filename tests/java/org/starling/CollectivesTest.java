package org.starling;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.starling.TestSupport.value;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.junit.FixMethodOrder;
import org.junit.Test;
import org.junit.runners.MethodSorters;

/** Classic collectives, blocking and nonblocking, against references every rank computes. */
@FixMethodOrder(MethodSorters.NAME_ASCENDING)
public class CollectivesTest extends ContextTestBase {

  private double reduce(ReduceOp op, int i) {
    double acc = op == ReduceOp.MIN ? Double.MAX_VALUE : op == ReduceOp.MAX ? -Double.MAX_VALUE : 0;
    for (int r = 0; r < size; ++r) {
      double v = value(r, i);
      acc = op == ReduceOp.MIN ? Math.min(acc, v) : op == ReduceOp.MAX ? Math.max(acc, v) : acc + v;
    }
    return op == ReduceOp.AVERAGE ? acc / size : acc;
  }

  @Test
  public void allreduceEveryOpOnDirectBuffersOfEveryDtype() {
    DType[] dtypes = {DType.FLOAT32, DType.FLOAT64, DType.INT8, DType.INT16, DType.INT32, DType.INT64};
    for (DType d : dtypes) {
      for (ReduceOp op : ReduceOp.values()) {
        if (op == ReduceOp.AVERAGE && !d.isFloatingPoint()) continue;
        Tensor in = Tensor.allocate(d, 3, 5);
        Tensor out = Tensor.allocate(d, 3, 5);
        for (int i = 0; i < 15; ++i) in.setDouble(i, value(rank, i));
        ctx.allreduce(in, out, op, "allreduce." + d);
        for (int i = 0; i < 15; ++i) {
          assertEquals(d + " " + op + " element " + i, reduce(op, i), out.getDouble(i), 1e-6);
          assertEquals("input untouched", value(rank, i), in.getDouble(i), 0);
        }
      }
    }
    // Empty tensors are legal and leave every rank in step.
    Tensor empty = Tensor.allocate(DType.FLOAT32, 0, 3);
    ctx.allreduce(empty, empty, ReduceOp.SUM);
    // uint8: non-negative values.
    Tensor u = Tensor.allocate(DType.UINT8, 4);
    for (int i = 0; i < 4; ++i) u.setDouble(i, 10 * i + rank);
    ctx.allreduce(u, u, ReduceOp.MAX);
    for (int i = 0; i < 4; ++i) assertEquals(10 * i + size - 1, u.getDouble(i), 0);
  }

  @Test
  public void allreduceOnPrimitiveArraysCopiesResultsBack() {
    float[] f = new float[7];
    double[] d = new double[7];
    int[] n = new int[7];
    long[] l = new long[7];
    for (int i = 0; i < 7; ++i) {
      f[i] = (float) value(rank, i);
      d[i] = value(rank, i) / 4;
      n[i] = (int) value(rank, i);
      l[i] = (long) value(rank, i) << 33; // beyond int range
    }
    ctx.allreduce(Tensor.of(f), Tensor.of(f), ReduceOp.AVERAGE);
    Tensor dt = Tensor.of(d, 7, 1);
    ctx.allreduce(dt, dt, ReduceOp.SUM); // in place: one staging buffer
    int[] nResult = new int[7];
    ctx.allreduce(Tensor.of(n), Tensor.of(nResult), ReduceOp.MIN);
    ctx.allreduce(Tensor.of(l), Tensor.of(l), ReduceOp.SUM);
    for (int i = 0; i < 7; ++i) {
      assertEquals(reduce(ReduceOp.AVERAGE, i), f[i], 1e-6);
      assertEquals(reduce(ReduceOp.SUM, i) / 4, d[i], 1e-12);
      assertEquals(reduce(ReduceOp.MIN, i), nResult[i], 0);
      assertEquals(value(rank, i), n[i], 0);
      assertEquals((long) reduce(ReduceOp.SUM, i) << 33, l[i]);
    }
  }

  @Test
  public void float16SumFromRawBits() {
    // 1.5 (0x3E00) from every rank sums to 1.5 * size, exact in float16 for size <= 4.
    Tensor h = Tensor.allocate(DType.FLOAT16, 2);
    ByteBuffer b = h.buffer();
    b.putShort(0, (short) 0x3E00).putShort(2, (short) 0xBC00); // 1.5, -1.0
    ctx.allreduce(h, h, ReduceOp.SUM);
    short[] expected = {(short) 0x3E00, (short) 0x4200, (short) 0x4480, (short) 0x4600}; // 1.5, 3, 4.5, 6
    short[] minus = {(short) 0xBC00, (short) 0xC000, (short) 0xC200, (short) 0xC400}; // -1, -2, -3, -4
    assertEquals(expected[size - 1], b.getShort(0));
    assertEquals(minus[size - 1], b.getShort(2));
  }

  @Test
  public void broadcastFromEveryRoot() {
    for (int root = 0; root < size; ++root) {
      long[] x = {rank * 100L, rank * 100L + 1, -rank};
      long[] out = new long[3];
      ctx.broadcast(Tensor.of(x), Tensor.of(out), root);
      assertArrayEquals(new long[] {root * 100L, root * 100L + 1, -root}, out);
      Tensor direct = Tensor.allocate(DType.FLOAT64, 2, 2);
      for (int i = 0; i < 4; ++i) direct.setDouble(i, rank + i / 8.0);
      ctx.broadcast(direct, direct, root, "bcast");
      for (int i = 0; i < 4; ++i) assertEquals(root + i / 8.0, direct.getDouble(i), 0);
    }
  }

  @Test
  public void allgatherWithUnequalFirstDimensions() {
    // Rank r contributes r + 1 rows of 3 columns, row j = (r, j, r * j).
    int rows = rank + 1;
    int[] mine = new int[rows * 3];
    for (int j = 0; j < rows; ++j) {
      mine[3 * j] = rank;
      mine[3 * j + 1] = j;
      mine[3 * j + 2] = rank * j;
    }
    Tensor in = Tensor.of(mine, rows, 3);
    long[] expectedDims = new long[size];
    int total = 0;
    for (int r = 0; r < size; ++r) {
      expectedDims[r] = r + 1;
      total += r + 1;
    }
    int[] expected = new int[total * 3];
    int at = 0;
    for (int r = 0; r < size; ++r) {
      for (int j = 0; j <= r; ++j) {
        expected[at++] = r;
        expected[at++] = j;
        expected[at++] = r * j;
      }
    }
    assertArrayEquals(expectedDims, ctx.allgatherFirstDims(in));
    int[] out = new int[total * 3];
    assertArrayEquals(expectedDims, ctx.allgather(in, Tensor.of(out, total, 3)));
    assertArrayEquals(expected, out);
    Tensor gathered = ctx.allgather(in);
    assertArrayEquals(new long[] {total, 3}, gathered.shape());
    assertTrue(gathered.isDirect());
    for (int i = 0; i < expected.length; ++i) assertEquals(expected[i], gathered.getDouble(i), 0);
    try (Request r = ctx.allgatherNonblocking(in, Tensor.of(out, total, 3))) {
      assertArrayEquals(expectedDims, r.firstDims());
    }
    try (Request r = ctx.allgatherFirstDimsNonblocking(in)) {
      assertArrayEquals(expectedDims, r.firstDims());
    }
  }

  @Test
  public void nonblockingOperationsCompleteInSubmissionOrder() {
    List<double[]> arrays = new ArrayList<>();
    List<Request> requests = new ArrayList<>();
    for (int k = 0; k < 8; ++k) {
      double[] x = new double[5 + k];
      for (int i = 0; i < x.length; ++i) x[i] = value(rank, i + k);
      arrays.add(x);
      requests.add(ctx.allreduceNonblocking(Tensor.of(x), Tensor.of(x), ReduceOp.SUM, "nb" + k));
    }
    Tensor direct = Tensor.allocate(DType.FLOAT32, 4);
    for (int i = 0; i < 4; ++i) direct.setDouble(i, rank == 0 ? i : -1);
    Request bcast = ctx.broadcastNonblocking(direct, direct, 0);
    Request barrier = ctx.barrierNonblocking();
    while (!barrier.test()) Thread.onSpinWait(); // polling: never blocks
    assertTrue(barrier.test());
    barrier.close();
    bcast.waitFor();
    bcast.waitFor(); // repeatable
    bcast.close();
    for (int i = 0; i < 4; ++i) assertEquals(i, direct.getDouble(i), 0);
    for (int k = 0; k < 8; ++k) {
      requests.get(k).close(); // close waits
      double[] x = arrays.get(k);
      for (int i = 0; i < x.length; ++i) assertEquals(reduce(ReduceOp.SUM, i + k), x[i], 0);
    }
  }

  @Test
  public void arrayOutputsChangeOnlyWhenTheRequestCompletes() {
    double[] x = {rank + 1.0};
    double[] out = {-7};
    Request r = ctx.allreduceNonblocking(Tensor.of(x), Tensor.of(out), ReduceOp.SUM);
    // The engine writes a staging copy; the array is updated by waitFor/test.
    r.waitFor();
    assertEquals(size * (size + 1) / 2.0, out[0], 0);
    r.close();
  }

  @Test
  public void localAllreduceAndPairGossip() {
    double[] x = {value(rank, 0), value(rank, 1)};
    double[] local = new double[2];
    ctx.localAllreduce(Tensor.of(x), Tensor.of(local), ReduceOp.SUM, null); // one host: every rank
    assertEquals(reduce(ReduceOp.SUM, 0), local[0], 0);
    assertEquals(reduce(ReduceOp.SUM, 1), local[1], 0);
    try (Request r = ctx.localAllreduceNonblocking(Tensor.of(x), Tensor.of(local), ReduceOp.MAX, "local")) {
      r.waitFor();
    }
    assertEquals(reduce(ReduceOp.MAX, 0), local[0], 0);

    // Pairs (0,1), (2,3): out = 0.25 * mine + 0.75 * peer's; a last odd rank sits out.
    int peer = rank ^ 1;
    if (peer < size) {
      float[] mine = {rank * 4f, 1f};
      float[] out = new float[2];
      ctx.pairGossip(Tensor.of(mine), Tensor.of(out), peer, 0.25, 0.75, "pair");
      assertArrayEquals(new float[] {rank + 3f * peer, 1f}, out, 0);
      try (Request r = ctx.pairGossipNonblocking(Tensor.of(mine), Tensor.of(mine), peer, 0.5, 0.5, null)) {
        r.waitFor();
      }
      assertArrayEquals(new float[] {2f * (rank + peer), 1f}, mine, 0);
    }
    ctx.barrier();
    assertFalse(Tensor.of(x).isDirect());
  }

  @Test
  public void tensorViewsRespectPositionAndShape() {
    // A tensor over bytes [8, 32) of a larger buffer: the bytes around it stay untouched.
    ByteBuffer big = ByteBuffer.allocateDirect(40).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 5; ++i) big.putDouble(8 * i, -1);
    big.position(8).limit(32);
    Tensor t = Tensor.of(big, DType.FLOAT64, 3);
    for (int i = 0; i < 3; ++i) t.setDouble(i, i + 1);
    ctx.allreduce(t, t, ReduceOp.SUM);
    big.clear();
    assertEquals(-1, big.getDouble(0), 0);
    assertEquals(-1, big.getDouble(32), 0);
    for (int i = 0; i < 3; ++i) assertEquals((i + 1.0) * size, big.getDouble(8 + 8 * i), 0);
  }
}
