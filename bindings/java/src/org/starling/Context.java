package org.starling;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.starling.internal.StarlingNative;
import org.starling.internal.status_code;

/**
 * A group of ranks with one progress engine: the entry point of every operation.
 *
 * <p>Collective methods must be called by every rank in the same order. Blocking methods
 * return when the operation is done; {@code ...Nonblocking} methods return a
 * {@link Request} that keeps their tensors alive until it completes. Passing the same
 * Tensor as input and output runs an operation in place. Failures throw
 * {@link StarlingException}; bad Java arguments throw IllegalArgumentException before
 * anything is submitted.
 *
 * <p>The first context initializes MPI and closing the last one finalizes it, after
 * which no context can be created in this process: keep one open for the program's life.
 * {@link #close()} is collective; there is no finalizer.
 */
public final class Context implements AutoCloseable {
  /** Options of {@link #create(Options)} (starling_context_options_t). */
  public static final class Options {
    private boolean useHostComm;
    private long hostComm;
    private int nodesPerMachine;

    /** Use the host's communicator (a Fortran handle); MPI must be initialized with THREAD_MULTIPLE. */
    public Options hostComm(long fortranHandle) {
      useHostComm = true;
      hostComm = fortranHandle;
      return this;
    }

    /** Group consecutive ranks into machines of this many ranks (0: detect). */
    public Options nodesPerMachine(int ranks) {
      nodesPerMachine = ranks;
      return this;
    }
  }

  final long handle;
  private volatile int size;  // changes only through repair(), grow() and shrink()
  private boolean closed;
  final Map<Long, Window> windows = new ConcurrentHashMap<>();

  private Context(long handle) {
    this.handle = handle;
    this.size = size();
  }

  /** A context over MPI_COMM_WORLD. Collective. */
  public static Context create() {
    return create(new Options());
  }

  /** A context with options. Collective. */
  public static Context create(Options options) {
    Check.notNull(options, "options");
    long[] out = new long[1];
    Call.run(c -> StarlingNative.context_create(c.own(StarlingNative.java_context_options_new(
        options.useHostComm ? 1 : 0, options.hostComm, options.nodesPerMachine), "context options"), out));
    return new Context(out[0]);
  }

  @FunctionalInterface
  private interface Query {
    int call(long context, int[] out);
  }

  private int query(Query q) {
    int[] out = new int[1];
    q.call(handle, out);
    return out[0];
  }

  /** This process's rank in the context, 0 to size() - 1. */
  public int rank() {
    return query(StarlingNative::rank);
  }

  /** The number of ranks in the context. */
  public int size() {
    return query(StarlingNative::size);
  }

  /** Rank within this rank's machine. */
  public int localRank() {
    return query(StarlingNative::local_rank);
  }

  /** The number of ranks on this rank's machine. */
  public int localSize() {
    return query(StarlingNative::local_size);
  }

  /** Index of this rank's machine. */
  public int machineRank() {
    return query(StarlingNative::machine_rank);
  }

  /** The number of machines (hosts, or groups of nodes-per-machine ranks). */
  public int machineSize() {
    return query(StarlingNative::machine_size);
  }

  /** Same ranks per machine, numbered contiguously per machine. */
  public boolean isHomogeneous() {
    return query(StarlingNative::is_homogeneous) != 0;
  }

  /** True if this context writes a timeline ({@code STARLING_TIMELINE=<prefix>}). */
  public boolean timelineEnabled() {
    return query(StarlingNative::timeline_enabled) != 0;
  }

  /** Starts a user activity (e.g. "FORWARD") on timeline lane {@code name}; throws if the timeline is off. */
  public void timelineStartActivity(String name, String activity) {
    StarlingNative.timeline_start_activity(handle, name, activity);
  }

  /** Ends the activity started last on lane {@code name} of the timeline. */
  public void timelineEndActivity(String name) {
    StarlingNative.timeline_end_activity(handle, name);
  }

