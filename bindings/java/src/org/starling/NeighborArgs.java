package org.starling;

import org.starling.internal.StarlingNative;

/**
 * How a neighbor operation picks its peers and weights (starling_neighbor_args_t).
 * Immutable; the with-style methods return modified copies.
 *
 * <ul>
 *   <li>{@link #defaults()}: the context's topology with its default weights (the
 *       topology's own if it was set weighted, else the uniform average).</li>
 *   <li>{@link #weighted}: the static topology, with self_weight and one weight per
 *       listed in-neighbor (unlisted in-neighbors get 0).</li>
 *   <li>{@link #dynamic}: this call's own graph: send to destinationRanks, receive from
 *       sourceRanks with their weights.</li>
 * </ul>
 */
public final class NeighborArgs {
  private final boolean useWeights;
  private final double selfWeight;
  private final int[] sourceRanks;
  private final double[] sourceWeights;
  private final boolean dynamic;
  private final int[] destinationRanks;
  private final double[] destinationWeights;
  private final boolean checkTopology;
  private final String name;

  private NeighborArgs(boolean useWeights, double selfWeight, int[] sourceRanks, double[] sourceWeights,
      boolean dynamic, int[] destinationRanks, double[] destinationWeights, boolean checkTopology, String name) {
    Check.sameLength(sourceRanks, sourceWeights, "sourceRanks", "sourceWeights");
    Check.sameLength(destinationRanks, destinationWeights, "destinationRanks", "destinationWeights");
    this.useWeights = useWeights;
    this.selfWeight = selfWeight;
    this.sourceRanks = sourceRanks == null ? null : sourceRanks.clone();
    this.sourceWeights = sourceWeights == null ? null : sourceWeights.clone();
    this.dynamic = dynamic;
    this.destinationRanks = destinationRanks == null ? null : destinationRanks.clone();
    this.destinationWeights = destinationWeights == null ? null : destinationWeights.clone();
    this.checkTopology = checkTopology;
    this.name = name;
  }

  /** The context's topology and default weights. */
  public static NeighborArgs defaults() {
    return new NeighborArgs(false, 0, null, null, false, null, null, false, null);
  }

  /** The context's topology with explicit weights for self and the listed in-neighbors. */
  public static NeighborArgs weighted(double selfWeight, int[] sourceRanks, double[] sourceWeights) {
    Check.notNull(sourceRanks, "sourceRanks");
    Check.notNull(sourceWeights, "sourceWeights");
    return new NeighborArgs(true, selfWeight, sourceRanks, sourceWeights, false, null, null, false, null);
  }

  /**
   * A per-call graph: this rank sends to {@code destinationRanks} and receives from
   * {@code sourceRanks}, weighting them by {@code sourceWeights} and itself by
   * {@code selfWeight}. Either list may be empty, never null.
   */
  public static NeighborArgs dynamic(double selfWeight, int[] sourceRanks, double[] sourceWeights,
      int[] destinationRanks) {
    Check.notNull(sourceRanks, "sourceRanks");
    Check.notNull(sourceWeights, "sourceWeights");
    Check.notNull(destinationRanks, "destinationRanks");
    return new NeighborArgs(true, selfWeight, sourceRanks, sourceWeights, true, destinationRanks, null, false, null);
  }

  /** Dynamic only: scales what each destination receives (one weight per destination). */
  public NeighborArgs withDestinationWeights(double[] weights) {
    if (!dynamic) throw new IllegalArgumentException("destination weights need dynamic args");
    Check.notNull(weights, "weights");
    return new NeighborArgs(useWeights, selfWeight, sourceRanks, sourceWeights, dynamic, destinationRanks, weights,
        checkTopology, name);
  }

  /** Dynamic only: verify collectively, before any data moves, that sends match receives. */
  public NeighborArgs withCheckTopology(boolean check) {
    return new NeighborArgs(useWeights, selfWeight, sourceRanks, sourceWeights, dynamic, destinationRanks,
        destinationWeights, check, name);
  }

  /** A label for diagnostics and the timeline. */
  public NeighborArgs withName(String label) {
    return new NeighborArgs(useWeights, selfWeight, sourceRanks, sourceWeights, dynamic, destinationRanks,
        destinationWeights, checkTopology, label);
  }

  boolean isDynamic() {
    return dynamic;
  }

  int[] sourceRanks() {
    return sourceRanks == null ? new int[0] : sourceRanks.clone();
  }

  /** A native starling_neighbor_args_t owned by {@code call}. */
  long build(Call call) {
    return call.own(StarlingNative.java_neighbor_args_new(useWeights ? 1 : 0, selfWeight, sourceRanks,
        sourceWeights, dynamic ? 1 : 0, destinationRanks, destinationWeights, checkTopology ? 1 : 0, name),
        "neighbor arguments");
  }
}
