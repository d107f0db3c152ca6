"""Contexts: a group of ranks with one progress engine, and every operation on it."""

import atexit
import contextlib
import sys
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _core
from ._args import rank_weights, weights_dict
from ._tensors import adapter_of, output_like
from .compression import Compression, as_args as _compression_args
from .errors import InvalidArgumentError
from .request import Request
from .topology import Topology
from .window import Window

# The compiled SWIG module: the blocking allreduce skips _core's forwarding functions.
_c = getattr(_core, "__core")

Tensor = Any  # any object with __dlpack__ (NumPy array, PyTorch tensor, ...)
Weights = Mapping[int, float]

_REDUCE_OPS = {"sum": _core.STARLING_SUM, "average": _core.STARLING_AVERAGE, "mean": _core.STARLING_AVERAGE,
               "min": _core.STARLING_MIN, "max": _core.STARLING_MAX}

# Open contexts, closed in reverse order of creation at exit. Closing is collective, so
# it is never left to the garbage collector, whose timing differs between ranks.
_open_contexts: List["Context"] = []

# Why this process is leaving abnormally ("uncaught RuntimeError: ..."), set by the
# excepthook below; then the contexts are abandoned at exit instead of closed: closing
# is collective, and the other ranks, still computing, would never join it.
_exit_reason: Optional[str] = None
_hook_installed = False


def _install_excepthook() -> None:
    """Chains onto sys.excepthook (the user's or Python's, which still prints the
    traceback first) to note an uncaught exception. Nothing else changes."""
    global _hook_installed
    if _hook_installed:
        return
    _hook_installed = True
    previous = sys.excepthook

    def _starling_excepthook(kind: Any, value: Any, traceback: Any) -> None:
        global _exit_reason
        try:
            previous(kind, value, traceback)
        finally:
            text = str(value).strip().splitlines()
            _exit_reason = f"uncaught {kind.__name__}" + (f": {text[0][:300]}" if text else "")

    sys.excepthook = _starling_excepthook


def exit_reason() -> Optional[str]:
    """What ends this process abnormally (an uncaught exception), or None."""
    return _exit_reason


def _reduce_op(op: str) -> int:
    try:
        return _REDUCE_OPS[op]
    except (KeyError, TypeError):
        raise ValueError(f"op must be one of {', '.join(_REDUCE_OPS)}; got {op!r}") from None


def neighbor_mode(self_weight: Optional[float], src_weights: Optional[Weights], dst_weights: Any,
                  src_name: str = "src_weights", dst_name: str = "dst_weights") -> Tuple[int, float, Any, int, Any]:
    """(use_weights, self_weight, sources, dynamic, destinations) for the C helpers.

    Static mode (dst_weights None): the topology's neighbors, with its default weights
    or with self_weight and src_weights (both or neither). Dynamic mode: this call's
    own graph; self_weight and src_weights are then required."""
    if dst_weights is None:
        if (self_weight is None) != (src_weights is None):
            raise ValueError(f"self_weight and {src_name} go together: give both or neither")
        if self_weight is None:
            return 0, 0.0, None, 0, None
        return 1, float(self_weight), weights_dict(src_weights, src_name), 0, None
    if self_weight is None or src_weights is None:
        raise ValueError(f"with {dst_name} (dynamic mode) give self_weight and {src_name} too")
    return 1, float(self_weight), weights_dict(src_weights, src_name), 1, rank_weights(dst_weights, dst_name)


def _host_comm(comm: Any) -> int:
    """The Fortran handle of an mpi4py communicator (or an int handle as is)."""
    if hasattr(comm, "py2f"):
        return int(comm.py2f())
    if isinstance(comm, int) and not isinstance(comm, bool):
        return comm
    raise TypeError(f"comm must be an mpi4py communicator or a Fortran handle (int), got {type(comm).__name__}")


