package org.starling;

import java.lang.ref.Cleaner;
import java.util.function.LongConsumer;

/**
 * A handle to a local (non-collective) native object, freed by close() or, as a safety
 * net, by a Cleaner once its owner is unreachable. Collective objects (Context, Window)
 * never use this: their destruction must happen in the same order on every rank.
 */
final class LocalHandle implements Runnable {
  static final Cleaner CLEANER = Cleaner.create();

  private final long handle;
  private final LongConsumer free;
  private boolean freed;

  private LocalHandle(long handle, LongConsumer free) {
    this.handle = handle;
    this.free = free;
  }

  /** Registers {@code owner}; the returned Cleanable frees the handle once. */
  static Cleaner.Cleanable register(Object owner, long handle, LongConsumer free) {
    return CLEANER.register(owner, new LocalHandle(handle, free));
  }

  @Override
  public synchronized void run() {
    if (freed) return;
    freed = true;
    try {
      free.accept(handle);
    } catch (StarlingException e) {
      // Already freed by C code sharing the handle; nothing else to release.
    }
  }
}
