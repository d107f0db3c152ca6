package org.starling;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;

/**
 * A DLTensor written field by field into native memory, so tests can hand the C library
 * descriptors that {@link Tensor} refuses to build (overflowing shapes, wild byte
 * offsets, negative strides). It points at {@link #DATA_BYTES} zeroed bytes of its own.
 * Native memory comes from sun.misc.Unsafe, reached by reflection (module
 * jdk.unsupported): test code only.
 */
final class RawTensor implements AutoCloseable {
  static final int DATA_BYTES = 64;
  // DLPack's DLTensor on LP64: data, device {type, id}, ndim, dtype {code, bits, lanes},
  // shape, strides, byte_offset.
  private static final int DATA = 0;
  private static final int DEVICE = 8;
  private static final int NDIM = 16;
  private static final int DTYPE = 20;
  private static final int SHAPE = 24;
  private static final int STRIDES = 32;
  private static final int BYTE_OFFSET = 40;
  private static final int DESCRIPTOR_BYTES = 48;

  private static final MethodHandle ALLOCATE;
  private static final MethodHandle FREE;
  private static final MethodHandle PUT_LONG;
  private static final MethodHandle PUT_INT;
  private static final MethodHandle GET_BYTE;

  static {
    try {
      Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
      Field field = unsafeClass.getDeclaredField("theUnsafe");
      field.setAccessible(true);
      Object unsafe = field.get(null);
      MethodHandles.Lookup lookup = MethodHandles.publicLookup();
      ALLOCATE = lookup.findVirtual(unsafeClass, "allocateMemory", MethodType.methodType(long.class, long.class))
          .bindTo(unsafe);
      FREE = lookup.findVirtual(unsafeClass, "freeMemory", MethodType.methodType(void.class, long.class))
          .bindTo(unsafe);
      PUT_LONG = lookup.findVirtual(unsafeClass, "putLong",
          MethodType.methodType(void.class, long.class, long.class)).bindTo(unsafe);
      PUT_INT = lookup.findVirtual(unsafeClass, "putInt",
          MethodType.methodType(void.class, long.class, int.class)).bindTo(unsafe);
      GET_BYTE = lookup.findVirtual(unsafeClass, "getByte", MethodType.methodType(byte.class, long.class))
          .bindTo(unsafe);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** The descriptor's native address, for the org.starling.internal calls. */
  final long address;
  private final long data;
  private final long shape;
  private final long strides;

  /**
   * A CPU tensor of dtype (code, bits, lanes 1) with these fields as given; strides may be
   * null (compact). ndim is not derived from shape, so it can disagree on purpose.
   */
  RawTensor(int code, int bits, long[] shapeValues, long[] strideValues, int ndim, long byteOffset) {
    data = zeroed(DATA_BYTES);
    shape = zeroed(8L * Math.max(shapeValues.length, 1));
    strides = strideValues == null ? 0 : zeroed(8L * Math.max(strideValues.length, 1));
    address = zeroed(DESCRIPTOR_BYTES);
    for (int i = 0; i < shapeValues.length; ++i) putLong(shape + 8L * i, shapeValues[i]);
    for (int i = 0; strideValues != null && i < strideValues.length; ++i) putLong(strides + 8L * i, strideValues[i]);
    putLong(address + DATA, data);
    putInt(address + DEVICE, 1); // kDLCPU, device id 0
    putInt(address + NDIM, ndim);
    putInt(address + DTYPE, code | (bits << 8) | (1 << 16)); // little-endian {code, bits, lanes = 1}
    putLong(address + SHAPE, shape);
    putLong(address + STRIDES, strides);
    putLong(address + BYTE_OFFSET, byteOffset);
  }

  /** A float32 vector of shape [n] over the 64 data bytes, byteOffset in. */
  static RawTensor float32(long n, long byteOffset) {
    return new RawTensor(2, 32, new long[] {n}, null, 1, byteOffset);
  }

  /** True while no call has written into the data bytes. */
  boolean untouched() {
    for (int i = 0; i < DATA_BYTES; ++i) {
      if (getByte(data + i) != 0) return false;
    }
    return true;
  }

  @Override
  public void close() {
    for (long block : new long[] {address, strides, shape, data}) {
      if (block == 0) continue;
      invoke(() -> {
        FREE.invokeExact(block);
      });
    }
  }

  private interface NativeCall {
    void run() throws Throwable;
  }

  private static void invoke(NativeCall call) {
    try {
      call.run();
    } catch (Throwable t) {
      throw new AssertionError("native memory access failed", t);
    }
  }

  /** {@code bytes} zeroed bytes of native host memory (for tests that need a raw address); free with release. */
  static long hostMemory(long bytes) {
    return zeroed(bytes);
  }

  static void release(long address) {
    invoke(() -> {
      FREE.invokeExact(address);
    });
  }

  private static long zeroed(long bytes) {
    long[] block = new long[1];
    invoke(() -> block[0] = (long) ALLOCATE.invokeExact(bytes));
    for (long i = 0; i < bytes; i += 8) putLong(block[0] + i, 0);
    return block[0];
  }

  private static void putLong(long at, long value) {
    invoke(() -> {
      PUT_LONG.invokeExact(at, value);
    });
  }

  private static void putInt(long at, int value) {
    invoke(() -> {
      PUT_INT.invokeExact(at, value);
    });
  }

  private static byte getByte(long at) {
    byte[] value = new byte[1];
    invoke(() -> value[0] = (byte) GET_BYTE.invokeExact(at));
    return value[0];
  }
}
