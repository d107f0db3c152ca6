package org.starling;

/** Element types Starling reduces and moves (DLPack type code, bits, lanes 1). */
public enum DType {
  FLOAT16(DLPack.FLOAT, 16),
  BFLOAT16(DLPack.BFLOAT, 16),
  FLOAT32(DLPack.FLOAT, 32),
  FLOAT64(DLPack.FLOAT, 64),
  INT8(DLPack.INT, 8),
  INT16(DLPack.INT, 16),
  INT32(DLPack.INT, 32),
  INT64(DLPack.INT, 64),
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

  public int bits() {
    return bits;
  }

  /** Bytes per element. */
  public int size() {
    return bits / 8;
  }

  public boolean isFloatingPoint() {
    return code == DLPack.FLOAT || code == DLPack.BFLOAT;
  }

  @Override
  public String toString() {
    return name().toLowerCase();
  }
}
