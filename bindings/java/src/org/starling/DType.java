package org.starling;

/** Element types Starling reduces and moves (DLPack type code, bits, lanes 1). */
public enum DType {
  /** IEEE half precision. */
  FLOAT16(DLPack.FLOAT, 16),
  /** bfloat16 (8-bit exponent, 7-bit mantissa). */
  BFLOAT16(DLPack.BFLOAT, 16),
  /** IEEE single precision. */
  FLOAT32(DLPack.FLOAT, 32),
  /** IEEE double precision. */
  FLOAT64(DLPack.FLOAT, 64),
  /** Signed 8-bit integers. */
  INT8(DLPack.INT, 8),
  /** Signed 16-bit integers. */
  INT16(DLPack.INT, 16),
  /** Signed 32-bit integers. */
  INT32(DLPack.INT, 32),
  /** Signed 64-bit integers. */
  INT64(DLPack.INT, 64),
  /** Unsigned 8-bit integers. */
  UINT8(DLPack.UINT, 8);

  /** DLDataTypeCode values from dlpack.h (stable across DLPack versions). */
  private static final class DLPack {
    static final int INT = 0;
    static final int UINT = 1;
    static final int FLOAT = 2;
    static final int BFLOAT = 4;
  }

  private final int code;
  private final int bits;

  DType(int code, int bits) {
    this.code = code;
    this.bits = bits;
  }

  /** DLPack's type code. */
  public int code() {
    return code;
  }

  /** Bits per element. */
  public int bits() {
    return bits;
  }

  /** Bytes per element. */
  public int size() {
    return bits / 8;
  }

  /** True for float16, bfloat16, float32 and float64. */
  public boolean isFloatingPoint() {
    return code == DLPack.FLOAT || code == DLPack.BFLOAT;
  }

  @Override
  public String toString() {
    return name().toLowerCase();
  }
}
