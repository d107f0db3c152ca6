package org.starling;

import java.util.Arrays;

/** What {@link Context#repair()} did (starling_repair_result_t). */
public final class RepairResult {
  private final int oldRank;
  private final int oldSize;
  private final int newRank;
  private final int newSize;
  private final int[] oldToNew;
  private final int[] failedRanks;

  RepairResult(int oldRank, int oldSize, int newRank, int newSize, int[] oldToNew, int[] failedRanks) {
    this.oldRank = oldRank;
    this.oldSize = oldSize;
    this.newRank = newRank;
    this.newSize = newSize;
    this.oldToNew = oldToNew;
    this.failedRanks = failedRanks;
  }

  /** This rank before the repair. */
  public int oldRank() {
    return oldRank;
  }

  /** The context's size before the repair. */
  public int oldSize() {
    return oldSize;
  }

  /** This rank now. */
  public int newRank() {
    return newRank;
  }

  /** The number of survivors. */
  public int newSize() {
    return newSize;
  }

  /** oldToNew()[r]: old rank r's new rank, -1 for a dropped rank (length oldSize()). */
  public int[] oldToNew() {
    return Arrays.copyOf(oldToNew, oldToNew.length);
  }

  /** The dropped ranks, ascending, old numbering. */
  public int[] failedRanks() {
    return Arrays.copyOf(failedRanks, failedRanks.length);
  }

  @Override
  public String toString() {
    return "RepairResult[rank " + oldRank + " -> " + newRank + ", size " + oldSize + " -> " + newSize + ", failed "
        + Arrays.toString(failedRanks) + ", oldToNew " + Arrays.toString(oldToNew) + "]";
  }
}
