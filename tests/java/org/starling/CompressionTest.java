package org.starling;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import org.junit.Test;

/** Compressed allreduce and CHOCO gossip through the Java binding. */
public class CompressionTest extends ContextTestBase {

  @Test
  public void topKAllreduceMatchesReference() {
    int n = 40;
    Tensor in = Tensor.allocate(DType.FLOAT64, n);
    Tensor out = Tensor.allocate(DType.FLOAT64, n);
    // Rank r's largest element is r, at index r; every other element is tiny.
    for (int i = 0; i < n; ++i) in.setDouble(i, i == rank ? 10.0 + rank : 1e-3 * i);
    Stats before = ctx.stats();
    ctx.allreduceCompressed(in, out, ReduceOp.SUM, "java.topk", Compression.topK(1));
    for (int i = 0; i < n; ++i) assertEquals("element " + i, i < size ? 10.0 + i : 0.0, out.getDouble(i), 0);
    Stats after = ctx.stats();
    assertEquals((size - 1) * 8L * n, after.bytesBeforeCompression() - before.bytesBeforeCompression());
    assertEquals((size - 1) * 12L, after.bytesAfterCompression() - before.bytesAfterCompression());
  }

  @Test
  public void chocoReachesConsensus() {
    int n = 16;
    Tensor x = Tensor.allocate(DType.FLOAT64, n);
    for (int i = 0; i < n; ++i) x.setDouble(i, Math.sin(i + 1.3 * rank));
    NeighborArgs args = NeighborArgs.defaults().withName("java.choco");
    for (int t = 0; t < 60; ++t) ctx.neighborAllreduceCompressed(x, x, args, Compression.float16());
    for (int i = 0; i < n; ++i) {
      double mean = 0;
      for (int r = 0; r < size; ++r) mean += Math.sin(i + 1.3 * r) / size;
      assertEquals("element " + i, mean, x.getDouble(i), 1e-6);
    }
    ctx.compressionReset(null);
  }

  @Test
  public void badInputIsRejected() {
    Tensor ints = Tensor.allocate(DType.INT32, 8);
    try {
      ctx.allreduceCompressed(ints, ints, ReduceOp.SUM, null, Compression.sign());
      fail("sign of int32 was accepted");
    } catch (StarlingException e) {
      assertEquals(Status.UNSUPPORTED, e.status());
      assertTrue(e.getMessage(), e.getMessage().contains("int32"));
    }
  }
}