class Context:
    """A group of ranks with its own progress engine.

    ``Context()`` uses MPI_COMM_WORLD (initializing MPI if nobody has); ``Context(comm)``
    runs on an mpi4py communicator, leaving MPI to its owner. ``nodes_per_machine``
    groups consecutive ranks into simulated machines (0: STARLING_NODES_PER_MACHINE,
    else detect machines by shared memory).

    Creating and closing a context are collective. Keep one context for the program's
    lifetime: MPI cannot be initialized again once Starling finalized it (when the last
    context it started MPI for is closed). Open contexts are closed at exit.

    Every operation takes tensors of any framework that exports DLPack (NumPy arrays,
    PyTorch tensors, CuPy arrays, ...) in CPU or CUDA memory, and returns results of the
    same type on the same device. CUDA tensors are ordered against their framework's
    current stream (see :attr:`gpu_path` for how they move). Each has
    an out-of-place form (the result is a new tensor), an in-place form (``out=x``), and
    a ``*_nonblocking`` form returning a :class:`~starling.Request`. Collective
    operations must be called by every rank in the same order.
    """

    def __init__(self, comm: Any = None, *, nodes_per_machine: int = 0) -> None:
        host = 0 if comm is None else _host_comm(comm)
        self._handle = _core.py_context_create(0 if comm is None else 1, host, int(nodes_per_machine))
        self._rank = _core.rank(self._handle)
        self._size = _core.size(self._handle)
        self._in_neighbors: Optional[List[int]] = None
        self._out_neighbors: Optional[List[int]] = None
        self._windows: Dict[str, Window] = {}
        self._associated_p = False
        self._closed = False
        _open_contexts.append(self)
        _install_excepthook()

    # ---- lifetime
    def close(self) -> None:
        """Destroys this context with its windows (collective). Operations already
        submitted finish first; later calls raise InvalidHandleError. A rank still
        computing gets PeerFailedError naming this rank in its next operation that needs
        it (it never meets a collective it did not call). Windows are served until every
        rank has closed. After abort() or a PeerFailedError it is local: it never waits
        for peers."""
        if self._closed:
            return
        self._closed = True
        if self in _open_contexts:
            _open_contexts.remove(self)
        if "_metrics_servers" in self.__dict__:  # starling.metrics.serve() started some
            from . import metrics
            metrics.stop(self)
        try:
            _core.context_destroy(self._handle)
        finally:
            for window in list(self._windows.values()):
                window._handle = None  # went with the context
            self._windows.clear()

    def abandon(self, reason: str = "abandoned its context") -> None:
        """Leaves the job now, without the other ranks (starling_context_abandon): they
        are told, and their pending and later operations that wait for this rank raise
        PeerFailedError naming it and `reason` (what follows "rank N ", e.g. "is exiting:
        out of memory"). Then this context is torn down locally (no collective, MPI is
        not finalized: the process should exit). Done at exit after an uncaught
        exception. Local."""
        if self._closed:
            return
        self._closed = True
        if self in _open_contexts:
            _open_contexts.remove(self)
        if "_metrics_servers" in self.__dict__:  # starling.metrics.serve() started some
            from . import metrics
            metrics.stop(self)
        _core.context_abandon(self._handle, str(reason))
        for window in list(self._windows.values()):
            window.free()  # local now: releases the handle

    def abort(self) -> None:
        """Aborts the context, like NCCL's ncclCommAbort (starling_context_abort). Safe
        from any thread at any time, also while other threads are blocked in calls on
        this context: every operation in flight or queued fails within milliseconds
        with AbortedError (blocking calls raise it, requests' wait() raises it), and so
        does every later call. Local: peers are not told. Then call close(), which is
        local too (it never waits for peers). Aborting twice is not an error."""
        _core.context_abort(self._handle)

    @property
    def fault_tolerant(self) -> bool:
        """True when this context survives dead ranks (Open MPI 5 with ULFM, in a job
        started with `mpirun --with-ft ulfm` or `starlingrun --fault-tolerant`)."""
        return bool(_core.fault_tolerant(self._handle))

    def repair(self, topology: Any = None, weighted: bool = False) -> Dict[str, Any]:
        """After a PeerFailedError: makes the context usable again over the survivors
        (starling_context_repair). Collective over every live rank. topology: the graph
        over the survivors (None: the same generator over the new size). Returns
        {"old_rank", "old_size", "new_rank", "new_size", "old_to_new", "failed"}:
        old_to_new[r] is old rank r's new rank (-1 if it died). Windows stay valid.
        Raises UnsupportedError without ULFM."""
        topo = None if topology is None else as_topology(topology)
        result = _core.py_context_repair(self._handle, None if topo is None else topo._handle,
                                         int(bool(weighted)))
        self._rank = result["new_rank"]
        self._size = result["new_size"]
        self._in_neighbors = self._out_neighbors = None
        return result

    def grow(self, count: int = 1, ranks: Optional[Sequence[int]] = None, command: Optional[str] = None,
             args: Sequence[str] = (), topology: Any = None, weighted: bool = False) -> Dict[str, Any]:
        """Grows the context by `count` new processes (starling_context_grow; needs
        ULFM, else UnsupportedError). Collective over the current ranks, which pass the
        same count, ranks and topology. ranks: each newcomer's rank in the grown context
        (None: after the current ranks; [1] puts a replacement at a repaired-away rank
        1's place); the current ranks keep their order in the other places. command /
        args: the newcomers' program (None: this process's interpreter and arguments,
        so the same script joins: its Context() enters this one and `joined` is True).
        topology: over the grown size (None: the current generator over it). No window
        may exist (InvalidUsageError). Returns {"old_rank", "old_size", "new_rank",
        "new_size", "old_to_new", "joined"} (joined: the newcomers' ranks)."""
        topo = None if topology is None else as_topology(topology)
        if command is None and sys.executable and hasattr(sys, "orig_argv"):
            # This interpreter as it was started: in a venv, sys.executable is the venv's
            # python, while the C default (/proc/self/exe) resolves it to the system's
            # interpreter, which does not see the venv's packages (starling among them).
            command, args = sys.executable, sys.orig_argv[1:]
        result = _core.py_context_grow(self._handle, int(count), None if ranks is None else [int(r) for r in ranks],
                                       command, [str(a) for a in args], None if topo is None else topo._handle,
                                       int(bool(weighted)))
        self._rank = result["new_rank"]
        self._size = result["new_size"]
        self._in_neighbors = self._out_neighbors = None
        return result

    def shrink(self, count: int = 1, ranks: Optional[Sequence[int]] = None, topology: Any = None,
               weighted: bool = False) -> Dict[str, Any]:
        """`count` ranks leave the context (starling_context_shrink; needs ULFM, else
        UnsupportedError): those of `ranks` (None: the last `count`). Collective over the
        current ranks, which pass the same count, ranks and topology. The others are
        renumbered in their order and get `topology` (over the new size; None: the
        current generator, or the subgraph they induce). No window may exist
        (InvalidUsageError). Returns {"old_rank", "old_size", "new_rank", "new_size",
        "old_to_new", "left"}. On a rank that leaves, new_rank is -1 and the context is
        closed here (locally): the process takes part in nothing more and may exit."""
        topo = None if topology is None else as_topology(topology)
        result = _core.py_context_shrink(self._handle, int(count),
                                         None if ranks is None else [int(r) for r in ranks],
                                         None if topo is None else topo._handle, int(bool(weighted)))
        self._in_neighbors = self._out_neighbors = None
        if result["new_rank"] < 0:
            self.close()  # local: the core tore this rank's side down already
        else:
            self._rank = result["new_rank"]
            self._size = result["new_size"]
        return result

    def resize(self, size: int, **options: Any) -> Optional[Dict[str, Any]]:
        """Resizes the context to `size` ranks: shrink(old size - size) when smaller (the
        last ranks leave), grow(size - old size) when larger (at the end), both with
        `options` (topology, weighted; grow's command and args); None when the size is
        the same. Collective; needs ULFM."""
        size = int(size)
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if size < self._size:
            return self.shrink(self._size - size, **options)
        if size > self._size:
            return self.grow(size - self._size, **options)
        return None

    @property
    def joined(self) -> bool:
        """True when this process entered the context through another job's grow()
        (it was started by it): fetch the state (parameters, epoch) from a member
        instead of initializing it."""
        return bool(_core.joined(self._handle))

    @property
    def closed(self) -> bool:
        """True once close() (or an abort's local close) has run."""
        return self._closed

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is not None and not self._closed:
            # An exception leaves the block: the other ranks may still be computing, so
            # a collective close would hang; tell them and leave.
            text = str(value).strip().splitlines()
            self.abandon(f"is leaving its context on {kind.__name__}" + (f": {text[0][:300]}" if text else ""))
            return
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"rank {self._rank} of {self._size}"
        return f"<starling.Context {state}>"

    # ---- layout
    @property
    def rank(self) -> int:
        """This process's rank in the context, 0 to size - 1."""
        return _core.rank(self._handle)

    @property
    def size(self) -> int:
        """The number of ranks in the context."""
        return _core.size(self._handle)

    @property
    def local_rank(self) -> int:
        """This rank's index among the ranks of its machine."""
        return _core.local_rank(self._handle)

    @property
    def local_size(self) -> int:
        """The number of ranks on this rank's machine."""
        return _core.local_size(self._handle)

    @property
    def machine_rank(self) -> int:
        """The index of this rank's machine (machines are numbered by their lowest rank)."""
        return _core.machine_rank(self._handle)

    @property
    def machine_size(self) -> int:
        """The number of machines (hosts, or groups of nodes_per_machine ranks)."""
        return _core.machine_size(self._handle)

    @property
    def is_homogeneous(self) -> bool:
        """Every machine has the same number of ranks, numbered contiguously."""
        return bool(_core.is_homogeneous(self._handle))

    def stats(self) -> Dict[str, Any]:
        """Counters since creation: operations, fused operations and groups, messages and
        bytes sent and received (shm_bytes_sent / shm_bytes_received: of those, the ones
        that went through shared memory between ranks of one host), scratch memory held, bytes copied between CUDA tensors and
        host staging buffers (staged_bytes), blocked_ns (nanoseconds the application's
        threads spent in blocking calls and request waits); and gpu_path: "none",
        "staged" or "nccl", how CUDA tensors move (the gpu_path property says why)."""
        return _core.py_get_stats(self._handle)

    def peer_stats(self, peer: Optional[int] = None) -> Any:
        """Traffic with each peer since creation (or the last repair or grow): a list by
        rank of dicts (one dict for ``peer``) with messages_sent, bytes_sent,
        messages_received, bytes_received, and waits, wait_ns, last_wait_ns: how many
        operation steps exchanged messages with that peer, and how long they waited for
        it (from the step's start until its messages arrived and it took ours) in all
        and the last time. A slow or late peer shows long waits."""
        if peer is not None:
            if not isinstance(peer, (int, np.integer)) or isinstance(peer, bool):
                raise TypeError(f"peer must be an int rank, got {type(peer).__name__}")
            return _core.py_get_peer_stats(self._handle, int(peer))
        return [_core.py_get_peer_stats(self._handle, r) for r in range(self.size)]

    def probe_peers(self, repetitions: int = 5, bulk_bytes: int = 1 << 20) -> Dict[str, List[float]]:
        """Measures this rank's latency to every other rank and its throughput to it by
        ping-pong, all ranks at once (collective: every rank calls it alike). Returns
        {"latency_seconds": [...], "bytes_per_second": [...]} by rank (0 for this rank):
        half the best of `repetitions` header-only round trips, and `bulk_bytes` over the
        best bulk round trip less the header-only one. Takes size - 1 rounds; the figures
        also stay in peer_stats() until the next probe."""
        for value, what, low, high in ((repetitions, "repetitions", 1, 1000), (bulk_bytes, "bulk_bytes", 1, 1 << 30)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{what} must be an int, got {type(value).__name__}")
            if not low <= value <= high:
                raise InvalidArgumentError(f"{what} is {value}; give {low} to {high}")
        _core.py_probe_peers(self._handle, int(repetitions), int(bulk_bytes))
        peers = self.peer_stats()
        return {"latency_seconds": [0.0 if r == self.rank else p["probe_latency_ns"] / 1e9 for r, p in enumerate(peers)],
                "bytes_per_second": [0.0 if r == self.rank else float(p["probe_bytes_per_second"])
                                     for r, p in enumerate(peers)]}

    def link_latencies(self, repetitions: int = 5) -> np.ndarray:
        """Every rank's probed latency to every rank, the same size x size float64 matrix
        on every rank (row i: rank i's figures, 0 on the diagonal), for
        Schedule.fast_pairs. Collective: probe_peers (header-only round trips; the bulk
        part at its smallest) and an allgather of the rows."""
        row = np.asarray(self.probe_peers(repetitions, 1)["latency_seconds"], dtype=np.float64)
        return np.asarray(self.allgather(row.reshape(1, -1), name="starling.link_latencies"))

    @property
    def gpu_path(self) -> str:
        """How this context moves CUDA tensors, and why: "none (no CUDA tensor used yet)"
        or e.g. "staged on cuda:0: ..."."""
        return _core.gpu_path(self._handle)

    # ---- timeline (STARLING_TIMELINE=<prefix>: <prefix><rank>.json, complete at close)
    @property
    def timeline_enabled(self) -> bool:
        """True when this context writes a timeline (STARLING_TIMELINE is set)."""
        return bool(_core.timeline_enabled(self._handle))

    @contextlib.contextmanager
    def timeline_activity(self, name: str, activity: str) -> Iterator[None]:
        """Marks `activity` on lane `name` of the timeline for the block (a no-op when the
        timeline is off)."""
        enabled = self.timeline_enabled
        if enabled:
            _core.timeline_start_activity(self._handle, name, activity)
        try:
            yield
        finally:
            if enabled:
                _core.timeline_end_activity(self._handle, name)

    # ---- classic collectives
    def allreduce(self, x: Tensor, op: str = "sum", *, out: Optional[Tensor] = None, local: bool = False,
                  name: Optional[str] = None, compression: Optional[Compression] = None) -> Tensor:
        """op ("sum", "average", "min", "max") over every rank's x (over this machine's
        ranks only with local=True). "average" needs a floating-point dtype.
        compression (starling.compression.TopK(0.01), ...; "sum" or "average"): each
        rank's x is compressed, every rank sums the decompressed tensors."""
        if compression is not None:
            return self._allreduce_compressed(x, op, out, local, name, compression, False)
        # _allreduce and _unary inline for the blocking call: fewer Python frames per call.
        code = _reduce_op(op)
        adapter, cin, out, cout, allocated = output_like(x, out)
        (_c.local_allreduce if local else _c.allreduce)(self._handle, cin, cout, code, name)
        return adapter.result(out, x) if allocated else out

    def allreduce_nonblocking(self, x: Tensor, op: str = "sum", *, out: Optional[Tensor] = None,
                              local: bool = False, name: Optional[str] = None,
                              compression: Optional[Compression] = None) -> Request:
        """As allreduce, returning a Request whose wait() gives the result."""
        if compression is not None:
            return self._allreduce_compressed(x, op, out, local, name, compression, True)
        return self._allreduce(x, op, out, local, name, True)

    def _allreduce_compressed(self, x: Tensor, op: str, out: Any, local: bool, name: Optional[str],
                              compression: Compression, nonblocking: bool) -> Any:
        if local:
            raise ValueError("compression is not available with local=True")
        args = _compression_args(compression)
        code = _reduce_op(op)
        adapter, cin, out, cout, allocated = output_like(x, out)
        request = _core.py_compressed(0, self._handle, cin, cout, code, *args, 0, 0.0, None, 0, None, 0, name,
                                      int(nonblocking))
        return _finish(request, adapter, x, cin, out, cout, allocated)

    def compression_reset(self, name: Optional[str] = None) -> None:
        """Drops the compression state (error-feedback residual, random-k step, CHOCO
        copies) kept under name, or under every name. Call it on every rank alike."""
        _core.compression_reset(self._handle, name)

    def _allreduce(self, x: Tensor, op: str, out: Any, local: bool, name: Optional[str], nonblocking: bool) -> Any:
        code = _reduce_op(op)
        if local:
            return self._unary(_core.local_allreduce, _core.local_allreduce_nonblocking, x, out, nonblocking,
                               (code, name))
        return self._unary(_core.allreduce, _core.allreduce_nonblocking, x, out, nonblocking, (code, name))

    def broadcast(self, x: Tensor, root: int, *, out: Optional[Tensor] = None, name: Optional[str] = None) -> Tensor:
        """Every rank gets root's x (x is only read on the root)."""
        return self._unary(_core.broadcast, _core.broadcast_nonblocking, x, out, False, (root, name))

    def broadcast_nonblocking(self, x: Tensor, root: int, *, out: Optional[Tensor] = None,
                              name: Optional[str] = None) -> Request:
        """As broadcast, returning a Request whose wait() gives the result."""
        return self._unary(_core.broadcast, _core.broadcast_nonblocking, x, out, True, (root, name))

    def allgather(self, x: Tensor, *, name: Optional[str] = None) -> Tensor:
        """Every rank's x concatenated along dimension 0, in rank order (first
        dimensions may differ between ranks)."""
        return self._allgather(x, name, False)

    def allgather_nonblocking(self, x: Tensor, *, name: Optional[str] = None) -> Request:
        """As allgather; the first dimensions are exchanged before this returns."""
        return self._allgather(x, name, True)

    def _allgather(self, x: Tensor, name: Optional[str], nonblocking: bool) -> Any:
        adapter = adapter_of(x)
        cin = adapter.capsule(x)
        dims = np.empty(self._size, dtype=np.int64)
        _core.allgather_first_dims(self._handle, cin, dims, name)
        out = adapter.empty(x, (int(dims.sum()),) + tuple(x.shape[1:]))
        cout = adapter.capsule(out)
        if not nonblocking:
            _core.allgather(self._handle, cin, cout, None, name)
            return adapter.result(out, x)
        request = _core.allgather_nonblocking(self._handle, cin, cout, None, name)
        return Request(request, (x, cin, out, cout), lambda: adapter.result(out, x))

    def reduce_scatter(self, x: Tensor, op: str = "sum", *, counts: Optional[Sequence[int]] = None,
                       out: Optional[Tensor] = None, name: Optional[str] = None) -> Tensor:
        """This rank's block of op ("sum", "average", "min", "max") over every rank's x.
        x is cut along dimension 0 into size() blocks in rank order: equal ones (x.shape[0]
        divisible by size()), or counts[r] rows for rank r (size() ints, the same on every
        rank, summing to x.shape[0]). The result has x's other dimensions. out may be given
        (this rank's block of x itself: in place)."""
        return self._reduce_scatter(x, op, counts, out, name, False)

    def reduce_scatter_nonblocking(self, x: Tensor, op: str = "sum", *, counts: Optional[Sequence[int]] = None,
                                   out: Optional[Tensor] = None, name: Optional[str] = None) -> Request:
        """As reduce_scatter, returning a Request whose wait() gives this rank's block."""
        return self._reduce_scatter(x, op, counts, out, name, True)

    def _reduce_scatter(self, x: Tensor, op: str, counts: Any, out: Any, name: Optional[str],
                        nonblocking: bool) -> Any:
        code = _reduce_op(op)
        adapter = adapter_of(x)
        cin = adapter.capsule(x)
        shape = tuple(x.shape)
        if not shape:
            raise InvalidArgumentError("reduce_scatter needs a tensor with at least one dimension (reshape a "
                                       "scalar to [1])")
        row = int(np.prod(shape[1:], dtype=np.int64))
        if counts is None:
            if shape[0] % self._size:
                raise InvalidArgumentError(f"reduce_scatter: x has {shape[0]} rows, not a multiple of size() = "
                                           f"{self._size}; pass counts for unequal blocks")
            rows, elements = shape[0] // self._size, None
        else:
            rows_by_rank = _counts(counts, self._size, "counts")
            rows, elements = int(rows_by_rank[self._rank]), rows_by_rank * row
        allocated = out is None
        if allocated:
            out = adapter.empty(x, (rows,) + shape[1:])
        cout = adapter.capsule(out)
        request = _core.py_reduce_scatter(self._handle, cin, cout, elements, code, name, int(nonblocking))
        return _finish(request, adapter, x, cin, out, cout, allocated)

    def alltoall(self, x: Tensor, *, splits: Optional[Sequence[int]] = None,
                 recv_splits: Optional[Sequence[int]] = None, out: Optional[Tensor] = None,
                 name: Optional[str] = None) -> Tensor:
        """Block q of x (along dimension 0) goes to rank q; the result holds the blocks
        every rank sent here, in rank order (MPI_Alltoall(v)). Equal blocks (x.shape[0]
        divisible by size()), or splits[q] rows for rank q (size() ints summing to
        x.shape[0]). With splits, recv_splits (the rows each rank sends here) is learnt
        from the peers unless given (see alltoall_splits)."""
        return self._alltoall(x, splits, recv_splits, out, name, False)

    def alltoall_nonblocking(self, x: Tensor, *, splits: Optional[Sequence[int]] = None,
                             recv_splits: Optional[Sequence[int]] = None, out: Optional[Tensor] = None,
                             name: Optional[str] = None) -> Request:
        """As alltoall; learning recv_splits (splits given, recv_splits not) completes
        before this returns."""
        return self._alltoall(x, splits, recv_splits, out, name, True)

    def alltoall_splits(self, splits: Sequence[int]) -> List[int]:
        """The rows each rank will send here, given the rows this rank sends to each rank
        (an equal-block alltoall of the counts). Collective."""
        mine = _counts(splits, self._size, "splits")
        theirs = np.empty(self._size, dtype=np.int64)
        adapter = adapter_of(mine)
        _core.py_alltoall(self._handle, adapter.capsule(mine), adapter.capsule(theirs), None, None, None, 0)
        return [int(v) for v in theirs]

    def _alltoall(self, x: Tensor, splits: Any, recv_splits: Any, out: Any, name: Optional[str],
                  nonblocking: bool) -> Any:
        adapter = adapter_of(x)
        cin = adapter.capsule(x)
        shape = tuple(x.shape)
        if not shape:
            raise InvalidArgumentError("alltoall needs a tensor with at least one dimension (reshape a scalar to [1])")
        if splits is None and recv_splits is not None:
            raise InvalidArgumentError("alltoall: recv_splits needs splits")
        row = int(np.prod(shape[1:], dtype=np.int64))
        if splits is None:
            if shape[0] % self._size:
                raise InvalidArgumentError(f"alltoall: x has {shape[0]} rows, not a multiple of size() = "
                                           f"{self._size}; pass splits for unequal blocks")
            send = recv = None
            rows = shape[0]
        else:
            send = _counts(splits, self._size, "splits")
            recv = _counts(self.alltoall_splits(send) if recv_splits is None else recv_splits, self._size,
                           "recv_splits")
            rows = int(recv.sum())
            send, recv = send * row, recv * row
        allocated = out is None
        if allocated:
            out = adapter.empty(x, (rows,) + shape[1:])
        cout = adapter.capsule(out)
        request = _core.py_alltoall(self._handle, cin, cout, send, recv, name, int(nonblocking))
        return _finish(request, adapter, x, cin, out, cout, allocated)

    # ---- groups
    def split(self, color: Optional[int], key: int = 0, *, nodes_per_machine: int = 0) -> Optional["Context"]:
        """A new context over the ranks passing the same color (MPI_Comm_split), ranked
        by key (ties: by rank here); None for color None (this rank joins none). It is
        independent of this one: its own engine, default topology (exponential-2 over
        its size), windows; close it like any context. Collective over this context."""
        if color is not None and (not isinstance(color, int) or color < 0):
            raise InvalidArgumentError(f"color must be an int >= 0 or None, got {color!r}")
        handle = _core.py_context_split(self._handle, -1 if color is None else int(color), int(key),
                                        int(nodes_per_machine))
        return None if handle is None else Context._adopt(handle)

    @classmethod
    def _adopt(cls, handle: Any) -> "Context":
        self = cls.__new__(cls)
        self._handle = handle
        self._rank = _core.rank(handle)
        self._size = _core.size(handle)
        self._in_neighbors = None
        self._out_neighbors = None
        self._windows = {}
        self._associated_p = False
        self._closed = False
        _open_contexts.append(self)
        return self

    def barrier(self) -> None:
        """Returns once every rank has entered the barrier."""
        _core.barrier(self._handle)

    def barrier_nonblocking(self) -> Request:
        """As barrier, returning a Request that completes once every rank has entered it."""
        return Request(_core.barrier_nonblocking(self._handle), None)

    # ---- neighbor collectives
    def neighbor_allreduce(self, x: Tensor, *, self_weight: Optional[float] = None,
                           src_weights: Optional[Weights] = None, dst_weights: Any = None,
                           check_topology: bool = False, out: Optional[Tensor] = None,
                           name: Optional[str] = None, compression: Optional[Compression] = None) -> Tensor:
        """Weighted average with neighbors: ``self_weight * x + sum_j w_j * x_j``.

        Static mode (dst_weights None): over the context's topology, with its weights
        (if set weighted) or the uniform average, unless self_weight and src_weights
        ({in-neighbor: weight}; unlisted in-neighbors get 0) are given. Dynamic mode:
        this call sends to dst_weights (a list of ranks, or {rank: weight} scaling what
        each receives) and receives from src_weights' ranks; check_topology verifies
        collectively that sends and receives match.

        compression (static mode; name required): CHOCO gossip,
        ``x + gamma * sum_j w_j (x_hat_j - x_hat_self)`` over public copies kept per
        name (self_weight is not used); repeated calls reach exact consensus."""
        if compression is not None:
            return self._neighbor_allreduce(0, x, self_weight, src_weights, dst_weights, check_topology, out, name,
                                            False, compression)
        return self._neighbor_allreduce(0, x, self_weight, src_weights, dst_weights, check_topology, out, name,
                                        False)

    def neighbor_allreduce_nonblocking(self, x: Tensor, *, self_weight: Optional[float] = None,
                                       src_weights: Optional[Weights] = None, dst_weights: Any = None,
                                       check_topology: bool = False, out: Optional[Tensor] = None,
                                       name: Optional[str] = None,
                                       compression: Optional[Compression] = None) -> Request:
        """As neighbor_allreduce, returning a Request whose wait() gives the result."""
        return self._neighbor_allreduce(0, x, self_weight, src_weights, dst_weights, check_topology, out, name,
                                        True, compression)

    def hierarchical_neighbor_allreduce(self, x: Tensor, *, self_weight: Optional[float] = None,
                                        src_machine_weights: Optional[Weights] = None,
                                        dst_machine_weights: Any = None, check_topology: bool = False,
                                        out: Optional[Tensor] = None, name: Optional[str] = None) -> Tensor:
        """Average inside each machine, neighbor_allreduce between machines (weights
        name machine ids, over the machine topology or dynamic), share the result inside
        each machine. Needs a homogeneous layout with local_size >= 2."""
        return self._neighbor_allreduce(1, x, self_weight, src_machine_weights, dst_machine_weights,
                                        check_topology, out, name, False)

    def hierarchical_neighbor_allreduce_nonblocking(self, x: Tensor, *, self_weight: Optional[float] = None,
                                                    src_machine_weights: Optional[Weights] = None,
                                                    dst_machine_weights: Any = None, check_topology: bool = False,
                                                    out: Optional[Tensor] = None,
                                                    name: Optional[str] = None) -> Request:
        """As hierarchical_neighbor_allreduce, returning a Request whose wait() gives the result."""
        return self._neighbor_allreduce(1, x, self_weight, src_machine_weights, dst_machine_weights,
                                        check_topology, out, name, True)

    def _neighbor_allreduce(self, kind: int, x: Tensor, self_weight: Any, src: Any, dst: Any, check: bool,
                            out: Any, name: Optional[str], nonblocking: bool,
                            compression: Optional[Compression] = None) -> Any:
        names = ("src_weights", "dst_weights") if kind == 0 else ("src_machine_weights", "dst_machine_weights")
        use, sw, sources, dynamic, destinations = neighbor_mode(self_weight, src, dst, *names)
        adapter, cin, out, cout, allocated = output_like(x, out)
        if compression is not None:
            request = _core.py_compressed(1, self._handle, cin, cout, 0, *_compression_args(compression), use, sw,
                                          sources, dynamic, destinations, int(bool(check)), name, int(nonblocking))
        else:
            request = _core.py_neighbor_allreduce(kind, self._handle, cin, cout, use, sw, sources, dynamic,
                                                  destinations, int(bool(check)), name, int(nonblocking))
        return _finish(request, adapter, x, cin, out, cout, allocated)

    def neighbor_allgather(self, x: Tensor, *, src_ranks: Optional[Sequence[int]] = None,
                           dst_ranks: Optional[Sequence[int]] = None, check_topology: bool = False,
                           name: Optional[str] = None) -> Tensor:
        """The sources' x concatenated along dimension 0: the in-neighbors in ascending
        order (static), or src_ranks in the order given (dynamic: give dst_ranks too)."""
        return self._neighbor_allgather(x, src_ranks, dst_ranks, check_topology, name, False)

    def neighbor_allgather_nonblocking(self, x: Tensor, *, src_ranks: Optional[Sequence[int]] = None,
                                       dst_ranks: Optional[Sequence[int]] = None, check_topology: bool = False,
                                       name: Optional[str] = None) -> Request:
        """As neighbor_allgather; the sources' first dimensions are exchanged before
        this returns."""
        return self._neighbor_allgather(x, src_ranks, dst_ranks, check_topology, name, True)

    def _neighbor_allgather(self, x: Tensor, src: Any, dst: Any, check: bool, name: Optional[str],
                            nonblocking: bool) -> Any:
        if (src is None) != (dst is None):
            raise ValueError("src_ranks and dst_ranks go together: give both (dynamic) or neither (static)")
        dynamic = int(src is not None)
        src = rank_weights(src, "src_ranks")
        dst = rank_weights(dst, "dst_ranks")
        adapter = adapter_of(x)
        cin = adapter.capsule(x)
        count = len(src) if dynamic else len(self.in_neighbors)
        dims = np.empty(count, dtype=np.int64)
        check = int(bool(check))
        _core.py_neighbor_allgather_first_dims(self._handle, cin, dims, src, dynamic, dst, check, name)
        out = adapter.empty(x, (int(dims.sum()),) + tuple(x.shape[1:]))
        cout = adapter.capsule(out)
        # The sizes were checked by the first exchange: no need to check again.
        request = _core.py_neighbor_allgather(self._handle, cin, cout, None, src, dynamic, dst, 0, name,
                                              int(nonblocking))
        return _finish(request, adapter, x, cin, out, cout, True)

    def pair_gossip(self, x: Tensor, peer: int, *, self_weight: float = 0.5, pair_weight: float = 0.5,
                    out: Optional[Tensor] = None, name: Optional[str] = None) -> Tensor:
        """``self_weight * x + pair_weight * peer's x``; only this rank and peer call it."""
        return self._unary(_core.pair_gossip, _core.pair_gossip_nonblocking, x, out, False,
                           (peer, float(self_weight), float(pair_weight), name))

    def pair_gossip_nonblocking(self, x: Tensor, peer: int, *, self_weight: float = 0.5, pair_weight: float = 0.5,
                                out: Optional[Tensor] = None, name: Optional[str] = None) -> Request:
        """As pair_gossip, returning a Request whose wait() gives the result."""
        return self._unary(_core.pair_gossip, _core.pair_gossip_nonblocking, x, out, True,
                           (peer, float(self_weight), float(pair_weight), name))

    def _unary(self, blocking: Any, nonblocking_fn: Any, x: Tensor, out: Any, nonblocking: bool,
               args: Tuple[Any, ...]) -> Any:
        adapter, cin, out, cout, allocated = output_like(x, out)
        if nonblocking:
            request = nonblocking_fn(self._handle, cin, cout, *args)
        else:
            request = blocking(self._handle, cin, cout, *args)
        return _finish(request, adapter, x, cin, out, cout, allocated)

    # ---- topology
    def set_topology(self, topology: Any, weighted: bool = False) -> None:
        """Sets the graph neighbor operations use (a Topology or a networkx.DiGraph with
        'weight' attributes). weighted: operations default to its weights instead of the
        uniform average. Collective: every rank passes the same graph."""
        topo = as_topology(topology)
        _core.set_topology(self._handle, topo._handle, int(bool(weighted)))
        self._in_neighbors = self._out_neighbors = None

    @property
    def topology(self) -> Topology:
        """A copy of the current topology (the exponential-2 graph until set)."""
        return Topology._adopt(_core.get_topology(self._handle)[0])

    @property
    def topology_weighted(self) -> bool:
        """True when the context's topology was set weighted (operations default to its weights)."""
        return bool(_core.get_topology(self._handle)[1])

    def set_machine_topology(self, topology: Any, weighted: bool = False) -> None:
        """The graph over machines that hierarchical_neighbor_allreduce uses (size:
        machine_size). Collective."""
        _core.set_machine_topology(self._handle, as_topology(topology)._handle, int(bool(weighted)))

    @property
    def machine_topology(self) -> Optional[Topology]:
        """The graph over machines set by set_machine_topology, or None."""
        handle = _core.get_machine_topology(self._handle)[0]
        return None if handle is None else Topology._adopt(handle)

    @property
    def in_neighbors(self) -> List[int]:
        """This rank's in-neighbors in the topology, ascending."""
        if self._in_neighbors is None:
            self._in_neighbors = _core.py_context_neighbors(self._handle, 1)
        return list(self._in_neighbors)

    @property
    def out_neighbors(self) -> List[int]:
        """This rank's out-neighbors in the context's topology, in ascending order."""
        if self._out_neighbors is None:
            self._out_neighbors = _core.py_context_neighbors(self._handle, 0)
        return list(self._out_neighbors)

    # ---- windows
    def window(self, tensor: Tensor, name: str, *, zero_init: bool = False) -> Window:
        """Creates window `name` over `tensor` (collective; same name, dtype and shape on
        every rank). The window borrows the tensor until it is freed. A CUDA tensor keeps
        the window on the GPU (then every rank's must be); updates combine it through
        host memory, after the work queued on its framework's current stream."""
        window = Window(self, tensor, name, zero_init)
        self._windows[name] = window
        return window

    @property
    def windows(self) -> List[str]:
        """Names of this context's windows, sorted."""
        return _core.py_window_names(self._handle)

    def set_window_associated_p(self, enabled: bool) -> None:
        """Push-sum: put/accumulate carry a scalar p with the data (see Window)."""
        _core.set_window_associated_p_enabled(self._handle, int(bool(enabled)))
        self._associated_p = bool(enabled)


def _counts(counts: Any, size: int, what: str) -> "np.ndarray":
    """size() non-negative ints as a C-contiguous int64 array, or InvalidArgumentError."""
    try:
        array = np.ascontiguousarray(np.asarray(counts, dtype=np.int64).reshape(-1))
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} must be a sequence of {size} ints, got {counts!r}") from None
    if array.shape[0] != size:
        raise InvalidArgumentError(f"{what} has {array.shape[0]} entries but the context has {size} ranks")
    if (array < 0).any():
        raise InvalidArgumentError(f"{what} has a negative entry: {array.tolist()}")
    return array


