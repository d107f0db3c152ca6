package org.starling;

import org.starling.internal.ring_style_t;

/** Ring topologies: both directions (weights 1/3), or one (weights 1/2). */
public enum RingStyle {
  /** i exchanges with i - 1 and i + 1; weights 1/3. */
  BIDIRECTIONAL(ring_style_t.RING_BIDIRECTIONAL),
  /** i sends to i - 1; weights 1/2. */
  LEFT(ring_style_t.RING_LEFT),
  /** i sends to i + 1; weights 1/2. */
  RIGHT(ring_style_t.RING_RIGHT);

  private final int code;

  RingStyle(int code) {
    this.code = code;
  }

  int code() {
    return code;
  }
}
