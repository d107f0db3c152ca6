package org.starling;

import java.util.Arrays;

/** What {@link Context#repair()} did (starling_repair_result_t); newSize() is the number of survivors. */
public final class RepairResult extends Renumbering {
  private final int[] failedRanks;

  RepairResult(int oldRank, int oldSize, int newRank, int newSize, int[] oldToNew, int[] failedRanks) {
    super(oldRank, oldSize, newRank, newSize, oldToNew);
    this.failedRanks = failedRanks;
  }

  /** The dropped ranks, ascending, old numbering. */
  public int[] failedRanks() {
    return Arrays.copyOf(failedRanks, failedRanks.length);
  }

  @Override
  public String toString() {
    return describe("RepairResult", "failed " + Arrays.toString(failedRanks));
  }
}
