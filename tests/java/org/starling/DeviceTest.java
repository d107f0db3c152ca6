package org.starling;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import org.junit.After;
import org.junit.Before;
import org.junit.Test;

/**
 * Device-pointer tensors (Tensor.ofDevicePointer), gpuPath, the thread's CUDA stream.
 * Java cannot allocate GPU memory here, so a device tensor over host memory must be
 * refused: UNSUPPORTED where no usable device plugin is found (the default runs), or
 * INVALID_ARGUMENT naming the host pointer under the emulated device (java.junit_gpu,
 * STARLING_DEVICE_PLUGIN set). Every failure happens on every rank, before anything is
 * exchanged, so the context stays usable.
 */
public class DeviceTest extends ContextTestBase {
  private long host; // 64 bytes of host memory posing as device memory

  @Before
  public void allocate() {
    host = RawTensor.hostMemory(64);
  }

  @After
  public void free() {
    RawTensor.release(host);
  }

  private static boolean emulated() {
    String plugin = System.getenv("STARLING_DEVICE_PLUGIN");
    return plugin != null && plugin.contains("emudevice");
  }

  private void assertContextWorks() {
    long[] x = {3};
    ctx.allreduce(Tensor.of(x), Tensor.of(x), ReduceOp.SUM);
    assertEquals(3L * size, x[0]);
  }

  @Test
  public void wrappingADevicePointer() {
    Tensor t = Tensor.ofDevicePointer(0x7f00_0000_1000L, 1, DType.FLOAT16, 2, 3);
    assertTrue(t.isOnDevice());
    assertFalse(t.isDirect());
    assertEquals(1, t.device());
    assertEquals(0x7f00_0000_1000L, t.devicePointer());
    assertEquals(DType.FLOAT16, t.dtype());
    assertEquals(6, t.numel());
    assertEquals(12, t.byteSize());
    assertEquals("Tensor(float16[2, 3], cuda:1 at 0x7f0000001000)", t.toString());
    TestSupport.expect(IllegalStateException.class, "CUDA device memory", t::buffer);
    TestSupport.expect(UnsupportedOperationException.class, "CUDA device memory", () -> t.getDouble(0));
    TestSupport.expect(IllegalStateException.class, "host memory", () -> Tensor.allocate(DType.INT8, 2).device());
    TestSupport.expect(IllegalArgumentException.class, "a shape is needed",
        () -> Tensor.ofDevicePointer(host, 0, DType.FLOAT32));
    TestSupport.expect(IllegalArgumentException.class, "negative dimension",
        () -> Tensor.ofDevicePointer(host, 0, DType.FLOAT32, -1));
    TestSupport.expect(IllegalArgumentException.class, "dtype must not be null",
        () -> Tensor.ofDevicePointer(host, 0, null, 4));
  }

  @Test
  public void hostMemoryPosingAsDeviceMemoryIsRefused() {
    Tensor t = Tensor.ofDevicePointer(host, 0, DType.FLOAT32, 4);
    StarlingException e = TestSupport.expect(StarlingException.class, "in ", () -> ctx.allreduce(t, t, ReduceOp.SUM));
    if (emulated()) {
      assertEquals(e.getMessage(), Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage(), e.getMessage().contains("says it is on cuda:0 but its data pointer is host memory"));
    } else {
      // No plugin here; a machine with a GPU and libstarling_cuda.so gives INVALID_ARGUMENT.
      assertTrue(e.toString(), e.status() == Status.UNSUPPORTED || e.status() == Status.INVALID_ARGUMENT);
    }
    StarlingException w = assertThrowsStarling(() -> ctx.createWindow(t, "device.window", false));
    assertEquals(e.status(), w.status());
    assertTrue(ctx.windowNames().isEmpty());
    assertContextWorks();
  }

  @Test
  public void mixingDeviceAndHostMemoryIsRefused() {
    Tensor device = Tensor.ofDevicePointer(host, 0, DType.FLOAT32, 4);
    Tensor hostTensor = Tensor.allocate(DType.FLOAT32, 4);
    StarlingException e = assertThrowsStarling(() -> ctx.allreduce(device, hostTensor, ReduceOp.SUM));
    if (emulated()) {
      assertEquals(Status.INVALID_ARGUMENT, e.status());
      assertTrue(e.getMessage(), e.getMessage().contains("in is on cuda:0 but out is host memory"));
    }
    TestSupport.expect(IllegalArgumentException.class, "allocate the output on the GPU", () -> ctx.allgather(device));
    assertContextWorks();
  }

  @Test
  public void badDeviceIndexOrNullPointer() {
    Tensor negative = Tensor.ofDevicePointer(host, -1, DType.FLOAT32, 4);
    TestSupport.expect(Status.INVALID_ARGUMENT, "negative CUDA device index -1",
        () -> ctx.allreduce(negative, negative, ReduceOp.SUM));
    Tensor nothing = Tensor.ofDevicePointer(0, 0, DType.FLOAT64, 2, 2);
    TestSupport.expect(Status.INVALID_ARGUMENT, "NULL data but 4 elements",
        () -> ctx.broadcast(nothing, nothing, 0));
    assertContextWorks();
  }

  @Test
  public void gpuPathAndStats() {
    String path = ctx.gpuPath();
    assertTrue(path, path.startsWith("none") || path.startsWith("staged"));
    Stats stats = ctx.stats();
    assertTrue(stats.stagedBytes() >= 0);
    assertEquals(path.startsWith("none") ? GpuPath.NONE : GpuPath.STAGED, stats.gpuPath());
  }

  @Test
  public void theThreadsCudaStream() throws InterruptedException {
    assertEquals(0, Starling.getCudaStream());
    Starling.setCudaStream(0x1234_5678L);
    try {
      assertEquals(0x1234_5678L, Starling.getCudaStream());
      long[] other = new long[1];
      Thread t = new Thread(() -> other[0] = Starling.getCudaStream());
      t.start();
      t.join();
      assertEquals(0, other[0]); // thread-local
    } finally {
      Starling.setCudaStream(0);
    }
    assertEquals(0, Starling.getCudaStream());
  }

  private static StarlingException assertThrowsStarling(org.junit.function.ThrowingRunnable call) {
    return TestSupport.expect(StarlingException.class, "", call);
  }
}
