package org.starling;

import org.starling.internal.StarlingNative;

/**
 * Targets and weights of a window put, accumulate or get (starling_window_args_t).
 * Immutable; defaults: every out-neighbor (put, accumulate) or in-neighbor (get),
 * weights 1.0, self weight 1.0, no mutex.
 */
public final class WindowArgs {
  private final int[] ranks;
  private final double[] weights;
  private final double selfWeight;
  private final boolean requireMutex;

  private WindowArgs(int[] ranks, double[] weights, double selfWeight, boolean requireMutex) {
    Check.sameLength(ranks, weights, "ranks", "weights");
    this.ranks = ranks == null ? null : ranks.clone();
    this.weights = weights == null ? null : weights.clone();
    this.selfWeight = selfWeight;
    this.requireMutex = requireMutex;
  }

  /** Every neighbor, weight 1, self weight 1, no mutex. */
  public static WindowArgs defaults() {
    return new WindowArgs(null, null, 1.0, false);
  }

  /** Only these ranks, each with weight 1.0. */
  public WindowArgs withRanks(int[] targets) {
    Check.notNull(targets, "targets");
    return new WindowArgs(targets, null, selfWeight, requireMutex);
  }

  /** Only these ranks, scaling what lands in each buffer by its weight. */
  public WindowArgs withRanks(int[] targets, double[] targetWeights) {
    Check.notNull(targets, "targets");
    Check.notNull(targetWeights, "targetWeights");
    return new WindowArgs(targets, targetWeights, selfWeight, requireMutex);
  }

  /** put / accumulate: afterwards this rank's tensor (and p) is multiplied by it. */
  public WindowArgs withSelfWeight(double weight) {
    return new WindowArgs(ranks, weights, weight, requireMutex);
  }

  /** Hold the target's mutex for this rank while writing. */
  public WindowArgs withRequireMutex(boolean require) {
    return new WindowArgs(ranks, weights, selfWeight, require);
  }

  long build(Call call) {
    return call.own(StarlingNative.java_window_args_new(ranks, weights, selfWeight, requireMutex ? 1 : 0),
        "window arguments");
  }
}
