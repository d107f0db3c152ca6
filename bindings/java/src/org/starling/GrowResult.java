package org.starling;

import java.util.Arrays;

/** What {@link Context#grow(int, int[])} did (starling_grow_result_t). */
public final class GrowResult {
  private final int oldRank;
  private final int oldSize;
  private final int newRank;
  private final int newSize;
  private final int[] oldToNew;
  private final int[] joinedRanks;

  GrowResult(int oldRank, int oldSize, int newRank, int newSize, int[] oldToNew, int[] joinedRanks) {
    this.oldRank = oldRank;
    this.oldSize = oldSize;
    this.newRank = newRank;
    this.newSize = newSize;
    this.oldToNew = oldToNew;
    this.joinedRanks = joinedRanks;
  }

  /** This rank before the grow. */
  public int oldRank() {
    return oldRank;
  }

  /** The context's size before the grow. */
  public int oldSize() {
    return oldSize;
  }

  /** This rank now. */
  public int newRank() {
    return newRank;
  }

  /** The grown size (old size + count). */
  public int newSize() {
    return newSize;
  }

  /** oldToNew()[r]: old rank r's rank in the grown context (length oldSize()). */
  public int[] oldToNew() {
    return Arrays.copyOf(oldToNew, oldToNew.length);
  }

  /** The new processes' ranks, in the order they were started. */
  public int[] joinedRanks() {
    return Arrays.copyOf(joinedRanks, joinedRanks.length);
  }

  @Override
  public String toString() {
    return "GrowResult[rank " + oldRank + " -> " + newRank + ", size " + oldSize + " -> " + newSize + ", joined "
        + Arrays.toString(joinedRanks) + ", oldToNew " + Arrays.toString(oldToNew) + "]";
  }
}
