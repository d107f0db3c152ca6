package org.starling;

import java.lang.ref.Cleaner;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.starling.internal.StarlingNative;
import org.starling.internal.status_code;

/**
 * A nonblocking operation in flight. It keeps its tensors (and their native
 * descriptors) alive until the operation completes; {@link #waitFor()} and
 * {@link #test()} report its outcome, throwing StarlingException if it failed, as often
 * as they are called. {@link #close()} waits if needed and releases everything.
 *
 * <p>Until it completes, a request is also held by a process-wide registry, so a request
 * that is dropped without being closed can never let the garbage collector free memory
 * the engine still writes into; closing its Context (which finishes every operation)
 * releases that hold. A Cleaner then frees a dropped request's native memory; it never
 * waits and never calls anything collective.
 */
public final class Request implements AutoCloseable {
  private static final Set<Request> IN_FLIGHT = ConcurrentHashMap.newKeySet();

  /** Native resources, shared with the Cleaner (which must not reach the Request). */
  private static final class Native implements Runnable {
    final Call call;
    long handle;

    Native(Call call, long handle) {
      this.call = call;
      this.handle = handle;
    }

    @Override
    public synchronized void run() {
      try {
        if (handle != 0) StarlingNative.request_free(handle);
      } catch (StarlingException e) {
        // Only reachable through a Starling bug; nothing to report it to from here.
      } finally {
        handle = 0;
        call.finish(false);
      }
    }
  }

  private final Context context;
  private final Native state;
  private final Cleaner.Cleanable cleanable;
  private boolean done;
  private StarlingException error;
  private boolean errorReported;

  Request(Context context, Call call, long handle) {
    this.context = context;
    this.state = new Native(call, handle);
    IN_FLIGHT.add(this);
    this.cleanable = LocalHandle.CLEANER.register(this, state);
  }

  /** True once the operation has finished; throws StarlingException if it failed. Never blocks. */
  public synchronized boolean test() {
    if (!done) {
      try {
        if (StarlingNative.request_test(state.handle) == status_code.IN_PROGRESS) return false;
        complete(null);
      } catch (StarlingException e) {
        complete(e);
      }
    }
    return report();
  }

  /** Blocks until the operation finishes; throws StarlingException if it failed. */
  public synchronized void waitFor() {
    if (!done) {
      try {
        StarlingNative.request_wait(state.handle);
        complete(null);
      } catch (StarlingException e) {
        complete(e);
      }
    }
    report();
  }

  /**
   * For allgather-family requests: each source's first dimension (waits first). For
   * other operations, IllegalStateException.
   */
  public synchronized long[] firstDims() {
    waitFor();
    return state.call.firstDims();
  }

  /**
   * Waits if needed and releases the request. Throws the operation's failure only if
   * test() or waitFor() has not already thrown it.
   */
  @Override
  public synchronized void close() {
    if (errorReported) return;
    waitFor();
  }

  /** The final outcome, as often as asked: true, or the failure. */
  private boolean report() {
    if (error == null) return true;
    errorReported = true;
    throw new StarlingException(error.code(), error.getMessage());
  }

  private void complete(StarlingException failure) {
    done = true;
    error = failure;
    if (failure == null) state.call.succeeded();
    state.call.finish(failure == null);
    cleanable.clean();
    IN_FLIGHT.remove(this);
  }

  /** Called once a context is destroyed: its operations have all finished. */
  static void releaseAll(Context context) {
    IN_FLIGHT.removeIf(r -> r.context == context);
  }
}
