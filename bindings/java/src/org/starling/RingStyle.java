package org.starling;

import org.starling.internal.ring_style_t;

/** Ring topologies: both directions (weights 1/3), or one (weights 1/2). */
public enum RingStyle {
  BIDIRECTIONAL(ring_style_t.RING_BIDIRECTIONAL),
  LEFT(ring_style_t.RING_LEFT),
  RIGHT(ring_style_t.RING_RIGHT);

  private final int code;

  RingStyle(int code) {
    this.code = code;
  }

  int code() {
    return code;
  }
}
