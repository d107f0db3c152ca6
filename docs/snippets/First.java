// ranks: 1 2 4
// Decentralized averaging from Java: compile and run with
//   javac -cp starling.jar First.java && starlingrun -np 4 java -cp starling.jar:. First
import org.starling.*;

public class First {
  public static void main(String[] args) {
    try (Context ctx = Context.create()) {                       // collective; MPI starts here
      double[] x = new double[1024];
      java.util.Arrays.fill(x, ctx.rank());
      Tensor t = Tensor.of(x);                                   // a Java array: copied per call
      ctx.allreduce(t, t, ReduceOp.AVERAGE);                     // in place
      double mean = (ctx.size() - 1) / 2.0;
      if (Math.abs(x[0] - mean) > 1e-12) throw new AssertionError("allreduce: " + x[0]);

      Tensor y = Tensor.allocate(DType.FLOAT64, 1024);           // direct memory: zero-copy
      try (Topology ring = Topology.ring(ctx.size(), RingStyle.BIDIRECTIONAL)) {
        ctx.setTopology(ring, false);                            // collective
      }
      ctx.neighborAllreduce(y, y);                               // average with the ring neighbors
      try (Request r = ctx.neighborAllreduceNonblocking(y, y, NeighborArgs.defaults())) {
        // compute here, then wait (close() would wait too)
        r.waitFor();
      }
      System.out.printf("rank %d of %d: %.3f%n", ctx.rank(), ctx.size(), x[0]);
    }
  }
}
