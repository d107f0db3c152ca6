package org.starling;

import org.starling.internal.reduce_op_t;

/** Reductions of allreduce. AVERAGE (sum / size) needs a floating-point dtype. */
public enum ReduceOp {
  SUM(reduce_op_t.SUM),
  AVERAGE(reduce_op_t.AVERAGE),
  MIN(reduce_op_t.MIN),
  MAX(reduce_op_t.MAX);

  private final int code;

  ReduceOp(int code) {
    this.code = code;
  }

  int code() {
    return code;
  }
}
