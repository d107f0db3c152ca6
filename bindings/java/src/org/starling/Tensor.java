package org.starling;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * A dense, row-major (C-order) tensor handed to Starling: either a view of a direct
 * {@link ByteBuffer} (no copies: Starling reads and writes that memory), a Java
 * primitive array, which each call copies into native memory and, for outputs, back
 * again once the operation has completed, or CUDA device memory allocated by another
 * library ({@link #ofDevicePointer}).
 *
 * <p>A shape left empty means one dimension over all elements. Direct buffers must use
 * the native byte order (the order Starling reads elements in).
 */
public final class Tensor {
  private final ByteBuffer buffer; // exactly the tensor's bytes, native order; null for arrays
  private final Object array; // float[], double[], int[] or long[]; null for buffers
  private final DType dtype;
  private final long[] shape;
  private final long numel;
  private final long devicePointer; // CUDA memory (device >= 0 or a bad index); unused otherwise
  private final int device; // NO_DEVICE for host tensors

  private static final int NO_DEVICE = Integer.MIN_VALUE;

  private Tensor(ByteBuffer buffer, Object array, DType dtype, long[] shape, long numel) {
    this(buffer, array, dtype, shape, numel, 0, NO_DEVICE);
  }

  private Tensor(ByteBuffer buffer, Object array, DType dtype, long[] shape, long numel, long devicePointer,
      int device) {
    this.buffer = buffer;
    this.array = array;
    this.dtype = dtype;
    this.shape = shape;
    this.numel = numel;
    this.devicePointer = devicePointer;
    this.device = device;
  }

  /**
   * A tensor in CUDA memory of GPU {@code device}: {@code address} is a device pointer
   * (or managed memory) from another library (a cudaMalloc'ed block, a framework's data
   * pointer), which Starling reads and writes in place. The caller keeps the memory
   * alive until every operation using it has completed. Each call checks the pointer:
   * a negative device, a null address with elements, or memory that is not device
   * memory of {@code device} fail with StarlingException (INVALID_ARGUMENT), and a
   * process without a usable GPU with UNSUPPORTED. Operations on device tensors order
   * against this thread's stream ({@link Starling#setCudaStream}).
   */
  public static Tensor ofDevicePointer(long address, int device, DType dtype, long... shape) {
    Check.notNull(dtype, "dtype");
    long[] dims = shapeOf(shape, -1);
    return new Tensor(null, null, dtype, dims, numel(dims), address, device);
  }

  /**
   * A view of {@code buffer} between its position and limit, which must hold exactly the
   * shape's elements of {@code dtype}. The buffer must be direct and in native order.
   */
  public static Tensor of(ByteBuffer buffer, DType dtype, long... shape) {
    Check.notNull(buffer, "buffer");
    Check.notNull(dtype, "dtype");
    if (!buffer.isDirect()) {
      throw new IllegalArgumentException("a tensor needs a direct ByteBuffer (ByteBuffer.allocateDirect or"
          + " Tensor.allocate): a heap buffer's memory can move; use Tensor.of(float[]) etc. to copy an array");
    }
    if (buffer.order() != ByteOrder.nativeOrder()) {
      throw new IllegalArgumentException("the buffer's byte order is " + buffer.order() + " but Starling reads"
          + " elements in the native order (" + ByteOrder.nativeOrder() + "): call"
          + " buffer.order(ByteOrder.nativeOrder()) before filling it");
    }
    long[] dims = shapeOf(shape, buffer.remaining() / dtype.size());
    long numel = numel(dims);
    if (numel * dtype.size() != buffer.remaining()) {
      throw new IllegalArgumentException("shape " + Arrays.toString(dims) + " of " + dtype + " needs "
          + numel * dtype.size() + " bytes but the buffer has " + buffer.remaining() + " (between position "
          + buffer.position() + " and limit " + buffer.limit() + ")");
    }
    // slice() keeps the parent's memory alive and its read-only flag, but not its order.
    return new Tensor(buffer.slice().order(ByteOrder.nativeOrder()), null, dtype, dims, numel);
  }

  /** A new zero-filled tensor over a direct, native-order buffer. */
  public static Tensor allocate(DType dtype, long... shape) {
    Check.notNull(dtype, "dtype");
    long[] dims = shapeOf(shape, -1);
    long bytes = numel(dims) * dtype.size();
    if (bytes > Integer.MAX_VALUE) throw new IllegalArgumentException(bytes + " bytes is over a ByteBuffer's 2 GiB");
    return of(ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.nativeOrder()), dtype, dims);
  }

  /** float32 elements of {@code data} (copied per call). */
  public static Tensor of(float[] data, long... shape) {
    Check.notNull(data, "data");
    return ofArray(data, data.length, DType.FLOAT32, shape);
  }

  /** float64 elements of {@code data} (copied per call). */
  public static Tensor of(double[] data, long... shape) {
    Check.notNull(data, "data");
    return ofArray(data, data.length, DType.FLOAT64, shape);
  }

  /** int32 elements of {@code data} (copied per call). */
  public static Tensor of(int[] data, long... shape) {
    Check.notNull(data, "data");
    return ofArray(data, data.length, DType.INT32, shape);
  }

  /** int64 elements of {@code data} (copied per call). */
  public static Tensor of(long[] data, long... shape) {
    Check.notNull(data, "data");
    return ofArray(data, data.length, DType.INT64, shape);
  }

  private static Tensor ofArray(Object data, int length, DType dtype, long[] shape) {
    long[] dims = shapeOf(shape, length);
    long numel = numel(dims);
    if (numel != length) {
      throw new IllegalArgumentException("shape " + Arrays.toString(dims) + " has " + numel + " elements but the "
          + data.getClass().getSimpleName() + " has " + length);
    }
    if (numel * dtype.size() > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("an array tensor is copied into one ByteBuffer, at most 2 GiB");
    }
    return new Tensor(null, data, dtype, dims, numel);
  }

  private static long[] shapeOf(long[] shape, long all) {
    if (shape == null || shape.length == 0) {
      if (all < 0) throw new IllegalArgumentException("a shape is needed");
      return new long[] {all};
    }
    for (long d : shape) {
      if (d < 0) throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has a negative dimension");
    }
    return shape.clone();
  }

  private static long numel(long[] dims) {
    try {
      long n = 1;
      for (long d : dims) n = Math.multiplyExact(n, d);
      Math.multiplyExact(n, 8L); // the byte count of any dtype fits in a long
      return n;
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException("shape " + Arrays.toString(dims) + " has too many elements");
    }
  }

  /** The element type. */
  public DType dtype() {
    return dtype;
  }

  /** The dimensions (a copy), row-major. */
  public long[] shape() {
    return shape.clone();
  }

  /** The number of dimensions. */
  public int ndim() {
    return shape.length;
  }

  /** The number of elements (the product of the dimensions). */
  public long numel() {
    return numel;
  }

  /** The size in bytes (elements times the element size). */
  public long byteSize() {
    return numel * dtype.size();
  }

  /** True for a view of a direct buffer; false for a copied array or device memory. */
  public boolean isDirect() {
    return buffer != null;
  }

  /** True for CUDA memory ({@link #ofDevicePointer}). */
  public boolean isOnDevice() {
    return device != NO_DEVICE;
  }

  /** The CUDA device of a device tensor. */
  public int device() {
    requireDevice();
    return device;
  }

  /** The device pointer of a device tensor. */
  public long devicePointer() {
    requireDevice();
    return devicePointer;
  }

  private void requireDevice() {
    if (!isOnDevice()) throw new IllegalStateException("this tensor is in host memory, not on a device");
  }

  /** The tensor's bytes (a new view: position 0, native order). Direct tensors only. */
  public ByteBuffer buffer() {
    if (isOnDevice()) throw new IllegalStateException("this tensor is CUDA device memory; it has no buffer");
    if (buffer == null) throw new IllegalStateException("this tensor copies a Java array; it has no buffer");
    return buffer.duplicate().order(ByteOrder.nativeOrder());
  }

  boolean isReadOnly() {
    return buffer != null && buffer.isReadOnly();
  }

  /** Element {@code index} (row-major) as a double. Not for float16/bfloat16 (read buffer()). */
  public double getDouble(long index) {
    int i = index(index);
    refuseDevice();
    if (array != null) {
      if (array instanceof float[]) return ((float[]) array)[i];
      if (array instanceof double[]) return ((double[]) array)[i];
      if (array instanceof int[]) return ((int[]) array)[i];
      return ((long[]) array)[i];
    }
    int at = i * dtype.size();
    switch (dtype) {
      case FLOAT32: return buffer.getFloat(at);
      case FLOAT64: return buffer.getDouble(at);
      case INT8: return buffer.get(at);
      case UINT8: return buffer.get(at) & 0xff;
      case INT16: return buffer.getShort(at);
      case INT32: return buffer.getInt(at);
      case INT64: return buffer.getLong(at);
      default: throw new UnsupportedOperationException(dtype + " elements: read their bits from buffer()");
    }
  }

  /** Sets element {@code index} (row-major), converting (integers truncate). Not for float16/bfloat16. */
  public void setDouble(long index, double value) {
    int i = index(index);
    refuseDevice();
    if (array != null) {
      if (array instanceof float[]) ((float[]) array)[i] = (float) value;
      else if (array instanceof double[]) ((double[]) array)[i] = value;
      else if (array instanceof int[]) ((int[]) array)[i] = (int) value;
      else ((long[]) array)[i] = (long) value;
      return;
    }
    int at = i * dtype.size();
    switch (dtype) {
      case FLOAT32: buffer.putFloat(at, (float) value); break;
      case FLOAT64: buffer.putDouble(at, value); break;
      case INT8: case UINT8: buffer.put(at, (byte) (long) value); break;
      case INT16: buffer.putShort(at, (short) (long) value); break;
      case INT32: buffer.putInt(at, (int) (long) value); break;
      case INT64: buffer.putLong(at, (long) value); break;
      default: throw new UnsupportedOperationException(dtype + " elements: write their bits into buffer()");
    }
  }

  /** Every element as a double (see getDouble). */
  public double[] toDoubleArray() {
    double[] out = new double[Math.toIntExact(numel)];
    for (int i = 0; i < out.length; ++i) out[i] = getDouble(i);
    return out;
  }

  private void refuseDevice() {
    if (isOnDevice()) {
      throw new UnsupportedOperationException("this tensor is CUDA device memory: copy it to the host with the"
          + " library that allocated it");
    }
  }

  private int index(long index) {
    if (index < 0 || index >= numel) {
      throw new IndexOutOfBoundsException("index " + index + " of a tensor of " + numel + " elements");
    }
    return (int) index;
  }

  /** Native memory holding the tensor for one call: the buffer itself, or a copy of the array. */
  ByteBuffer stage() {
    if (buffer != null) return buffer;
    ByteBuffer staged = ByteBuffer.allocateDirect((int) byteSize()).order(ByteOrder.nativeOrder());
    if (array instanceof float[]) staged.asFloatBuffer().put((float[]) array);
    else if (array instanceof double[]) staged.asDoubleBuffer().put((double[]) array);
    else if (array instanceof int[]) staged.asIntBuffer().put((int[]) array);
    else staged.asLongBuffer().put((long[]) array);
    return staged;
  }

  /** Copies an operation's result from {@code staged} back into the array (arrays only). */
  void unstage(ByteBuffer staged) {
    if (array == null) return;
    if (array instanceof float[]) staged.asFloatBuffer().get((float[]) array);
    else if (array instanceof double[]) staged.asDoubleBuffer().get((double[]) array);
    else if (array instanceof int[]) staged.asIntBuffer().get((int[]) array);
    else staged.asLongBuffer().get((long[]) array);
  }

  @Override
  public String toString() {
    String where = isOnDevice() ? ", cuda:" + device + " at 0x" + Long.toHexString(devicePointer)
        : buffer != null ? ", direct" : ", array";
    return "Tensor(" + dtype + Arrays.toString(shape) + where + ")";
  }
}
