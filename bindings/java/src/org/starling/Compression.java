package org.starling;

import org.starling.internal.StarlingNative;
import org.starling.internal.compressor_t;

/**
 * A compressor and its options (starling_compression_t) for
 * {@link Context#allreduceCompressed} and {@link Context#neighborAllreduceCompressed}.
 * Immutable; the with-style methods return modified copies. k = 0 means "use ratio".
 */
public final class Compression {
  private final int compressor;
  private final long k;
  private final double ratio;
  private final long seed;
  private final boolean errorFeedback;
  private final double gamma;

  private Compression(int compressor, long k, double ratio, long seed, boolean errorFeedback, double gamma) {
    this.compressor = compressor;
    this.k = k;
    this.ratio = ratio;
    this.seed = seed;
    this.errorFeedback = errorFeedback;
    this.gamma = gamma;
  }

  /** Every element rounded to float16 (finite values saturate at +-65504). */
  public static Compression float16() {
    return new Compression(compressor_t.COMPRESS_FLOAT16, 0, 0, 0, false, 1.0);
  }

  /** Every element rounded to bfloat16. */
  public static Compression bfloat16() {
    return new Compression(compressor_t.COMPRESS_BFLOAT16, 0, 0, 0, false, 1.0);
  }

  /** The k elements of largest magnitude. */
  public static Compression topK(long k) {
    return new Compression(compressor_t.COMPRESS_TOPK, k, 0, 0, false, 1.0);
  }

  /** The ceil(ratio * n) elements of largest magnitude. */
  public static Compression topKRatio(double ratio) {
    return new Compression(compressor_t.COMPRESS_TOPK, 0, ratio, 0, false, 1.0);
  }

  /** k elements chosen alike on every rank from (seed, name, step). */
  public static Compression randomK(long k, long seed) {
    return new Compression(compressor_t.COMPRESS_RANDOMK, k, 0, seed, false, 1.0);
  }

  /** One bit per element and one scale per tensor. */
  public static Compression sign() {
    return new Compression(compressor_t.COMPRESS_SIGN, 0, 0, 0, false, 1.0);
  }

  /** allreduce: keep what compression dropped (per name) for the next call. */
  public Compression withErrorFeedback(boolean on) {
    return new Compression(compressor, k, ratio, seed, on, gamma);
  }

  /** neighborAllreduceCompressed: the CHOCO step size, in (0, 1]. */
  public Compression withGamma(double stepSize) {
    return new Compression(compressor, k, ratio, seed, errorFeedback, stepSize);
  }

  long build(Call call) {
    return call.own(StarlingNative.java_compression_new(compressor, k, ratio, seed, errorFeedback ? 1 : 0, gamma),
        "compression options");
  }
}
