package org.starling;

import java.util.Arrays;

/** What {@link Context#grow(int, int[])} did (starling_grow_result_t); newSize() is old size + count. */
public final class GrowResult extends Renumbering {
  private final int[] joinedRanks;

  GrowResult(int oldRank, int oldSize, int newRank, int newSize, int[] oldToNew, int[] joinedRanks) {
    super(oldRank, oldSize, newRank, newSize, oldToNew);
    this.joinedRanks = joinedRanks;
  }

  /** The new processes' ranks, in the order they were started. */
  public int[] joinedRanks() {
    return Arrays.copyOf(joinedRanks, joinedRanks.length);
  }

  @Override
  public String toString() {
    return describe("GrowResult", "joined " + Arrays.toString(joinedRanks));
  }
}