def _finish(request: Any, adapter: Any, x: Any, cin: Any, out: Any, cout: Any, allocated: bool) -> Any:
    """The result (blocking call: request is None) or a Request for it."""
    if request is None:
        return adapter.result(out, x) if allocated else out
    if allocated:
        return Request(request, (x, cin, out, cout), lambda: adapter.result(out, x))
    return Request(request, (x, cin, out, cout), None, out)


def as_topology(topology: Any) -> Topology:
    """A Topology from a Topology or a networkx graph (edge weights from 'weight',
    default 1.0)."""
    if isinstance(topology, Topology):
        return topology
    if hasattr(topology, "number_of_nodes") and hasattr(topology, "edges"):
        n = topology.number_of_nodes()
        if sorted(topology.nodes) != list(range(n)):
            raise ValueError(f"graph nodes must be the ranks 0..{n - 1}")
        edges = [(int(i), int(j), float(d.get("weight", 1.0))) for i, j, d in topology.edges(data=True)]
        if not topology.is_directed():
            edges += [(j, i, w) for i, j, w in edges if i != j]
        return Topology(n, edges)
    raise TypeError(f"topology must be a starling.Topology or a networkx.DiGraph, got {type(topology).__name__}")


@atexit.register
def _close_all() -> None:
    for context in reversed(list(_open_contexts)):
        try:
            if _exit_reason is not None:
                context.abandon(f"is exiting: {_exit_reason}")
            else:
                context.close()
        except Exception:
            pass


__all__ = ["Context", "as_topology"]
