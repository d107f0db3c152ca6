package org.starling;

import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.starling.internal.StarlingNative;

/**
 * A weighted directed graph over {@code size} ranks: edge i -> j with weight w means
 * rank j receives rank i's tensor scaled by w; an edge r -> r is r's self weight.
 * Local (no communication). The generators give BlueFog's edges and weights.
 */
public final class Topology implements AutoCloseable {
  /** One weighted edge. */
  public record Edge(int source, int destination, double weight) {}

  /** The weights a rank receives (or sends) with: its own and, per neighbor, the edge's. */
  public record Weights(double selfWeight, int[] ranks, double[] weights) {}

  @FunctionalInterface
  private interface Maker {
    void make(long[] out);
  }

  final long handle;
  private final Cleaner.Cleanable cleanable;

  Topology(long handle) {
    this.handle = handle;
    this.cleanable = LocalHandle.register(this, handle, StarlingNative::topology_free);
  }

  private static Topology make(Maker maker) {
    long[] out = new long[1];
    maker.make(out);
    return new Topology(out[0]);
  }

  /** Explicit edges sources[k] -> destinations[k] with weights[k] (null: all 1.0). */
  public static Topology of(int size, int[] sources, int[] destinations, double[] weights) {
    Check.notNull(sources, "sources");
    Check.notNull(destinations, "destinations");
    if (sources.length != destinations.length || (weights != null && weights.length != sources.length)) {
      throw new IllegalArgumentException("sources, destinations and weights need one entry per edge ("
          + sources.length + ", " + destinations.length + ", " + (weights == null ? "null" : weights.length) + ")");
    }
    return make(out -> StarlingNative.topology_create(size, sources.length, sources, destinations, weights, out));
  }

  /** i -> i + 2^k (mod size), plus self; uniform weights. */
  public static Topology exponentialTwo(int size) {
    return make(out -> StarlingNative.topology_exponential_two(size, out));
  }

  /** i -> i + base^k (mod size), plus self; uniform weights. */
  public static Topology exponential(int size, int base) {
    return make(out -> StarlingNative.topology_exponential(size, base, out));
  }

  /** i -> i +- base^k (mod size), plus self; uniform weights. */
  public static Topology symmetricExponential(int size, int base) {
    return make(out -> StarlingNative.topology_symmetric_exponential(size, base, out));
  }

  /** A rows x cols grid with Metropolis-Hastings weights; rows = cols = 0 picks the most square. */
  public static Topology meshGrid2D(int size, int rows, int cols) {
    return make(out -> StarlingNative.topology_mesh_grid_2d(size, rows, cols, out));
  }

  /** Every rank linked both ways to {@code center} (BlueFog's StarGraph). */
  public static Topology star(int size, int center) {
    return make(out -> StarlingNative.topology_star(size, center, out));
  }

  /** A ring over {@code size} ranks, in one or both directions. */
  public static Topology ring(int size, RingStyle style) {
    Check.notNull(style, "style");
    return make(out -> StarlingNative.topology_ring(size, style.code(), out));
  }

  /** Every rank linked to every other; uniform weights 1/size. */
  public static Topology fullyConnected(int size) {
    return make(out -> StarlingNative.topology_fully_connected(size, out));
  }

  /** Number of ranks. */
  public int size() {
    int[] out = new int[1];
    StarlingNative.topology_size(handle, out);
    return out[0];
  }

  /** Number of edges, self-loops included. */
  public int numEdges() {
    int[] out = new int[1];
    StarlingNative.topology_num_edges(handle, out);
    return out[0];
  }

  /** Every edge, sorted by (source, destination). */
  public List<Edge> edges() {
    int n = numEdges();
    int[] src = new int[n];
    int[] dst = new int[n];
    double[] w = new double[n];
    StarlingNative.topology_edges(handle, src, dst, w, n);
    List<Edge> edges = new ArrayList<>(n);
    for (int e = 0; e < n; ++e) edges.add(new Edge(src[e], dst[e], w[e]));
    return edges;
  }

  /** W[source][destination], 0 where there is no edge. */
  public double[][] weightMatrix() {
    int size = size();
    double[][] w = new double[size][size];
    for (Edge e : edges()) w[e.source()][e.destination()] = e.weight();
    return w;
  }

  /** Ranks with an edge into {@code rank}, ascending, self excluded. */
  public int[] inNeighbors(int rank) {
    int capacity = size();
    int[] ranks = new int[capacity];
    int[] count = new int[1];
    StarlingNative.topology_in_neighbors(handle, rank, ranks, capacity, count);
    return Arrays.copyOf(ranks, count[0]);
  }

  /** Ranks {@code rank} has an edge to, ascending, self excluded. */
  public int[] outNeighbors(int rank) {
    int capacity = size();
    int[] ranks = new int[capacity];
    int[] count = new int[1];
    StarlingNative.topology_out_neighbors(handle, rank, ranks, capacity, count);
    return Arrays.copyOf(ranks, count[0]);
  }

  /** The weights {@code rank} receives with (per in-neighbor: edge neighbor -> rank). */
  public Weights recvWeights(int rank) {
    return weights(rank, true);
  }

  /** The weights {@code rank} sends with (per out-neighbor: edge rank -> neighbor). */
  public Weights sendWeights(int rank) {
    return weights(rank, false);
  }

  private Weights weights(int rank, boolean recv) {
    int capacity = size();
    double[] self = new double[1];
    int[] ranks = new int[capacity];
    double[] weights = new double[capacity];
    int[] count = new int[1];
    if (recv) StarlingNative.topology_recv_weights(handle, rank, self, ranks, weights, capacity, count);
    else StarlingNative.topology_send_weights(handle, rank, self, ranks, weights, capacity, count);
    return new Weights(self[0], Arrays.copyOf(ranks, count[0]), Arrays.copyOf(weights, count[0]));
  }

  /** True if every rank has the same degree (in + out, a self-loop counting twice). */
  public boolean isRegular() {
    int[] out = new int[1];
    StarlingNative.topology_is_regular(handle, out);
    return out[0] != 0;
  }

  /** True if both graphs have the same size and exactly the same weighted edges. */
  public boolean isEquivalent(Topology other) {
    Check.notNull(other, "other");
    int[] out = new int[1];
    StarlingNative.topology_is_equivalent(handle, other.handle, out);
    return out[0] != 0;
  }

  /** Frees the graph (local); later calls throw StarlingException (INVALID_HANDLE). Idempotent. */
  @Override
  public void close() {
    cleanable.clean();
  }
}
