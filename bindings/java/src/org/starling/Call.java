package org.starling;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.starling.internal.StarlingNative;

/**
 * The native side of one operation: a DLTensor descriptor per tensor, option structs,
 * and the direct buffers they point into, all kept reachable until the operation has
 * completed (its call returned, or its Request finished). Then finish() copies results
 * back into array-backed outputs (on success only) and frees the native memory.
 */
final class Call implements AutoCloseable {
  private static final class Bound {
    final Tensor tensor;
    final ByteBuffer memory;
    final long descriptor;
    boolean written;

    Bound(Tensor tensor, ByteBuffer memory, long descriptor) {
      this.tensor = tensor;
      this.memory = memory;
      this.descriptor = descriptor;
    }
  }

  /** A blocking operation's native call. */
  @FunctionalInterface
  interface Blocking {
    void run(Call call);
  }

  /** A nonblocking operation's native call, which stores its request handle in request[0]. */
  @FunctionalInterface
  interface Nonblocking {
    void run(Call call, long[] request);
  }

  /** Runs {@code body} with a fresh Call, released when it returns or throws. */
  static void run(Blocking body) {
    try (Call call = new Call()) {
      body.run(call);
      call.succeeded();
    }
  }

  /** Submits {@code body}; the Call then belongs to the returned Request. */
  static Request submit(Context context, Nonblocking body) {
    Call call = new Call();
    try {
      long[] request = new long[1];
      body.run(call, request);
      return new Request(context, call, request[0]);
    } catch (RuntimeException | Error e) {
      call.close();
      throw e;
    }
  }

  private final Map<Tensor, Bound> tensors = new IdentityHashMap<>();
  private final List<Long> natives = new ArrayList<>();
  private ByteBuffer firstDims; // kept after finish(): read once the operation completed
  private int firstDimsCount;
  private boolean succeeded;
  private boolean finished;

  /** A descriptor for a tensor Starling only reads. */
  long in(Tensor tensor, String what) {
    return bind(tensor, what).descriptor;
  }

  /** A descriptor for a tensor Starling writes; array-backed ones are copied back. */
  long out(Tensor tensor, String what) {
    Bound b = bind(tensor, what);
    if (tensor.isReadOnly()) throw new IllegalArgumentException(what + " is a read-only buffer but is written");
    b.written = true;
    return b.descriptor;
  }

  private Bound bind(Tensor tensor, String what) {
    Check.notNull(tensor, what);
    Bound b = tensors.get(tensor); // the same Tensor twice (in place) shares its memory
    if (b == null) {
      // Device tensors have no host memory to stage: the descriptor points at the GPU.
      ByteBuffer memory = tensor.isOnDevice() ? null : tensor.stage();
      long descriptor = own(memory == null
          ? StarlingNative.java_device_tensor_new(tensor.devicePointer(), tensor.device(), tensor.dtype().code(),
              tensor.dtype().bits(), tensor.shape())
          : StarlingNative.java_tensor_new(memory, 0, tensor.dtype().code(), tensor.dtype().bits(), tensor.shape()),
          what);
      b = new Bound(tensor, memory, descriptor);
      tensors.put(tensor, b);
    }
    return b;
  }

  /** Takes ownership of a builder's native struct. */
  long own(long address, String what) {
    natives.add(Check.built(address, what));
    return address;
  }

  /**
   * A direct buffer of {@code capacity} int64 entries for an operation's first_dims, of
   * which the first {@code count} are its result (see firstDims()).
   */
  ByteBuffer firstDims(int capacity, int count) {
    firstDims = ByteBuffer.allocateDirect(8 * Math.max(capacity, 1)).order(ByteOrder.nativeOrder());
    firstDimsCount = count;
    return firstDims;
  }

  /** The first_dims entries an operation wrote (after it completed). */
  long[] firstDims() {
    if (firstDims == null) throw new IllegalStateException("this operation does not gather first dimensions");
    long[] out = new long[firstDimsCount];
    firstDims.asLongBuffer().get(out);
    return out;
  }

  void succeeded() {
    succeeded = true;
  }

  /** Copies results back (if the operation succeeded) and frees the native memory; idempotent. */
  void finish(boolean ok) {
    if (finished) return;
    finished = true;
    try {
      if (ok) {
        for (Bound b : tensors.values()) {
          if (b.written) b.tensor.unstage(b.memory);
        }
      }
    } finally {
      for (long address : natives) StarlingNative.java_free(address);
      natives.clear();
      tensors.clear();
    }
  }

  @Override
  public void close() {
    finish(succeeded);
  }
}