  /** The context's counters since its creation (operations, messages, bytes, fusion). */
  public Stats stats() {
    long[] v = new long[15];
    StarlingNative.get_stats(handle, v);
    return new Stats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], GpuPath.of(v[7]), v[8], v[9], v[10], v[11], v[12],
        v[13], v[14]);
  }

  /** Traffic with rank {@code peer} (0 .. size-1) since creation or the last repair or grow. Local. */
  public PeerStats peerStats(int peer) {
    long[] v = new long[9];
    StarlingNative.get_peer_stats(handle, peer, v);
    return new PeerStats(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
  }

  /**
   * Measures this rank's latency to every other rank and its throughput to it by
   * ping-pong, all ranks at once (collective: every rank calls it alike; size - 1
   * rounds). The figures land in {@link #peerStats(int)}: {@code probeLatencyNanos},
   * {@code probeBytesPerSecond}. repetitions: 1-1000 round trips per peer and kind, the
   * best kept; bulkBytes: 1 byte to 1 GiB, the throughput pings' size.
   */
  public void probePeers(int repetitions, long bulkBytes) {
    // (0 means "the default" in the C call, never here.)
    if (repetitions < 1) throw new IllegalArgumentException("repetitions must be >= 1, got " + repetitions);
    if (bulkBytes < 1) throw new IllegalArgumentException("bulkBytes must be >= 1, got " + bulkBytes);
    StarlingNative.java_probe_peers(handle, repetitions, bulkBytes);
  }

  /** {@link #probePeers(int, long)} with 5 repetitions and 1 MiB pings. */
  public void probePeers() {
    probePeers(5, 1L << 20);
  }

  /**
   * Every rank's probed latency to every rank, in seconds: size x size figures,
   * row-major (row i: rank i's, 0 on the diagonal), the same on every rank; for {@link
   * Schedule#fastPairs}. Collective: {@link #probePeers(int, long)} with 1-byte bulk
   * pings, then an allgather of the rows.
   */
  public double[] linkLatencies(int repetitions) {
    probePeers(repetitions, 1);
    int n = size();
    int me = rank();
    double[] row = new double[n];
    for (int r = 0; r < n; ++r) row[r] = r == me ? 0.0 : peerStats(r).probeLatencyNanos() / 1e9;
    Tensor all = Tensor.allocate(DType.FLOAT64, (long) n * n);
    allgather(Tensor.of(row, n), all, "starling.link_latencies");
    return all.toDoubleArray();
  }

  /** {@link #linkLatencies(int)} with 5 repetitions. */
  public double[] linkLatencies() {
    return linkLatencies(5);
  }

  /**
   * How this context moves CUDA tensors, and why: "none (no CUDA tensor used yet)", or
   * e.g. "staged on cuda:0: ...". Local.
   */
  public String gpuPath() {
    String[] out = new String[1];
    StarlingNative.gpu_path(handle, out);
    return out[0];
  }

  // ---- topology

  /** Sets the graph of neighbor operations (weighted: default to its weights). Collective. */
  public void setTopology(Topology topology, boolean weighted) {
    Check.notNull(topology, "topology");
    StarlingNative.set_topology(handle, topology.handle, weighted ? 1 : 0);
  }

  /** A copy of the context's topology (close it when done). */
  public Topology topology() {
    long[] out = new long[1];
    StarlingNative.get_topology(handle, out, null);
    return new Topology(out[0]);
  }

  /** Whether neighbor operations default to the topology's weights. */
  public boolean isTopologyWeighted() {
    long[] out = new long[1];
    int[] weighted = new int[1];
    StarlingNative.get_topology(handle, out, weighted);
    StarlingNative.topology_free(out[0]);
    return weighted[0] != 0;
  }

  /** Sets the machine graph of hierarchicalNeighborAllreduce. Collective. */
  public void setMachineTopology(Topology topology, boolean weighted) {
    Check.notNull(topology, "topology");
    StarlingNative.set_machine_topology(handle, topology.handle, weighted ? 1 : 0);
  }

  /** A copy of the machine topology, or null if none was set. */
  public Topology machineTopology() {
    long[] out = new long[1];
    StarlingNative.get_machine_topology(handle, out, null);
    return out[0] == 0 ? null : new Topology(out[0]);
  }

  /** This rank's in-neighbors in the context's topology, ascending. */
  public int[] inNeighbors() {
    int[] ranks = new int[size];
    int[] count = new int[1];
    StarlingNative.in_neighbors(handle, ranks, size, count);
    return Arrays.copyOf(ranks, count[0]);
  }

  /** This rank's out-neighbors in the context's topology, ascending. */
  public int[] outNeighbors() {
    int[] ranks = new int[size];
    int[] count = new int[1];
    StarlingNative.out_neighbors(handle, ranks, size, count);
    return Arrays.copyOf(ranks, count[0]);
  }

  // ---- classic collectives (name: a label for diagnostics, may be null)

  /** out = op over all ranks of in. Collective. */
  public void allreduce(Tensor in, Tensor out, ReduceOp op, String name) {
    int code = Check.notNull(op, "op").code();
    Call.run(c -> StarlingNative.allreduce(handle, c.in(in, "in"), c.out(out, "out"), code, name));
  }

  /** {@code out} = {@code op} over every rank's {@code in} (the same tensor: in place). Collective. */
  public void allreduce(Tensor in, Tensor out, ReduceOp op) {
    allreduce(in, out, op, null);
  }

  /** As {@link #allreduce(Tensor, Tensor, ReduceOp)}, labelled {@code name}, returning a request. */
  public Request allreduceNonblocking(Tensor in, Tensor out, ReduceOp op, String name) {
    int code = Check.notNull(op, "op").code();
    return Call.submit(this, (c, r) ->
        StarlingNative.allreduce_nonblocking(handle, c.in(in, "in"), c.out(out, "out"), code, name, r));
  }

  /** As {@link #allreduce(Tensor, Tensor, ReduceOp)}, returning a request. */
  public Request allreduceNonblocking(Tensor in, Tensor out, ReduceOp op) {
    return allreduceNonblocking(in, out, op, null);
  }

  /** Every rank's out = root's in. Collective. */
  public void broadcast(Tensor in, Tensor out, int root, String name) {
    Call.run(c -> StarlingNative.broadcast(handle, c.in(in, "in"), c.out(out, "out"), root, name));
  }

  /** Every rank's {@code out} = {@code root}'s {@code in}. Collective. */
  public void broadcast(Tensor in, Tensor out, int root) {
    broadcast(in, out, root, null);
  }

  /** As {@link #broadcast(Tensor, Tensor, int)}, labelled {@code name}, returning a request. */
  public Request broadcastNonblocking(Tensor in, Tensor out, int root, String name) {
    return Call.submit(this, (c, r) ->
        StarlingNative.broadcast_nonblocking(handle, c.in(in, "in"), c.out(out, "out"), root, name, r));
  }

  /** As {@link #broadcast(Tensor, Tensor, int)}, returning a request. */
  public Request broadcastNonblocking(Tensor in, Tensor out, int root) {
    return broadcastNonblocking(in, out, root, null);
  }

  /**
   * out = this rank's block of op over every rank's in (reduce-scatter). in is cut into
   * size() blocks in rank order: equal ones (counts null; in has size() times out's
   * elements) or counts[r] elements for rank r (the same on every rank). out may be
   * this rank's block of in (in place). Collective.
   */
  public void reduceScatter(Tensor in, Tensor out, long[] counts, ReduceOp op, String name) {
    int code = Check.notNull(op, "op").code();
    checkCounts(counts, "counts");
    Call.run(c -> StarlingNative.java_reduce_scatter(handle, c.in(in, "in"), c.out(out, "out"), counts, code, name));
  }

  /** Reduce-scatter with equal blocks: {@code out} = this rank's block of {@code op} over every rank's {@code in}. Collective. */
  public void reduceScatter(Tensor in, Tensor out, ReduceOp op) {
    reduceScatter(in, out, null, op, null);
  }

  /** As reduce-scatter with per-rank counts (null: equal blocks), returning a request. */
  public Request reduceScatterNonblocking(Tensor in, Tensor out, long[] counts, ReduceOp op, String name) {
    int code = Check.notNull(op, "op").code();
    checkCounts(counts, "counts");
    return Call.submit(this, (c, r) -> StarlingNative.java_reduce_scatter_nonblocking(handle, c.in(in, "in"),
        c.out(out, "out"), counts, code, name, r));
  }

  /**
   * All-to-all (MPI_Alltoall / MPI_Alltoallv): block q of in goes to rank q, block q of
   * out comes from rank q. Equal blocks (both counts null) or sendCounts[q] /
   * recvCounts[q] elements (recvCounts[q] here must equal sendCounts[rank] on rank q).
   * Collective.
   */
  public void alltoall(Tensor in, Tensor out, long[] sendCounts, long[] recvCounts, String name) {
    checkCounts(sendCounts, "sendCounts");
    checkCounts(recvCounts, "recvCounts");
    Call.run(c -> StarlingNative.java_alltoall(handle, c.in(in, "in"), c.out(out, "out"), sendCounts, recvCounts, name));
  }

  /** All-to-all with equal blocks: block q of {@code in} goes to rank q. Collective. */
  public void alltoall(Tensor in, Tensor out) {
    alltoall(in, out, null, null, null);
  }

  /** As all-to-all with per-rank counts (null: equal blocks), returning a request. */
  public Request alltoallNonblocking(Tensor in, Tensor out, long[] sendCounts, long[] recvCounts, String name) {
    checkCounts(sendCounts, "sendCounts");
    checkCounts(recvCounts, "recvCounts");
    return Call.submit(this, (c, r) -> StarlingNative.java_alltoall_nonblocking(handle, c.in(in, "in"),
        c.out(out, "out"), sendCounts, recvCounts, name, r));
  }

  // The C call reads size() entries: a shorter array must never reach it.
  private void checkCounts(long[] counts, String what) {
    if (counts != null && counts.length != size) {
      throw new IllegalArgumentException(what + " has " + counts.length + " entries but the context has " + size
          + " ranks");
    }
  }

  /** {@link #split}'s color for a rank that joins no new context. */
  public static final int SPLIT_UNDEFINED = -1;

  /**
   * A new context over the ranks passing the same color (MPI_Comm_split), ranked by key
   * (ties: by rank here), or null for {@link #SPLIT_UNDEFINED}. Independent of this one
   * (its own engine, default topology, windows); close it like any context. Collective.
   */
  public Context split(int color, int key) {
    return split(color, key, 0);
  }

  /** As split, grouping consecutive ranks of the new context into machines (0: detect). */
  public Context split(int color, int key, int nodesPerMachine) {
    long[] out = new long[1];
    Call.run(c -> StarlingNative.java_context_split(handle, color, key, nodesPerMachine, out));
    return out[0] == 0 ? null : new Context(out[0]);
  }

  /**
   * out = every rank's in concatenated along dimension 0, in rank order (first
   * dimensions may differ). Returns each rank's first dimension. Collective.
   */
  public long[] allgather(Tensor in, Tensor out, String name) {
    long[][] dims = new long[1][];
    Call.run(c -> {
      StarlingNative.allgather(handle, c.in(in, "in"), c.out(out, "out"), c.firstDims(size, size), name);
      dims[0] = c.firstDims();
    });
    return dims[0];
  }

  /** {@code out} = every rank's {@code in} concatenated along dimension 0 in rank order; returns each rank's first dimension. Collective. */
  public long[] allgather(Tensor in, Tensor out) {
    return allgather(in, out, null);
  }

  /**
   * As allgather into a new direct tensor sized by allgatherFirstDims (two collectives).
   * Host tensors only: for a device tensor, allocate the output on its GPU.
   */
  public Tensor allgather(Tensor in) {
    refuseDevice(in);
    long[] dims = allgatherFirstDims(in);
    Tensor out = Tensor.allocate(in.dtype(), gatheredShape(in, dims));
    allgather(in, out, null);
    return out;
  }

  /** Request.firstDims() gives each rank's first dimension. */
  public Request allgatherNonblocking(Tensor in, Tensor out, String name) {
    return Call.submit(this, (c, r) -> StarlingNative.allgather_nonblocking(handle, c.in(in, "in"),
        c.out(out, "out"), c.firstDims(size, size), name, r));
  }

  /** As {@link #allgather(Tensor, Tensor)}, returning a request ({@link Request#firstDims()} gives the first dimensions). */
  public Request allgatherNonblocking(Tensor in, Tensor out) {
    return allgatherNonblocking(in, out, null);
  }

  /** Each rank's first dimension of in (checks that the rest of the shape agrees). Collective. */
  public long[] allgatherFirstDims(Tensor in) {
    long[][] dims = new long[1][];
    Call.run(c -> {
      StarlingNative.allgather_first_dims(handle, c.in(in, "in"), c.firstDims(size, size), null);
      dims[0] = c.firstDims();
    });
    return dims[0];
  }

  /** Nonblocking exchange of every rank's first dimension ({@link Request#firstDims()}). */
  public Request allgatherFirstDimsNonblocking(Tensor in) {
    return Call.submit(this, (c, r) ->
        StarlingNative.allgather_first_dims_nonblocking(handle, c.in(in, "in"), c.firstDims(size, size), null, r));
  }

  /** Returns once every rank has entered it. Collective. */
  public void barrier() {
    StarlingNative.barrier(handle);
  }

  /** A barrier whose request completes once every rank has entered it. */
  public Request barrierNonblocking() {
    return Call.submit(this, (c, r) -> StarlingNative.barrier_nonblocking(handle, r));
  }

  /** Allreduce among this machine's ranks only. Collective over the context. */
  public void localAllreduce(Tensor in, Tensor out, ReduceOp op, String name) {
    int code = Check.notNull(op, "op").code();
    Call.run(c -> StarlingNative.local_allreduce(handle, c.in(in, "in"), c.out(out, "out"), code, name));
  }

  /** As the local (within-machine) allreduce, returning a request. */
  public Request localAllreduceNonblocking(Tensor in, Tensor out, ReduceOp op, String name) {
    int code = Check.notNull(op, "op").code();
    return Call.submit(this, (c, r) ->
        StarlingNative.local_allreduce_nonblocking(handle, c.in(in, "in"), c.out(out, "out"), code, name, r));
  }

  /** out = selfWeight * in + pairWeight * peer's in; only this rank and peer call it. */
  public void pairGossip(Tensor in, Tensor out, int peer, double selfWeight, double pairWeight, String name) {
    Call.run(c -> StarlingNative.pair_gossip(handle, c.in(in, "in"), c.out(out, "out"), peer, selfWeight,
        pairWeight, name));
  }

  /** As pair gossip with {@code peer}, returning a request. */
  public Request pairGossipNonblocking(Tensor in, Tensor out, int peer, double selfWeight, double pairWeight,
      String name) {
    return Call.submit(this, (c, r) -> StarlingNative.pair_gossip_nonblocking(handle, c.in(in, "in"),
        c.out(out, "out"), peer, selfWeight, pairWeight, name, r));
  }

  // ---- compressed communication (README "Compressed communication")

  /** allreduce (SUM or AVERAGE) of compressed tensors; name keys the error-feedback state. Collective. */
  public void allreduceCompressed(Tensor in, Tensor out, ReduceOp op, String name, Compression compression) {
    Check.notNull(compression, "compression");
    int code = Check.notNull(op, "op").code();
    Call.run(c -> StarlingNative.allreduce_compressed(handle, c.in(in, "in"), c.out(out, "out"), code, name,
        compression.build(c)));
  }

  /** CHOCO gossip over the static topology; args must carry a name. Collective. */
  public void neighborAllreduceCompressed(Tensor in, Tensor out, NeighborArgs args, Compression compression) {
    Check.notNull(args, "args");
    Check.notNull(compression, "compression");
    Call.run(c -> StarlingNative.neighbor_allreduce_compressed(handle, c.in(in, "in"), c.out(out, "out"),
        args.build(c), compression.build(c)));
  }

  /** Drops the compression state kept under name (null: every name). Call it on every rank alike. */
  public void compressionReset(String name) {
    Call.run(c -> StarlingNative.compression_reset(handle, name));
  }

  // ---- neighbor collectives

  /** out = self_weight * in + sum over sources of w_j * in_j (see NeighborArgs). Collective. */
  public void neighborAllreduce(Tensor in, Tensor out, NeighborArgs args) {
    Check.notNull(args, "args");
    Call.run(c -> StarlingNative.neighbor_allreduce(handle, c.in(in, "in"), c.out(out, "out"), args.build(c)));
  }

  /** With the topology's default weights. */
  public void neighborAllreduce(Tensor in, Tensor out) {
    neighborAllreduce(in, out, NeighborArgs.defaults());
  }

  /** As {@link #neighborAllreduce(Tensor, Tensor, NeighborArgs)}, returning a request. */
  public Request neighborAllreduceNonblocking(Tensor in, Tensor out, NeighborArgs args) {
    Check.notNull(args, "args");
    return Call.submit(this, (c, r) -> StarlingNative.neighbor_allreduce_nonblocking(handle, c.in(in, "in"),
        c.out(out, "out"), args.build(c), r));
  }

  /** As {@link #neighborAllreduce(Tensor, Tensor)}, returning a request. */
  public Request neighborAllreduceNonblocking(Tensor in, Tensor out) {
    return neighborAllreduceNonblocking(in, out, NeighborArgs.defaults());
  }

  /**
   * out = the sources' tensors along dimension 0, in source order (static: in-neighbors
   * ascending; dynamic: sourceRanks as given). Returns their first dimensions. Collective.
   */
  public long[] neighborAllgather(Tensor in, Tensor out, NeighborArgs args) {
    Check.notNull(args, "args");
    int sources = sourceCount(args);
    long[][] dims = new long[1][];
    Call.run(c -> {
      StarlingNative.neighbor_allgather(handle, c.in(in, "in"), c.out(out, "out"), c.firstDims(size, sources),
          args.build(c));
      dims[0] = c.firstDims();
    });
    return dims[0];
  }

  /** As neighborAllgather into a new direct tensor (two collectives). Host tensors only. */
  public Tensor neighborAllgather(Tensor in, NeighborArgs args) {
    refuseDevice(in);
    long[] dims = neighborAllgatherFirstDims(in, args);
    Tensor out = Tensor.allocate(in.dtype(), gatheredShape(in, dims));
    neighborAllgather(in, out, args);
    return out;
  }

  /** Request.firstDims() gives the sources' first dimensions. */
  public Request neighborAllgatherNonblocking(Tensor in, Tensor out, NeighborArgs args) {
    Check.notNull(args, "args");
    int sources = sourceCount(args);
    return Call.submit(this, (c, r) -> StarlingNative.neighbor_allgather_nonblocking(handle, c.in(in, "in"),
        c.out(out, "out"), c.firstDims(size, sources), args.build(c), r));
  }

  /** The sources' first dimensions, in source order. Collective. */
  public long[] neighborAllgatherFirstDims(Tensor in, NeighborArgs args) {
    Check.notNull(args, "args");
    int sources = sourceCount(args);
    long[][] dims = new long[1][];
    Call.run(c -> {
      StarlingNative.neighbor_allgather_first_dims(handle, c.in(in, "in"), c.firstDims(size, sources),
          args.build(c));
      dims[0] = c.firstDims();
    });
    return dims[0];
  }

  /** Average inside machines, neighbor allreduce between them (args name machines). Collective. */
  public void hierarchicalNeighborAllreduce(Tensor in, Tensor out, NeighborArgs args) {
    Check.notNull(args, "args");
    Call.run(c -> StarlingNative.hierarchical_neighbor_allreduce(handle, c.in(in, "in"), c.out(out, "out"),
        args.build(c)));
  }

  /** As {@link #hierarchicalNeighborAllreduce(Tensor, Tensor, NeighborArgs)}, returning a request. */
  public Request hierarchicalNeighborAllreduceNonblocking(Tensor in, Tensor out, NeighborArgs args) {
    Check.notNull(args, "args");
    return Call.submit(this, (c, r) -> StarlingNative.hierarchical_neighbor_allreduce_nonblocking(handle,
        c.in(in, "in"), c.out(out, "out"), args.build(c), r));
  }

  /** Sources of a neighbor operation: dynamic, as listed; static, every in-neighbor. */
  private int sourceCount(NeighborArgs args) {
    return args.isDynamic() ? args.sourceRanks().length : inNeighbors().length;
  }

  /** The allocating forms make host tensors, which cannot hold a device tensor's result. */
  private static void refuseDevice(Tensor in) {
    if (Check.notNull(in, "in").isOnDevice()) {
      throw new IllegalArgumentException("in is a CUDA tensor but this form allocates the result in host memory:"
          + " allocate the output on the GPU and pass it (the form with an out tensor)");
    }
  }

  private static long[] gatheredShape(Tensor in, long[] firstDims) {
    long[] shape = in.shape();
    shape[0] = Arrays.stream(firstDims).sum();
    return shape;
  }

  // ---- windows

  /**
   * Creates window {@code name} over {@code tensor}, which must be direct or device
   * memory (every rank's, or none's): the window reads and writes its memory until it is
   * closed. Collective.
   */
  public Window createWindow(Tensor tensor, String name, boolean zeroInit) {
    Check.notNull(tensor, "tensor");
    Check.notNull(name, "name");
    if (!tensor.isDirect() && !tensor.isOnDevice()) {
      throw new IllegalArgumentException("a window needs a direct tensor (Tensor.allocate or a direct"
          + " ByteBuffer) or device memory: it reads and writes that memory until it is closed");
    }
    Call call = new Call(); // the window borrows the descriptor until it is freed
    long[] out = new long[1];
    try {
      StarlingNative.window_create(handle, call.out(tensor, "tensor"), name, zeroInit ? 1 : 0, out);
    } catch (RuntimeException e) {
      call.close();
      throw e;
    }
    Window window = new Window(this, out[0], name, tensor, call);
    windows.put(out[0], window);
    return window;
  }

  /** The open window called {@code name}; StarlingException (NOT_FOUND) if none. */
  public Window window(String name) {
    Check.notNull(name, "name");
    long[] out = new long[1];
    StarlingNative.window_lookup(handle, name, out);
    Window window = windows.get(out[0]);
    if (window == null) throw new IllegalStateException("window " + name + " was not created through this Context");
    return window;
  }

  /** Names of the open windows, sorted. */
  public List<String> windowNames() {
    byte[] text = new byte[256];
    long[] length = new long[1];
    while (true) {
      try {
        StarlingNative.window_names(handle, text, length);
        break;
      } catch (StarlingException e) {
        // Too small: length holds the size needed (names may change meanwhile: retry).
        if (e.code() != status_code.ERR_INVALID_ARGUMENT || length[0] < text.length) throw e;
        text = new byte[Math.toIntExact(length[0] + 1)];
      }
    }
    String all = new String(text, 0, (int) length[0], StandardCharsets.UTF_8);
    return all.isEmpty() ? new ArrayList<>() : new ArrayList<>(Arrays.asList(all.split("\n")));
  }

  /** Push-sum: windows carry the associated scalar p. */
  public void setWindowAssociatedPEnabled(boolean enabled) {
    StarlingNative.set_window_associated_p_enabled(handle, enabled ? 1 : 0);
  }

  // ---- surviving failures (Open MPI 5 with ULFM)

  /**
   * True when this context survives the death of a rank: Open MPI 5 with ULFM, in a job
   * started with {@code mpirun --with-ft ulfm} or {@code starlingrun --fault-tolerant}.
   * Then a dead rank makes every survivor's pending and later calls throw
   * {@link PeerFailedException}, and {@link #repair()} lets them go on.
   */
  public boolean faultTolerant() {
    return query(StarlingNative::fault_tolerant) != 0;
  }

  /**
   * After a {@link PeerFailedException}: makes the context usable again over the
   * survivors (starling_context_repair). Collective over every live rank; no other call
   * on the context may run meanwhile. The ranks are renumbered in their old order
   * ({@link RepairResult#oldToNew()}), the topology becomes the same generator over the
   * new size (or the induced subgraph), windows stay valid and lose the dead ranks'
   * buffers. Also valid with no failure (nothing is dropped). Throws StarlingException:
   * UNSUPPORTED without ULFM (the message says what is needed); PeerFailedException if a
   * rank died during the repair (call it again).
   */
  public RepairResult repair() {
    return repairWith(0, false);
  }

  /**
   * As {@link #repair()}, installing {@code topology} (its size must be the number of
   * survivors, known from the exception's failed ranks; INVALID_ARGUMENT otherwise, and the
   * context stays failed: call repair again) with or without its weights.
   */
  public RepairResult repair(Topology topology, boolean weighted) {
    return repairWith(Check.notNull(topology, "topology").handle, weighted);
  }

  private RepairResult repairWith(long topology, boolean weighted) {
    int capacity = size;
    int[] info = new int[5];
    int[] oldToNew = new int[capacity];
    int[] failed = new int[capacity];
    StarlingNative.java_context_repair(handle, topology, weighted ? 1 : 0, info, oldToNew, capacity, failed, capacity);
    size = info[3];
    return new RepairResult(info[0], info[1], info[2], info[3], Arrays.copyOf(oldToNew, info[1]),
        Arrays.copyOf(failed, info[4]));
  }

  /**
   * Grows the context by {@code count} new processes running this JVM's own command line
   * (starling_context_grow; Open MPI 5 with ULFM). Collective over the current ranks; no
   * other call on the context may run meanwhile, and no window may exist (free them
   * before, create them again after, the newcomers taking part). {@code ranks}: the rank
   * of each new process in the grown context (e.g. {@code {1}}: the place of a rank 1 that
   * died and was repaired away); null: after the current ranks. The topology becomes the
   * current generator over the new size. A new process joins inside its own
   * {@link #create()}, where {@link #joined()} is then true. Throws StarlingException:
   * UNSUPPORTED without ULFM, INVALID_ARGUMENT for bad counts or ranks (on every rank),
   * INVALID_USAGE while windows exist or after an unrepaired failure.
   */
  public GrowResult grow(int count, int[] ranks) {
    return growWith(count, ranks, 0, false);
  }

  /** As {@link #grow(int, int[])}, installing {@code topology} (over the grown size). */
  public GrowResult grow(int count, int[] ranks, Topology topology, boolean weighted) {
    return growWith(count, ranks, Check.notNull(topology, "topology").handle, weighted);
  }

  private GrowResult growWith(int count, int[] ranks, long topology, boolean weighted) {
    if (count < 1) throw new IllegalArgumentException("count must be >= 1, got " + count);
    if (ranks != null && ranks.length != count) {
      throw new IllegalArgumentException("ranks must have count (" + count + ") entries, got " + ranks.length);
    }
    int oldSize = size;
    int[] info = new int[4];
    int[] oldToNew = new int[oldSize];
    int[] joinedRanks = new int[count];
    StarlingNative.java_context_grow(handle, count, ranks, topology, weighted ? 1 : 0, info, oldToNew, oldSize,
        joinedRanks, count);
    size = info[3];
    return new GrowResult(info[0], info[1], info[2], info[3], oldToNew, joinedRanks);
  }

  /**
   * Shrinks the context: {@code count} ranks leave it (starling_context_shrink; Open MPI 5
   * with ULFM), those of {@code ranks} (null: the last {@code count}). Collective over the
   * current ranks; no window may exist. The ranks that stay are renumbered in their order
   * and get the current generator over the new size (or the subgraph they induce). On a
   * rank that leaves, the result's {@link ShrinkResult#leftThisRank()} is true and the
   * context is left: every later call throws INVALID_USAGE, {@link #close()} is local,
   * and the process should exit (MPI is not finalized). Throws StarlingException:
   * UNSUPPORTED without ULFM, INVALID_ARGUMENT for bad counts or ranks (on every rank),
   * INVALID_USAGE while windows exist or after an unrepaired failure.
   */
  public ShrinkResult shrink(int count, int[] ranks) {
    return shrinkWith(count, ranks, 0, false);
  }

  /** As {@link #shrink(int, int[])}, installing {@code topology} (over the ranks that stay). */
  public ShrinkResult shrink(int count, int[] ranks, Topology topology, boolean weighted) {
    return shrinkWith(count, ranks, Check.notNull(topology, "topology").handle, weighted);
  }

  /**
   * Resizes the context to {@code newSize} ranks: a {@link #shrink(int, int[])} of the last
   * ranks when smaller, a {@link #grow(int, int[])} at the end when larger (both
   * collective); the same size changes nothing and returns null.
   */
  public Renumbering resize(int newSize) {
    if (newSize < 1) throw new IllegalArgumentException("newSize must be >= 1, got " + newSize);
    if (newSize < size) return shrink(size - newSize, null);
    if (newSize > size) return grow(newSize - size, null);
    return null;
  }

  private ShrinkResult shrinkWith(int count, int[] ranks, long topology, boolean weighted) {
    if (ranks != null && ranks.length != count) {
      throw new IllegalArgumentException("ranks must have count (" + count + ") entries, got " + ranks.length);
    }
    int oldSize = size;
    int[] info = new int[4];
    int[] oldToNew = new int[oldSize];
    int[] leftRanks = new int[Math.max(0, Math.min(count, oldSize))];
    StarlingNative.java_context_shrink(handle, count, ranks, topology, weighted ? 1 : 0, info, oldToNew, oldSize,
        leftRanks, leftRanks.length);
    if (info[2] >= 0) size = info[3];
    return new ShrinkResult(info[0], info[1], info[2], info[3], oldToNew, leftRanks);
  }

  /** True when this process entered the context through a {@link #grow} of a running job. */
  public boolean joined() {
    return query(StarlingNative::joined) != 0;
  }

  /**
   * Aborts the context, like NCCL's ncclCommAbort (starling_context_abort). Callable from
   * any thread at any time, also while other threads are blocked in calls on this
   * context: every operation in flight or queued fails within milliseconds with a
   * StarlingException of status {@link Status#ABORTED} (blocking calls throw it, requests'
   * wait throws it), and so does every later call. Local: peers are not told. Then call
   * {@link #close()}, which is local too (it never waits for peers). Idempotent; after
   * close it throws (INVALID_HANDLE).
   */
  public void abort() {
    StarlingNative.context_abort(handle);
  }

  /**
   * Leaves the job now, without the other ranks (starling_context_abandon), and closes
   * this context: they are told, and their pending and later operations that wait for
   * this rank throw PeerFailedException naming it and {@code reason} (what follows "rank
   * N ", e.g. "is exiting: out of memory"). Local: no collective, MPI is not finalized
   * (the process should exit). A JVM that exits with the context still open does this
   * by itself ("exited (status N) without destroying its context").
   */
  public synchronized void abandon(String reason) {
    if (closed) return;
    closed = true;
    try {
      StarlingNative.context_abandon(handle, reason);
    } finally {
      Request.releaseAll(this);
      windows.clear();
    }
  }

  /**
   * Destroys the context (collective). Operations already submitted finish first; later
   * calls throw StarlingException (INVALID_HANDLE). Idempotent. After {@link #abort()} or a
   * PEER_FAILED error it is local: it never waits for peers.
   */
  @Override
  public synchronized void close() {
    if (closed) return;
    closed = true;
    try {
      StarlingNative.context_destroy(handle);
    } finally {
      Request.releaseAll(this);
      windows.clear();
    }
  }
}
