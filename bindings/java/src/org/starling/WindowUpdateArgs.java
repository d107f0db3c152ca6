package org.starling;

import org.starling.internal.StarlingNative;

/**
 * Weights of Window.update (starling_window_update_args_t). Immutable. defaults(): the
 * topology's weights if it is weighted, else the uniform average of the tensor and every
 * in-neighbor buffer.
 */
public final class WindowUpdateArgs {
  private final boolean useWeights;
  private final double selfWeight;
  private final int[] ranks;
  private final double[] weights;
  private final boolean reset;
  private final boolean requireMutex;

  private WindowUpdateArgs(boolean useWeights, double selfWeight, int[] ranks, double[] weights, boolean reset,
      boolean requireMutex) {
    Check.sameLength(ranks, weights, "ranks", "weights");
    this.useWeights = useWeights;
    this.selfWeight = selfWeight;
    this.ranks = ranks == null ? null : ranks.clone();
    this.weights = weights == null ? null : weights.clone();
    this.reset = reset;
    this.requireMutex = requireMutex;
  }

  /** The topology's weights (or the uniform average), no reset, no mutex. */
  public static WindowUpdateArgs defaults() {
    return new WindowUpdateArgs(false, 0, null, null, false, false);
  }

  /** tensor = selfWeight * tensor + sum of weights[k] * buffer of ranks[k] (others left out). */
  public static WindowUpdateArgs weighted(double selfWeight, int[] ranks, double[] weights) {
    Check.notNull(ranks, "ranks");
    Check.notNull(weights, "weights");
    return new WindowUpdateArgs(true, selfWeight, ranks, weights, false, false);
  }

  /** Zero the buffers used (and their p) afterwards. */
  public WindowUpdateArgs withReset(boolean zero) {
    return new WindowUpdateArgs(useWeights, selfWeight, ranks, weights, zero, requireMutex);
  }

  /** Hold this rank's mutexes for those buffers meanwhile. */
  public WindowUpdateArgs withRequireMutex(boolean require) {
    return new WindowUpdateArgs(useWeights, selfWeight, ranks, weights, reset, require);
  }

  long build(Call call) {
    return call.own(StarlingNative.java_window_update_args_new(useWeights ? 1 : 0, selfWeight, ranks, weights,
        reset ? 1 : 0, requireMutex ? 1 : 0), "window update arguments");
  }
}
