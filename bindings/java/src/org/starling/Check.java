package org.starling;

/** Argument checks that fail with IllegalArgumentException before anything native runs. */
final class Check {
  private Check() {}

  static <T> T notNull(T value, String what) {
    if (value == null) throw new IllegalArgumentException(what + " must not be null");
    return value;
  }

  static void sameLength(int[] ranks, double[] weights, String ranksName, String weightsName) {
    if (weights != null && (ranks == null || ranks.length != weights.length)) {
      throw new IllegalArgumentException(weightsName + " needs one entry per rank of " + ranksName + " ("
          + (ranks == null ? 0 : ranks.length) + ") but has " + weights.length);
    }
  }

  /** A builder's address; 0 means the builder rejected its input or ran out of memory. */
  static long built(long address, String what) {
    if (address == 0) throw new IllegalArgumentException("invalid " + what + " (or out of native memory)");
    return address;
  }
}
