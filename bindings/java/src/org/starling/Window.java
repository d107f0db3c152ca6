package org.starling;

import java.util.LinkedHashMap;
import java.util.Map;
import org.starling.internal.StarlingNative;

/**
 * A one-sided window over a direct or device tensor (create it with Context.createWindow).
 * This rank keeps one buffer per in-neighbor; put and accumulate write this rank's data
 * into its out-neighbors' buffers, get fetches in-neighbors' tensors, update folds the
 * buffers into the tensor. The window keeps its tensor alive until {@link #close()}, which is
 * collective (no finalizer frees a window).
 */
public final class Window implements AutoCloseable {
  private final Context context;
  private final long handle;
  private final String name;
  private final Tensor tensor;
  private final Call creation; // the tensor's descriptor, borrowed by the window until freed
  private boolean closed;

  Window(Context context, long handle, String name, Tensor tensor, Call creation) {
    this.context = context;
    this.handle = handle;
    this.name = name;
    this.tensor = tensor;
    this.creation = creation;
  }

  /** The name the window was created under. */
  public String name() {
    return name;
  }

  /** The window's own tensor (update writes it; remote gets read it). */
  public Tensor tensor() {
    return tensor;
  }

  /** Writes {@code data} (the window's dtype and shape) into the destinations' buffers for this rank. */
  public void put(Tensor data, WindowArgs args) {
    Check.notNull(args, "args");
    Call.run(c -> StarlingNative.window_put(handle, c.out(data, "data"), args.build(c)));
  }

  /** Puts {@code data} into every out-neighbor's buffer for this rank (default arguments). */
  public void put(Tensor data) {
    put(data, WindowArgs.defaults());
  }

  /** As put, returning a request. */
  public Request putNonblocking(Tensor data, WindowArgs args) {
    Check.notNull(args, "args");
    return Call.submit(context, (c, r) ->
        StarlingNative.window_put_nonblocking(handle, c.out(data, "data"), args.build(c), r));
  }

  /** As put, but adds into the destination buffers. */
  public void accumulate(Tensor data, WindowArgs args) {
    Check.notNull(args, "args");
    Call.run(c -> StarlingNative.window_accumulate(handle, c.out(data, "data"), args.build(c)));
  }

  /** As accumulate, returning a request. */
  public Request accumulateNonblocking(Tensor data, WindowArgs args) {
    Check.notNull(args, "args");
    return Call.submit(context, (c, r) ->
        StarlingNative.window_accumulate_nonblocking(handle, c.out(data, "data"), args.build(c), r));
  }

  /** Fetches each source's window tensor into this rank's buffer for it. */
  public void get(WindowArgs args) {
    Check.notNull(args, "args");
    Call.run(c -> StarlingNative.window_get(handle, args.build(c)));
  }

  /** As get, returning a request. */
  public Request getNonblocking(WindowArgs args) {
    Check.notNull(args, "args");
    return Call.submit(context, (c, r) -> StarlingNative.window_get_nonblocking(handle, args.build(c), r));
  }

  /** tensor = self_weight * tensor + sum of w_r * buffer_r; resets versions. Local. */
  public void update(WindowUpdateArgs args) {
    Check.notNull(args, "args");
    Call.run(c -> StarlingNative.window_update(handle, args.build(c)));
  }

  /** Averages the window tensor with every in-neighbor buffer (default weights), in place; local. */
  public void update() {
    update(WindowUpdateArgs.defaults());
  }

  /** tensor += every in-neighbor buffer, then those buffers are zeroed (push-sum). Local. */
  public void updateThenCollect(boolean requireMutex) {
    StarlingNative.window_update_then_collect(handle, requireMutex ? 1 : 0);
  }

  /** Per in-neighbor (ascending): puts and gets arrived since the last update. Local. */
  public Map<Integer, Long> versions() {
    int capacity = context.size();
    int[] ranks = new int[capacity];
    long[] versions = new long[capacity];
    int[] count = new int[1];
    StarlingNative.window_versions(handle, ranks, versions, capacity, count);
    Map<Integer, Long> out = new LinkedHashMap<>();
    for (int i = 0; i < count[0]; ++i) out.put(ranks[i], versions[i]);
    return out;
  }

  /**
   * Acquires distributed mutexes: forSelf false, on each listed rank (null: every
   * out-neighbor) the one guarding its buffer for this rank; forSelf true, this rank's own
   * for the listed ranks (null: every in-neighbor). Blocks until granted.
   */
  public void mutexAcquire(int[] ranks, boolean forSelf) {
    StarlingNative.window_mutex_acquire(handle, ranks, ranks == null ? 0 : ranks.length, forSelf ? 1 : 0);
  }

  /** Releases what mutexAcquire with the same arguments acquired. */
  public void mutexRelease(int[] ranks, boolean forSelf) {
    StarlingNative.window_mutex_release(handle, ranks, ranks == null ? 0 : ranks.length, forSelf ? 1 : 0);
  }

  /** Push-sum's p for this rank's window (1.0 at first). */
  public double associatedP() {
    double[] out = new double[1];
    StarlingNative.window_associated_p(handle, out);
    return out[0];
  }

  /** Sets this rank's push-sum weight p of the window. */
  public void setAssociatedP(double p) {
    StarlingNative.window_set_associated_p(handle, p);
  }

  /**
   * Frees the window after every rank's earlier operations on it finished. Collective;
   * idempotent. A window whose context was closed is already gone: this only releases
   * the tensor. On any other failure the window stays open.
   */
  @Override
  public synchronized void close() {
    if (closed) return;
    try {
      StarlingNative.window_free(handle);
    } catch (StarlingException e) {
      if (e.status() != Status.INVALID_HANDLE) throw e;
    }
    closed = true;
    creation.finish(false);
    context.windows.remove(handle);
  }

  @Override
  public String toString() {
    return "Window(" + name + ", " + tensor + (closed ? ", closed)" : ")");
  }
}
