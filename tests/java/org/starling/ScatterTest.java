package org.starling;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.starling.TestSupport.expect;
import static org.starling.TestSupport.value;

import org.junit.Test;

/** reduceScatter, alltoall and split against references every rank computes; bad input. */
public class ScatterTest extends ContextTestBase {

  private double sum(int i) {
    double acc = 0;
    for (int r = 0; r < size; ++r) acc += value(r, i);
    return acc;
  }

  @Test
  public void reduceScatterEqualBlocksAndCounts() {
    for (DType d : new DType[] {DType.FLOAT32, DType.FLOAT64, DType.INT32, DType.INT64}) {
      int block = 5;
      Tensor in = Tensor.allocate(d, block * size);
      Tensor out = Tensor.allocate(d, block);
      for (int i = 0; i < block * size; ++i) in.setDouble(i, value(rank, i));
      ctx.reduceScatter(in, out, ReduceOp.SUM);
      for (int i = 0; i < block; ++i) assertEquals(d + " element " + i, sum(rank * block + i), out.getDouble(i), 0);
    }
    long[] counts = new long[size];
    long total = 0, first = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = 3L * r + 1;
      if (r < rank) first += counts[r];
      total += counts[r];
    }
    Tensor in = Tensor.allocate(DType.FLOAT64, total);
    Tensor out = Tensor.allocate(DType.FLOAT64, counts[rank]);
    for (int i = 0; i < total; ++i) in.setDouble(i, value(rank, i));
    try (Request r = ctx.reduceScatterNonblocking(in, out, counts, ReduceOp.AVERAGE, "rs")) {
      r.waitFor();
    }
    for (int i = 0; i < counts[rank]; ++i) assertEquals(sum((int) first + i) / size, out.getDouble(i), 1e-12);
  }

  @Test
  public void alltoallEqualAndVarying() {
    Tensor in = Tensor.allocate(DType.INT32, 2 * size);
    Tensor out = Tensor.allocate(DType.INT32, 2 * size);
    for (int i = 0; i < 2 * size; ++i) in.setDouble(i, 100 * rank + i);
    ctx.alltoall(in, out);
    for (int q = 0; q < size; ++q)
      for (int j = 0; j < 2; ++j) assertEquals(100 * q + 2 * rank + j, out.getDouble(2 * q + j), 0);
    // Rank r sends r + q + 1 elements to rank q, each its own rank.
    long[] send = new long[size], recv = new long[size];
    long sent = 0, received = 0;
    for (int q = 0; q < size; ++q) {
      send[q] = rank + q + 1;
      recv[q] = q + rank + 1;
      sent += send[q];
      received += recv[q];
    }
    Tensor a = Tensor.allocate(DType.FLOAT32, sent);
    Tensor b = Tensor.allocate(DType.FLOAT32, received);
    for (int i = 0; i < sent; ++i) a.setDouble(i, rank);
    try (Request r = ctx.alltoallNonblocking(a, b, send, recv, null)) {
      r.waitFor();
    }
    int at = 0;
    for (int q = 0; q < size; ++q)
      for (int j = 0; j < recv[q]; ++j) assertEquals(q, b.getDouble(at++), 0);
  }

  @Test
  public void splitByParity() {
    try (Context child = ctx.split(rank % 2, rank)) {
      assertNotNull(child);
      assertEquals((size - rank % 2 + 1) / 2, child.size());
      assertEquals(rank / 2, child.rank());
      Tensor x = Tensor.allocate(DType.FLOAT64, 1);
      x.setDouble(0, rank);
      child.allreduce(x, x, ReduceOp.SUM);
      double expected = 0;
      for (int r = rank % 2; r < size; r += 2) expected += r;
      assertEquals(expected, x.getDouble(0), 0);
    }
    Context none = ctx.split(Context.SPLIT_UNDEFINED, 0);
    assertNull(none);
  }

  @Test
  public void badInputIsRefusedOnEveryRank() {
    Tensor in = Tensor.allocate(DType.FLOAT32, 4 * size);
    Tensor out = Tensor.allocate(DType.FLOAT32, 4);
    Tensor wide = Tensor.allocate(DType.FLOAT64, 4);
    expect(Status.INVALID_ARGUMENT, "same dtype", () -> ctx.reduceScatter(in, wide, ReduceOp.SUM));
    Tensor five = Tensor.allocate(DType.FLOAT32, 5);
    expect(Status.INVALID_ARGUMENT, "times out's elements", () -> ctx.reduceScatter(in, five, ReduceOp.SUM));
    expect(IllegalArgumentException.class, "entries but the context has",
        () -> ctx.reduceScatter(in, out, new long[size + 1], ReduceOp.SUM, null));
    long[] negative = new long[size];
    negative[0] = -1;
    expect(Status.INVALID_ARGUMENT, "negative", () -> ctx.reduceScatter(in, out, negative, ReduceOp.SUM, null));
    expect(Status.INVALID_ARGUMENT, "or neither", () -> ctx.alltoall(in, in, new long[size], null, null));
    expect(Status.INVALID_ARGUMENT, "in place", () -> ctx.alltoall(in, in));
    expect(Status.INVALID_ARGUMENT, "STARLING_SPLIT_UNDEFINED", () -> ctx.split(-4, 0));
    if (size > 1) {
      // Ranks disagree on the counts: every rank fails, naming the pair.
      long[] send = new long[size], recv = new long[size];
      java.util.Arrays.fill(send, 4);
      java.util.Arrays.fill(recv, 4);
      if (rank == 1) recv[0] = 5;
      Tensor b = Tensor.allocate(DType.FLOAT32, rank == 1 ? 4 * size + 1 : 4 * size);
      expect(Status.MISMATCH, "rank 0 sends 4 elements to rank 1, which expects 5",
          () -> ctx.alltoall(in, b, send, recv, null));
    }
    ctx.barrier();
  }
}
