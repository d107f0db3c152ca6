package org.starling.examples;

import java.io.IOException;
import java.nio.DoubleBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.starling.Context;
import org.starling.DType;
import org.starling.NeighborArgs;
import org.starling.ReduceOp;
import org.starling.Schedule;
import org.starling.Tensor;
import org.starling.Topology;

/**
 * Logistic regression trained by decentralized SGD: every rank takes gradient steps on
 * its own shard of the data and then averages its model with one peer, chosen per step
 * by the dynamic one-peer exponential-2 schedule (no global allreduce in the training
 * loop). Prints, per epoch, the training loss, the test accuracy of the ranks' models and
 * how far they are from their average.
 *
 * <p>Data: the Wisconsin breast cancer set (569 samples, 30 features) as shipped by
 * Debian's python3-sklearn. Usage:
 * {@code mpirun -np 4 java -cp starling.jar:examples.jar org.starling.examples.LogisticRegression
 * [--data breast_cancer.csv] [--epochs 30] [--min-accuracy 0.9]}
 */
public final class LogisticRegression {
  private static final String DEFAULT_DATA =
      "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv";
  private static final int BATCH = 16;
  private static final double LEARNING_RATE = 0.2;
  private static final double L2 = 1e-4;

  private LogisticRegression() {}

  public static void main(String[] args) throws IOException {
    String data = DEFAULT_DATA;
    int epochs = 30;
    double minAccuracy = 0;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--data": data = args[i + 1]; break;
        case "--epochs": epochs = Integer.parseInt(args[i + 1]); break;
        case "--min-accuracy": minAccuracy = Double.parseDouble(args[i + 1]); break;
        default: throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    double accuracy;
    try (Context ctx = Context.create()) {
      accuracy = train(ctx, readCsv(Path.of(data)), epochs);
    }
    if (accuracy < minAccuracy) {
      System.err.printf("final test accuracy %.3f is below --min-accuracy %.3f%n", accuracy, minAccuracy);
      System.exit(1);
    }
  }

  /** Rows of (30 features, label); the first line is sklearn's "n,d,name0,name1" header. */
  private static double[][] readCsv(Path path) throws IOException {
    List<String> lines = Files.readAllLines(path);
    double[][] rows = new double[lines.size() - 1][];
    for (int i = 1; i < lines.size(); ++i) {
      rows[i - 1] = Arrays.stream(lines.get(i).split(",")).mapToDouble(Double::parseDouble).toArray();
    }
    return rows;
  }

