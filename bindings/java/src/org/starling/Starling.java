package org.starling;

import org.starling.internal.StarlingNative;
import org.starling.internal.StarlingNativeConstants;

/** Library-wide queries that need no context. */
public final class Starling {
  private Starling() {}

  /** The library's version as major * 10000 + minor * 100 + patch. */
  public static int version() {
    return StarlingNative.get_version();
  }

  /** The version these bindings were generated for; differs from version() on a mismatch. */
  public static int bindingVersion() {
    return StarlingNativeConstants.VERSION_CODE;
  }

  /** "major.minor.patch" of the library. */
  public static String versionString() {
    int v = version();
    return (v / 10000) + "." + (v / 100 % 100) + "." + (v % 100);
  }

  /** The STARLING_* environment variables in effect, with defaults and meanings. */
  public static String config() {
    return StarlingNative.config_string();
  }

  /**
   * Sets the CUDA stream (a cudaStream_t as a long; 0: the legacy default stream) that
   * this thread's later operations on device tensors order against: they start after the
   * work queued on it when they are called. Thread-local, like CUDA's current device: set
   * it on each thread that calls Starling. Local; never fails.
   */
  public static void setCudaStream(long stream) {
    StarlingNative.set_cuda_stream(stream);
  }

  /** This thread's CUDA stream (0 unless set). */
  public static long getCudaStream() {
    long[] out = new long[1];
    StarlingNative.get_cuda_stream(out);
    return out[0];
  }

  /** True if Starling's operations accept {@code dtype}. */
  public static boolean isSupported(DType dtype) {
    Check.notNull(dtype, "dtype");
    int[] out = new int[1];
    StarlingNative.dtype_supported(new int[] {dtype.code(), dtype.bits(), 1}, out);
    return out[0] != 0;
  }
}
