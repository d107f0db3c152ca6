package org.starling;

import java.util.Arrays;

/**
 * What {@link Context#shrink(int, int[])} did (starling_shrink_result_t); newSize() is old
 * size - count, and newRank() is -1 on a rank that left.
 */
public final class ShrinkResult extends Renumbering {
  private final int[] leftRanks;

  ShrinkResult(int oldRank, int oldSize, int newRank, int newSize, int[] oldToNew, int[] leftRanks) {
    super(oldRank, oldSize, newRank, newSize, oldToNew);
    this.leftRanks = leftRanks;
  }

  /** The ranks that left, ascending (old numbering). */
  public int[] leftRanks() {
    return Arrays.copyOf(leftRanks, leftRanks.length);
  }

  /** True on a rank that left: its context takes part in nothing more; close it and exit. */
  public boolean leftThisRank() {
    return newRank() < 0;
  }

  @Override
  public String toString() {
    return describe("ShrinkResult", "left " + Arrays.toString(leftRanks));
  }
}
