package org.starling;

import java.lang.ref.Cleaner;
import java.util.Arrays;
import org.starling.internal.StarlingNative;

/**
 * A dynamic schedule: per step, the ranks (or machines) this rank sends to and receives
 * from (BlueFog's Get*SendRecvRanks). Every rank advances its own schedule once per step.
 */
public final class Schedule implements AutoCloseable {
  /** One step: where this rank sends and where it receives from. */
  public record Step(int[] sendRanks, int[] recvRanks) {}

  @FunctionalInterface
  private interface Maker {
    void make(long[] out);
  }

  private final long handle;
  private final int capacity; // no step names more peers than there are ranks
  private final Cleaner.Cleanable cleanable;

  private Schedule(long handle, int capacity) {
    this.handle = handle;
    this.capacity = Math.max(capacity, 1);
    this.cleanable = LocalHandle.register(this, handle, StarlingNative::schedule_free);
  }

  private static Schedule make(int capacity, Maker maker) {
    long[] out = new long[1];
    maker.make(out);
    return new Schedule(out[0], capacity);
  }

  /** One peer per step, cycling through {@code topology}'s out-neighbors of {@code rank}. */
  public static Schedule dynamicOnePeer(Topology topology, int rank) {
    Check.notNull(topology, "topology");
    return make(topology.size(), out -> StarlingNative.schedule_dynamic_one_peer(topology.handle, rank, out));
  }

  /** Machine ids: machine m sends to m + 2^k and receives from m - 2^k. */
  public static Schedule exp2Machine(int worldSize, int localSize, int rank, int localRank) {
    return make(worldSize, out -> StarlingNative.schedule_exp2_machine(worldSize, localSize, rank, localRank, out));
  }

  /** One rank per machine talks along the machine ring, the others inside their machine. */
  public static Schedule innerOuterRing(int worldSize, int localSize, int rank) {
    return make(worldSize, out -> StarlingNative.schedule_inner_outer_ring(worldSize, localSize, rank, out));
  }

  /** As innerOuterRing, with exponential-2 distances. */
  public static Schedule innerOuterExpo2(int worldSize, int localSize, int rank) {
    return make(worldSize, out -> StarlingNative.schedule_inner_outer_expo2(worldSize, localSize, rank, out));
  }

  /**
   * Pairwise averaging over fast links: step t pairs the ranks as round t of a round-robin
   * tournament; a pair whose link takes longer than {@code thresholdSeconds} (either
   * direction) sits the step out. Each step is ([peer], [peer]) or ([], []): average with
   * 1/2 each (1 alone) and every step's mixing matrix is doubly stochastic.
   *
   * @param linkSeconds worldSize x worldSize figures, row-major: row i is rank i's time to
   *     each rank ({@link Context#linkLatencies()}), the same on every rank
   * @throws StarlingException INVALID_ARGUMENT when the fast links leave the job split
   */
  public static Schedule fastPairs(int worldSize, int rank, double[] linkSeconds, double thresholdSeconds) {
    Check.notNull(linkSeconds, "linkSeconds");
    return make(worldSize, out -> StarlingNative.schedule_fast_pairs(worldSize, rank, linkSeconds, thresholdSeconds, out));
  }

  /** The next step's peers; advances the schedule. */
  public Step next() {
    int[] send = new int[capacity];
    int[] recv = new int[capacity];
    int[] sendCount = new int[1];
    int[] recvCount = new int[1];
    StarlingNative.schedule_next(handle, send, capacity, sendCount, recv, capacity, recvCount);
    return new Step(Arrays.copyOf(send, sendCount[0]), Arrays.copyOf(recv, recvCount[0]));
  }

  /** Frees the schedule (local). Idempotent. */
  @Override
  public void close() {
    cleanable.clean();
  }
}
