package org.starling;

import org.starling.internal.reduce_op_t;

/** Reductions of allreduce. AVERAGE (sum / size) needs a floating-point dtype. */
public enum ReduceOp {
  /** Element-wise sum (integer sums wrap around). */
  SUM(reduce_op_t.SUM),
  /** Sum divided by the number of ranks; floating-point dtypes only. */
  AVERAGE(reduce_op_t.AVERAGE),
  /** Element-wise minimum. */
  MIN(reduce_op_t.MIN),
  /** Element-wise maximum. */
  MAX(reduce_op_t.MAX);

  private final int code;

  ReduceOp(int code) {
    this.code = code;
  }

  int code() {
    return code;
  }
}
