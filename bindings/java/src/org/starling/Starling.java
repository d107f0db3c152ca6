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

  /** True if Starling's operations accept {@code dtype}. */
  public static boolean isSupported(DType dtype) {
    Check.notNull(dtype, "dtype");
    int[] out = new int[1];
    StarlingNative.dtype_supported(new int[] {dtype.code(), dtype.bits(), 1}, out);
    return out[0] != 0;
  }
}
