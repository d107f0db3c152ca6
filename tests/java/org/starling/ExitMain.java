package org.starling;

/**
 * Rank 0 leaves an allreduce loop early while the others go on (run by
 * tests/exit/run_exit_test.py, which checks that the job ends non-zero within a bound):
 * {@code ExitMain throw <step>}: an uncaught exception (the JVM exits with status 1 and
 * Starling's exit handler tells the peers); {@code ExitMain close <step>}: an exception
 * inside try-with-resources (close() destroys the context; peers are told it left).
 * Rank 0 prints "T_LEAVE seconds" (CLOCK_MONOTONIC, which System.nanoTime reads); the
 * others let their PeerFailedException escape main.
 */
public final class ExitMain {
  private ExitMain() {}

  private static void loop(Context ctx, String mode, int step) {
    Tensor in = Tensor.of(new double[] {1, 2, 3}, 3);
    Tensor out = Tensor.allocate(DType.FLOAT64, 3);
    for (int i = 0; i < 1000; ++i) {
      if (ctx.rank() == 0 && i == step) {
        // One write: a line printed in pieces interleaves with the other stream's output.
        System.out.print(String.format("T_LEAVE %.6f%n", System.nanoTime() / 1e9));
        System.out.flush();
        throw new IllegalStateException("user bug on rank 0");
      }
      ctx.allreduce(in, out, ReduceOp.SUM);
    }
  }

  public static void main(String[] args) {
    String mode = args[0];
    int step = Integer.parseInt(args[1]);
    if (mode.equals("close")) {
      try (Context ctx = Context.create()) {
        loop(ctx, mode, step);
      }
    } else {
      loop(Context.create(), mode, step);
    }
  }
}