  private static double train(Context ctx, double[][] rows, int epochs) {
    int rank = ctx.rank();
    int size = ctx.size();
    int d = rows[0].length - 1;
    // The same shuffle everywhere: a fifth for testing, the rest dealt out to the ranks.
    List<double[]> shuffled = new ArrayList<>(Arrays.asList(rows));
    java.util.Collections.shuffle(shuffled, new Random(7));
    List<double[]> test = shuffled.subList(0, rows.length / 5);
    List<double[]> shard = new ArrayList<>();
    List<double[]> trainAll = shuffled.subList(rows.length / 5, rows.length);
    for (int i = rank; i < trainAll.size(); i += size) shard.add(trainAll.get(i));

    // Feature scaling from the global training statistics: one allreduce of local sums.
    double[] stats = new double[2 * d + 1];
    for (double[] row : shard) {
      for (int j = 0; j < d; ++j) {
        stats[j] += row[j];
        stats[d + j] += row[j] * row[j];
      }
      stats[2 * d] += 1;
    }
    ctx.allreduce(Tensor.of(stats), Tensor.of(stats), ReduceOp.SUM, "feature statistics");
    double[] mean = new double[d];
    double[] scale = new double[d];
    for (int j = 0; j < d; ++j) {
      mean[j] = stats[j] / stats[2 * d];
      scale[j] = 1 / Math.sqrt(Math.max(stats[d + j] / stats[2 * d] - mean[j] * mean[j], 1e-12));
    }

    // The model (d weights + bias) lives in a direct tensor: gossip reads and writes it in place.
    Tensor model = Tensor.allocate(DType.FLOAT64, d + 1);
    DoubleBuffer w = model.buffer().asDoubleBuffer();
    Random init = new Random(100 + rank); // different starting points: watch them agree
    for (int j = 0; j <= d; ++j) w.put(j, init.nextGaussian());

    Schedule schedule = null;
    if (size > 1) {
      try (Topology exp2 = Topology.exponentialTwo(size)) {
        schedule = Schedule.dynamicOnePeer(exp2, rank);
      }
    }
    // Every rank takes the same number of steps (shards differ by at most one sample).
    int steps = ((trainAll.size() + size - 1) / size + BATCH - 1) / BATCH;
    double[] x = new double[d];
    double[] grad = new double[d + 1];
    double accuracy = 0;
    if (rank == 0) System.out.printf("%d ranks, %d training samples, %d test samples%n", size, trainAll.size(), test.size());
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double lossSum = 0;
      for (int step = 0; step < steps; ++step) {
        Arrays.fill(grad, 0);
        for (int k = 0; k < BATCH; ++k) {
          double[] row = shard.get((step * BATCH + k) % shard.size());
          standardize(row, mean, scale, x);
          double p = sigmoid(dot(w, x));
          double y = row[d];
          lossSum -= y * Math.log(p + 1e-12) + (1 - y) * Math.log(1 - p + 1e-12);
          for (int j = 0; j < d; ++j) grad[j] += (p - y) * x[j] / BATCH;
          grad[d] += (p - y) / BATCH;
        }
        for (int j = 0; j <= d; ++j) w.put(j, w.get(j) - LEARNING_RATE * (grad[j] + L2 * w.get(j)));
        if (schedule != null) gossip(ctx, model, schedule.next());
      }
      accuracy = report(ctx, epoch, model, w, test, mean, scale, lossSum / (steps * BATCH));
    }
    if (schedule != null) schedule.close();
    return accuracy;
  }

  /** One decentralized averaging step: 1/2 mine + 1/2 the one peer that sends to me. */
  private static void gossip(Context ctx, Tensor model, Schedule.Step step) {
    int[] from = step.recvRanks();
    double share = 1.0 / (from.length + 1);
    double[] weights = new double[from.length];
    Arrays.fill(weights, share);
    ctx.neighborAllreduce(model, model, NeighborArgs.dynamic(share, from, weights, step.sendRanks()));
  }

  /** Test accuracy (mean over ranks), training loss, and the models' spread; printed by rank 0. */
  private static double report(Context ctx, int epoch, Tensor model, DoubleBuffer w, List<double[]> test,
      double[] mean, double[] scale, double loss) {
    int d = mean.length;
    double[] x = new double[d];
    int correct = 0;
    for (double[] row : test) {
      standardize(row, mean, scale, x);
      if ((sigmoid(dot(w, x)) >= 0.5 ? 1 : 0) == (int) row[d]) correct++;
    }
    double[] sums = {correct / (double) test.size(), loss};
    ctx.allreduce(Tensor.of(sums), Tensor.of(sums), ReduceOp.AVERAGE, "metrics");
    Tensor average = Tensor.allocate(DType.FLOAT64, d + 1);
    ctx.allreduce(model, average, ReduceOp.AVERAGE, "model average");
    double[] spread = {0};
    for (int j = 0; j <= d; ++j) spread[0] += Math.pow(w.get(j) - average.getDouble(j), 2);
    spread[0] = Math.sqrt(spread[0]);
    ctx.allreduce(Tensor.of(spread), Tensor.of(spread), ReduceOp.MAX, "spread");
    if (ctx.rank() == 0) {
      System.out.printf("epoch %2d  train loss %.4f  test accuracy %5.1f%%  max distance to the average model %.2e%n",
          epoch, sums[1], 100 * sums[0], spread[0]);
    }
    return sums[0];
  }

  private static void standardize(double[] row, double[] mean, double[] scale, double[] out) {
    for (int j = 0; j < out.length; ++j) out[j] = (row[j] - mean[j]) * scale[j];
  }

  private static double dot(DoubleBuffer w, double[] x) {
    double s = w.get(x.length); // bias
    for (int j = 0; j < x.length; ++j) s += w.get(j) * x[j];
    return s;
  }

  private static double sigmoid(double z) {
    return 1 / (1 + Math.exp(-z));
  }
}
