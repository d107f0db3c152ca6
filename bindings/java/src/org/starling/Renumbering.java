package org.starling;

import java.util.Arrays;

/** What a repair, a grow or a shrink did to this context's ranks: the part their results share. */
public abstract class Renumbering {
  private final int oldRank;
  private final int oldSize;
  private final int newRank;
  private final int newSize;
  private final int[] oldToNew;

  Renumbering(int oldRank, int oldSize, int newRank, int newSize, int[] oldToNew) {
    this.oldRank = oldRank;
    this.oldSize = oldSize;
    this.newRank = newRank;
    this.newSize = newSize;
    this.oldToNew = oldToNew;
  }

  /** This rank before. */
  public int oldRank() {
    return oldRank;
  }

  /** The context's size before. */
  public int oldSize() {
    return oldSize;
  }

  /** This rank now. */
  public int newRank() {
    return newRank;
  }

  /** The context's size now. */
  public int newSize() {
    return newSize;
  }

  /** oldToNew()[r]: old rank r's new rank (-1 for a rank a repair dropped or that left in a shrink); length oldSize(). */
  public int[] oldToNew() {
    return Arrays.copyOf(oldToNew, oldToNew.length);
  }

  String describe(String name, String extra) {
    return name + "[rank " + oldRank + " -> " + newRank + ", size " + oldSize + " -> " + newSize + ", " + extra
        + ", oldToNew " + Arrays.toString(oldToNew) + "]";
  }
}
