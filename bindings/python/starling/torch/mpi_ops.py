"""BlueFog's torch operations (bluefog.torch.mpi_ops) over Starling.

Same names, arguments, defaults, return types and errors as BlueFog 0.3.0; the README
lists every deliberate difference. Tensors cross into Starling through DLPack without
a copy; blocking calls wait in C with the GIL released. CUDA tensors are ordered against
torch's current stream and results are allocated on the input's device.
"""

import atexit
import contextlib
import functools
import math
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import networkx as nx
import torch
from torch.utils.dlpack import to_dlpack as _to_dlpack

from .. import _core
from .. import _logging
from .. import metrics as _metrics
from .. import context as _context_module
from .. import topology_util
from ..compression import Compression, as_args as _compression_args
from .._graph_topology import set_graph_topology
from ..context import Context, as_topology
from ..errors import MismatchError, UnsupportedError
from ..request import Request, poll_handle, take_handle
from . import _state as S

logger = _logging.logger
# The compiled SWIG module itself: the hot blocking calls skip _core's pure-Python
# forwarding functions (one Python frame per call).
_c = getattr(_core, "__core")
_contiguous = torch.contiguous_format
_SUM, _AVERAGE = _core.STARLING_SUM, _core.STARLING_AVERAGE
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# ---- tensors ------------------------------------------------------------------------
def _capsule(tensor: Any) -> Any:
    """The DLPack capsule of a CPU tensor; (capsule, torch's current stream) for a CUDA
    tensor, which the C call orders against (see starling._tensors)."""
    try:
        capsule = _to_dlpack(tensor)
    except (RuntimeError, TypeError, AttributeError, BufferError):  # PyTorch 2: BufferError (meta, float8)
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}") from None
        raise UnsupportedError(f"Tensor type {tensor.dtype} ({tensor.layout}, device {tensor.device}) is not "
                               "supported: use a dense CPU or CUDA tensor of dtype float16, bfloat16, float32, "
                               "float64, int8, int16, int32, int64 or uint8") from None
    if tensor.is_cuda:
        return capsule, torch.cuda.current_stream(tensor.device).cuda_stream
    return capsule


def _empty_like(tensor: torch.Tensor) -> torch.Tensor:
    """A fresh contiguous tensor like tensor (not requiring grad). empty_like is about
    twice as fast as torch.empty(shape, dtype=, device=) for small tensors."""
    return torch.empty_like(tensor, memory_format=_contiguous)


def _check_name(name: Any) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")


def _register(request: Request) -> int:
    handle = S.next_handle()
    S.handles[handle] = request
    return handle


def _deprecated_arguments(**replacements: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Rejects keywords removed in BlueFog 0.3.0 with TypeError("<arg> is deprecated in
    <function>: <what to use>"), as BlueFog does."""
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                for old, hint in replacements.items():
                    if old in kwargs:
                        raise TypeError(f"{old} is deprecated in {fn.__name__}: {hint}")
            return fn(*args, **kwargs)
        return wrapper
    return decorate


def _reject_keywords(function: str, keywords: Dict[str, Any], replacements: Dict[str, str]) -> None:
    """The TypeError for keywords a function does not take: BlueFog's message for those
    removed in 0.3.0, Python's own for any other. (For hot functions, which take them as
    **keywords instead of paying _deprecated_arguments' wrapper call.)"""
    for old in keywords:
        if old in replacements:
            raise TypeError(f"{old} is deprecated in {function}: {replacements[old]}")
    raise TypeError(f"{function}() got an unexpected keyword argument {next(iter(keywords))!r}")


_NEIGHBOR_DEPRECATED = {"neighbor_weights": "Use src_weights instead", "send_neighbors": "Use dst_weights instead"}


# ---- init, shutdown and layout ---------------------------------------------------------
def init(topology_fn: Optional[Callable[[int], nx.DiGraph]] = None, is_weighted: bool = False) -> None:
    """Starts Starling (once per process, collective) and sets the topology:
    topology_fn(size()) or the exponential-2 graph. With CUDA available, the first call
    makes GPU local_rank() % device_count() the current device, as BlueFog's programs do.

    Later calls are local and do nothing, as Horovod's init() (programs and test suites
    call it again and again, not the same number of times on every rank), except
    init(topology_fn) with a topology, which sets that topology again: collective, as in
    BlueFog (every rank calls it). STARLING_METRICS_PORT=P: each rank serves its
    counters as Prometheus text on port P + local_rank() (starling.metrics)."""
    if S.context is not None and topology_fn is None:
        return
    first = S.context is None
    if first:
        if S.shut_down:
            raise S.unavailable()
        S.context = Context()
        S.handle = S.context._handle
        _logging.configure(S.context._rank)
        S.timeline_on = S.context.timeline_enabled
        atexit.register(_shutdown_at_exit)
        _select_gpu(S.context.local_rank)
    if S.context.joined and S.topology is None:
        # Started by grow(): the job's topology is already installed (set_topology is
        # collective, and the running ranks are not calling it).
        _adopt_topology(S.context)
    else:
        set_topology(topology_fn(size()) if topology_fn is not None else topology_util.ExponentialGraph(size()),
                     is_weighted)
    if first:
        # Last, so that an error here (naming STARLING_METRICS_PORT) leaves Starling
        # initialized and usable.
        _metrics.serve(S.context)


def is_initialized() -> bool:
    """True between the first init() and shutdown() (also while suspended), as Horovod's."""
    return S.context is not None


def _adopt_topology(context: Any) -> None:
    S.topology, S.is_weighted = context.topology.to_networkx(), context.topology_weighted
    S.in_ranks, S.out_ranks = context.in_neighbors, context.out_neighbors


def _select_gpu(local_rank: int) -> None:
    """One GPU per rank: ranks of one machine take its GPUs round-robin. Nothing to do
    without CUDA (CPU-only torch, or no device)."""
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())


def shutdown() -> None:
    """Frees every window and stops Starling (collective). Operations already submitted
    finish first. Starling cannot be initialized again in this process."""
    if S.context is None:
        return
    context, S.context, S.handle = S.context, None, None
    S.shut_down, S.suspended = True, False
    S.windows.clear()
    S.topology = S.machine_topology = None
    S.in_ranks, S.out_ranks, S.in_machine_ranks, S.out_machine_ranks = [], [], [], []
    S.timeline_on = False
    context.close()  # also completes the timeline file


def _shutdown_at_exit() -> None:
    """shutdown() at exit, unless an uncaught exception ends the process: then the other
    ranks, still computing, are told and the context is left locally (a collective
    shutdown would wait for them forever)."""
    reason = _context_module.exit_reason()
    if reason is not None and S.context is not None:
        try:
            S.context.abandon(f"is exiting: {reason}")
        except Exception:
            pass
    shutdown()


def abort() -> None:
    """Starling's addition (BlueFog has none): aborts the context from any thread, like
    NCCL's ncclCommAbort. Every pending and later operation fails at once with
    starling.AbortedError; then call shutdown(), which no longer waits for peers."""
    S.require_context().abort()


def link_latencies(repetitions: int = 5) -> torch.Tensor:
    """Starling's addition: every rank's probed latency to every rank (seconds), a
    size x size float64 tensor, the same on every rank; for GetFastPairSendRecvRanks.
    Collective (a ping-pong probe and an allgather; measure again every so many steps,
    not every step)."""
    return torch.from_numpy(S.require_context().link_latencies(repetitions))


def fault_tolerant() -> bool:
    """Starling's addition: True when the job survives dead ranks (Open MPI 5 with ULFM,
    started with `starlingrun --fault-tolerant`); then repair() follows a PeerFailedError."""
    return S.require_context().fault_tolerant


def repair(topology: Optional[nx.DiGraph] = None, is_weighted: bool = False) -> Dict[str, Any]:
    """Starling's addition: after a starling.PeerFailedError, every surviving rank calls
    repair() and training goes on with the survivors: ranks are renumbered (size() and
    rank() change), the topology is rebuilt (the same generator over the new size, or
    `topology`; load_topology() returns it), the machine topology is dropped, windows
    stay and lose the dead ranks' buffers. Handles of operations that were pending are
    dropped (their results are lost); the optimizers start their next communication
    afresh over the survivors, with their default weights (README, Surviving failures). Returns {"old_rank", "old_size", "new_rank", "new_size",
    "old_to_new", "failed"}. Collective over the survivors."""
    context = S.require_context()
    result = context.repair(topology, is_weighted)
    for request in list(S.handles.values()):
        try:
            request.wait()
        except Exception:  # the operation failed with the peer: its result is gone
            pass
    S.handles.clear()
    # load_topology() returns the graph over the survivors (the regenerated one when
    # none was given), not the old world's.
    if topology is not None:
        S.topology, S.is_weighted = topology, bool(is_weighted)
    else:
        S.topology, S.is_weighted = context.topology.to_networkx(), context.topology_weighted
    S.in_ranks, S.out_ranks = context.in_neighbors, context.out_neighbors
    S.machine_topology, S.is_machine_weighted = None, False
    S.in_machine_ranks, S.out_machine_ranks = [], []  # the machine topology is dropped
    S.repairs += 1
    return result


def grow(count: int = 1, ranks: Optional[List[int]] = None, topology: Optional[nx.DiGraph] = None,
         is_weighted: bool = False, command: Optional[str] = None, args: Tuple[str, ...] = ()) -> Dict[str, Any]:
    """Starling's addition: every current rank calls grow() to start `count` new
    processes that join the job, e.g. a replacement after repair(). By default they run
    this same script: its init() enters the grown job (joined() is True there) instead
    of starting a new one. ranks: their ranks (None: at the end; [r] puts one at rank
    r, the current ranks keep their order in the other places); topology: over the new
    size (None: the current generator over it). No window may exist. Then the newcomers
    pull the parameters from a member (broadcast_parameters(model.state_dict(),
    root_rank=0) on every rank) and train on. Returns {"old_rank", "old_size",
    "new_rank", "new_size", "old_to_new", "joined"}. Collective over the current ranks;
    needs ULFM (`starlingrun --fault-tolerant`)."""
    context = S.require_context()
    for request in list(S.handles.values()):
        request.wait()
    S.handles.clear()
    result = context.grow(count, ranks, command, args, topology, is_weighted)
    _adopt_topology(context)
    S.in_machine_ranks, S.out_machine_ranks = [], []  # the machine topology is dropped
    S.repairs += 1  # optimizers start their next communication afresh
    return result


def shrink(count: int = 1, ranks: Optional[List[int]] = None, topology: Optional[nx.DiGraph] = None,
           is_weighted: bool = False) -> Dict[str, Any]:
    """Starling's addition: every current rank calls shrink() and `count` ranks leave the
    job (those of `ranks`; None: the last `count`), e.g. to hand machines back. The
    others are renumbered in their order and train on over `topology` (None: the current
    generator over the new size). No window may exist. Returns {"old_rank", "old_size",
    "new_rank", "new_size", "old_to_new", "left"}; on a rank that left, new_rank is -1
    and Starling is shut down there (locally): exit the process. Collective over the
    current ranks; needs ULFM (`starlingrun --fault-tolerant`)."""
    context = S.require_context()
    for request in list(S.handles.values()):
        request.wait()
    S.handles.clear()
    result = context.shrink(count, ranks, topology, is_weighted)
    if result["new_rank"] < 0:
        shutdown()  # local: the context is closed already
        return result
    _adopt_topology(context)
    S.in_machine_ranks, S.out_machine_ranks = [], []  # the machine topology is dropped
    S.repairs += 1  # optimizers start their next communication afresh
    return result


def resize(new_size: int, topology: Optional[nx.DiGraph] = None, is_weighted: bool = False) -> Optional[Dict[str, Any]]:
    """Starling's addition: resizes the job to `new_size` ranks, collectively:
    shrink() of the last ranks when smaller, grow() at the end when larger (the
    newcomers run this same script); None when the size is the same."""
    current = size()
    if new_size < 1:
        raise ValueError(f"new_size must be >= 1, got {new_size}")
    if new_size < current:
        return shrink(current - new_size, topology=topology, is_weighted=is_weighted)
    if new_size > current:
        return grow(new_size - current, topology=topology, is_weighted=is_weighted)
    return None


def joined() -> bool:
    """Starling's addition: True in a process that joined a running job through grow()."""
    return S.require_context().joined


def size() -> int:
    """Number of ranks."""
    return S.require_context()._size


def rank() -> int:
    """This process's rank (0 to size() - 1)."""
    return S.require_context()._rank


def local_size() -> int:
    """Ranks on this machine (BLUEFOG_NODES_PER_MACHINE / STARLING_NODES_PER_MACHINE
    simulate machines of that many consecutive ranks)."""
    return _core.local_size(S.require_context()._handle)


def local_rank() -> int:
    """This rank's index among the ranks of its machine."""
    return _core.local_rank(S.require_context()._handle)


def is_homogeneous() -> bool:
    """Every machine has the same number of ranks, numbered contiguously."""
    return bool(_core.is_homogeneous(S.require_context()._handle))


def machine_size() -> int:
    """The number of machines (hosts, or groups of BLUEFOG/STARLING_NODES_PER_MACHINE ranks)."""
    assert is_homogeneous(), "Only supports homogeneous environment now"
    return _core.machine_size(S.context._handle)


def machine_rank() -> int:
    """The index of this rank's machine."""
    assert is_homogeneous(), "Only supports homogeneous environment now"
    return _core.machine_rank(S.context._handle)


def mpi_threads_supported() -> int:
    """1: Starling always runs MPI with MPI_THREAD_MULTIPLE."""
    S.require_context()
    return 1


def unified_mpi_window_model_supported() -> bool:
    """True: Starling's windows are built on its own progress engine, not MPI RMA, and
    behave the same on every transport."""
    S.require_context()
    return True


def nccl_built() -> bool:
    """False: CUDA tensors move through Starling's own GPU path (Context.gpu_path says
    which), so none of BlueFog's NCCL-only restrictions apply."""
    return False


# ---- topology ---------------------------------------------------------------------------
def is_topo_weighted() -> bool:
    """True when the topology was set weighted (operations default to its weights)."""
    return S.is_weighted


def is_machine_topo_weighted() -> bool:
    """True when the machine topology was set weighted."""
    return S.is_machine_weighted


def load_topology() -> Optional[nx.DiGraph]:
    """The topology last set (None before init)."""
    return S.topology


def load_machine_topology() -> Optional[nx.DiGraph]:
    """The graph over machines set by set_machine_topology, as a networkx DiGraph, or None."""
    return S.machine_topology


def in_neighbor_ranks() -> List[int]:
    """This rank's in-neighbors in the topology, ascending, self excluded."""
    return list(S.in_ranks)


def out_neighbor_ranks() -> List[int]:
    """The ranks this rank sends to in the topology, in ascending order."""
    return list(S.out_ranks)


def in_neighbor_machine_ranks() -> List[int]:
    """The machines this rank's machine receives from in the machine topology."""
    return list(S.in_machine_ranks)


def out_neighbor_machine_ranks() -> List[int]:
    """The machines this rank's machine sends to in the machine topology."""
    return list(S.out_machine_ranks)


def set_topology(topology: Optional[nx.DiGraph] = None, is_weighted: bool = False) -> bool:
    """Sets the graph neighbor operations use (None: the exponential-2 graph). Collective
    in Starling: every rank must pass the same graph. Returns False, keeping the old
    topology, while windows exist or when ranks passed different graphs."""
    return set_graph_topology(S.require_context(), S, topology, is_weighted)


def set_machine_topology(topology: Optional[nx.DiGraph], is_weighted: bool = False) -> bool:
    """Sets the graph over machines for hierarchical_neighbor_allreduce (collective)."""
    context = S.require_context()
    if topology is None:
        raise ValueError("Machine topology shall not be None.")
    if not isinstance(topology, nx.DiGraph):
        raise TypeError("Machine topology must be a networkx.DiGraph object.")
    if topology.number_of_nodes() != machine_size():
        raise TypeError(f"Machine topology must have machine_size() = {machine_size()} nodes, "
                        f"got {topology.number_of_nodes()}.")
    try:
        context.set_machine_topology(as_topology(topology), bool(is_weighted))
    except MismatchError as e:
        logger.error("set_machine_topology failed, the previous machine topology stays: %s", e)
        return False
    me = machine_rank()
    S.machine_topology, S.is_machine_weighted = topology, bool(is_weighted)
    S.in_machine_ranks = sorted(r for r in topology.predecessors(me) if r != me)
    S.out_machine_ranks = sorted(r for r in topology.successors(me) if r != me)
    return True


# ---- interactive control ------------------------------------------------------------------
def suspend() -> None:
    """Refuses new operations (ValueError) until resume(); running ones finish. Starling's
    progress thread already sleeps when idle, so this is only a guard for interactive
    sessions."""
    S.require_context()
    S.suspended, S.handle = True, None


def resume() -> None:
    """Undoes suspend(): operations are accepted again."""
    context = S.require_context()
    S.suspended, S.handle = False, context._handle


def set_skip_negotiate_stage(value: bool) -> None:
    """Kept for compatibility: Starling has no negotiation stage (operations run in
    submission order, and mismatches are still detected), so this only stores the flag."""
    if S.context is None:
        logger.error("set_skip_negotiate_stage: Starling has not been initialized; call init() first")
        return
    S.skip_negotiate_stage = bool(value)


def get_skip_negotiate_stage() -> bool:
    """The flag set_skip_negotiate_stage stored (Starling has no negotiation stage)."""
    return S.skip_negotiate_stage


# ---- timeline --------------------------------------------------------------------------------
def _timeline_off() -> bool:
    if not S.timeline_warned:
        S.timeline_warned = True
        logger.warning("the timeline is off: set STARLING_TIMELINE (or BLUEFOG_TIMELINE) to a file prefix")
    return False


def timeline_start_activity(tensor_name: str, activity_name: str) -> bool:
    """Starts activity_name on tensor_name's lane of the timeline (STARLING_TIMELINE or
    BLUEFOG_TIMELINE=<prefix>: <prefix><rank>.json); False when the timeline is off."""
    if not S.timeline_on:
        return _timeline_off()
    _core.timeline_start_activity(S.context._handle, tensor_name, activity_name)
    return True


def timeline_end_activity(tensor_name: str) -> bool:
    """Ends the activity started last on tensor_name's lane; False when the timeline is off."""
    if not S.timeline_on:
        return _timeline_off()
    _core.timeline_end_activity(S.context._handle, tensor_name)
    return True


@contextlib.contextmanager
def timeline_context(tensor_name: str, activity_name: str) -> Iterator[None]:
    """A context manager: timeline_start_activity on entry, timeline_end_activity on exit."""
    timeline_start_activity(tensor_name, activity_name)
    try:
        yield
    finally:
        timeline_end_activity(tensor_name)


# ---- handles ------------------------------------------------------------------------------
def poll(handle: int) -> bool:
    """True once the operation behind handle has finished."""
    return poll_handle(S.handles, handle)


def synchronize(handle: int) -> torch.Tensor:
    """Waits for the operation behind handle, releases the handle and returns its output
    (raising the operation's error, if any)."""
    return take_handle(S.handles, handle).wait()


wait = synchronize


def barrier() -> None:
    """Returns once every rank has entered the barrier."""
    _core.barrier(S.handle or S.require_handle())


# ---- allreduce, broadcast, allgather -------------------------------------------------------------
def _allreduce(tensor: torch.Tensor, output: Optional[torch.Tensor], average: bool, is_hierarchical_local: bool,
               name: Optional[str], nonblocking: bool) -> Any:
    h = S.handle or S.require_handle()
    cin = _capsule(tensor)
    if average:
        assert tensor.dtype in _FLOAT_DTYPES, "If average is set in allreduce, only float or double tensor is allowed."
    if name is not None:
        _check_name(name)
    if output is None:
        output = _empty_like(tensor)
        cout = _capsule(output)
    else:
        cout = cin
    op = _AVERAGE if average else _SUM
    if not nonblocking:
        (_c.local_allreduce if is_hierarchical_local else _c.allreduce)(h, cin, cout, op, name)
        return output
    request = (_core.local_allreduce_nonblocking if is_hierarchical_local else _core.allreduce_nonblocking)(
        h, cin, cout, op, name)
    return _register(Request(request, (tensor, cin, output, cout), None, output))


def _compressed(kind: int, tensor: torch.Tensor, output: Optional[torch.Tensor], op: int, args: tuple,
                enable_topo_check: bool, name: Optional[str], compression: Compression, nonblocking: bool) -> Any:
    """Compressed allreduce (kind 0) or CHOCO neighbor_allreduce (kind 1)."""
    h = S.handle or S.require_handle()
    _check_name(name)
    options = _compression_args(compression)
    cin = _capsule(tensor)
    if output is None:
        output = _empty_like(tensor)
        cout = _capsule(output)
    else:
        cout = cin
    use, sw, sources, dynamic, destinations = args
    request = _core.py_compressed(kind, h, cin, cout, op, *options, use, sw, sources, dynamic, destinations,
                                  int(bool(enable_topo_check) and dynamic), name, int(nonblocking))
    if not nonblocking:
        return output
    return _register(Request(request, (tensor, cin, output, cout), None, output))


def _compressed_allreduce(tensor: torch.Tensor, output: Optional[torch.Tensor], average: bool,
                          is_hierarchical_local: bool, name: Optional[str], compression: Compression,
                          nonblocking: bool) -> Any:
    if is_hierarchical_local:
        raise ValueError("compression is not available with is_hierarchical_local=True")
    if average:
        assert tensor.dtype in _FLOAT_DTYPES, "If average is set in allreduce, only float or double tensor is allowed."
    return _compressed(0, tensor, output, _AVERAGE if average else _SUM, _STATIC_DEFAULT, False, name, compression,
                       nonblocking)


def compression_reset(name: Optional[str] = None) -> None:
    """Drops the compression state (error-feedback residual, random-k step, CHOCO
    copies) kept under name, or under every name. Call it on every rank alike."""
    _check_name(name)
    _core.compression_reset(S.handle or S.require_handle(), name)


def allreduce(tensor: torch.Tensor, average: bool = True, is_hierarchical_local: bool = False,
              name: Optional[str] = None, compression: Optional[Compression] = None) -> torch.Tensor:
    """Average (or sum) of tensor over all ranks (over this machine's ranks with
    is_hierarchical_local), as a new tensor. compression (starling.compression.TopK(0.01,
    error_feedback=True), ...): see the README, "Compressed communication"."""
    if compression is not None:
        return _compressed_allreduce(tensor, None, average, is_hierarchical_local, name, compression, False)
    # _allreduce's blocking out-of-place case inline: the most common call, kept short.
    h = S.handle or S.require_handle()
    cin = _capsule(tensor)
    if average:
        assert tensor.dtype in _FLOAT_DTYPES, "If average is set in allreduce, only float or double tensor is allowed."
    if name is not None:
        _check_name(name)
    output = _empty_like(tensor)
    # The fresh output crosses as its data pointer (see py_allreduce_into).
    _c.py_allreduce_into(1 if is_hierarchical_local else 0, h, cin, output.data_ptr(), _AVERAGE if average else _SUM,
                         name)
    return output


def allreduce_nonblocking(tensor: torch.Tensor, average: bool = True, is_hierarchical_local: bool = False,
                          name: Optional[str] = None, compression: Optional[Compression] = None) -> int:
    """As allreduce, returning a handle for poll / synchronize / wait."""
    if compression is not None:
        return _compressed_allreduce(tensor, None, average, is_hierarchical_local, name, compression, True)
    return _allreduce(tensor, None, average, is_hierarchical_local, name, True)


def allreduce_(tensor: torch.Tensor, average: bool = True, is_hierarchical_local: bool = False,
               name: Optional[str] = None, compression: Optional[Compression] = None) -> torch.Tensor:
    """In-place allreduce: returns tensor."""
    if compression is not None:
        return _compressed_allreduce(tensor, tensor, average, is_hierarchical_local, name, compression, False)
    return _allreduce(tensor, tensor, average, is_hierarchical_local, name, False)


def allreduce_nonblocking_(tensor: torch.Tensor, average: bool = True, is_hierarchical_local: bool = False,
                           name: Optional[str] = None, compression: Optional[Compression] = None) -> int:
    """As ``allreduce_`` (in place), returning a handle for poll / synchronize / wait."""
    if compression is not None:
        return _compressed_allreduce(tensor, tensor, average, is_hierarchical_local, name, compression, True)
    return _allreduce(tensor, tensor, average, is_hierarchical_local, name, True)


def _broadcast(tensor: torch.Tensor, output: Optional[torch.Tensor], root_rank: int, name: Optional[str],
               nonblocking: bool) -> Any:
    h = S.handle or S.require_handle()
    _check_name(name)
    cin = _capsule(tensor)
    if output is None:
        output = _empty_like(tensor)
        cout = _capsule(output)
    else:
        cout = cin
    if not nonblocking:
        _core.broadcast(h, cin, cout, root_rank, name)
        return output
    request = _core.broadcast_nonblocking(h, cin, cout, root_rank, name)
    return _register(Request(request, (tensor, cin, output, cout), None, output))


def broadcast(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None) -> torch.Tensor:
    """root_rank's tensor on every rank, as a new tensor."""
    return _broadcast(tensor, None, root_rank, name, False)


def broadcast_nonblocking(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None) -> int:
    """As broadcast, returning a handle for poll / synchronize / wait."""
    return _broadcast(tensor, None, root_rank, name, True)


def broadcast_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None) -> torch.Tensor:
    """Broadcast in place: every rank's tensor becomes root_rank's; returns it."""
    return _broadcast(tensor, tensor, root_rank, name, False)


def broadcast_nonblocking_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None) -> int:
    """As ``broadcast_`` (in place), returning a handle for poll / synchronize / wait."""
    return _broadcast(tensor, tensor, root_rank, name, True)


def _allgather(tensor: torch.Tensor, name: Optional[str], nonblocking: bool) -> Any:
    h = S.handle or S.require_handle()
    _check_name(name)
    cin = _capsule(tensor)
    dims = torch.empty(S.context._size, dtype=torch.int64)
    _core.allgather_first_dims(h, cin, dims.numpy(), name)
    output = torch.empty((int(dims.sum()),) + tuple(tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    cout = _capsule(output)
    if not nonblocking:
        _core.allgather(h, cin, cout, None, name)
        return output
    request = _core.allgather_nonblocking(h, cin, cout, None, name)
    return _register(Request(request, (tensor, cin, output, cout), None, output))


def allgather(tensor: torch.Tensor, name: Optional[str] = None) -> torch.Tensor:
    """Every rank's tensor concatenated along dimension 0 in rank order (first
    dimensions may differ)."""
    return _allgather(tensor, name, False)


def allgather_nonblocking(tensor: torch.Tensor, name: Optional[str] = None) -> int:
    """As allgather; the first dimensions are exchanged before this returns."""
    return _allgather(tensor, name, True)


def reduce_scatter(tensor: torch.Tensor, op: str = "average", counts: Optional[List[int]] = None,
                   name: Optional[str] = None) -> torch.Tensor:
    """This rank's block (along dimension 0) of op ("average", "sum", "min", "max") over
    every rank's tensor: equal blocks, or counts[r] rows for rank r (the same list on
    every rank). A new tensor with tensor's other dimensions."""
    _check_name(name)
    return S.require_context().reduce_scatter(tensor, op, counts=counts, name=name)


def reduce_scatter_nonblocking(tensor: torch.Tensor, op: str = "average", counts: Optional[List[int]] = None,
                               name: Optional[str] = None) -> int:
    """As reduce_scatter, returning a handle for poll / synchronize / wait."""
    _check_name(name)
    return _register(S.require_context().reduce_scatter_nonblocking(tensor, op, counts=counts, name=name))


def alltoall(tensor: torch.Tensor, splits: Optional[List[int]] = None,
             name: Optional[str] = None) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Block q of tensor (along dimension 0) goes to rank q; returns the blocks every
    rank sent here, in rank order. Equal blocks, or splits[q] rows for rank q: then, as
    Horovod, (output, received_splits) with received_splits[q] the rows from rank q."""
    _check_name(name)
    context = S.require_context()
    if splits is None:
        return context.alltoall(tensor, name=name)
    splits = [int(v) for v in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
    received = context.alltoall_splits(splits)
    output = context.alltoall(tensor, splits=splits, recv_splits=received, name=name)
    return output, torch.tensor(received, dtype=torch.int64)


def alltoall_nonblocking(tensor: torch.Tensor, splits: Optional[List[int]] = None,
                         name: Optional[str] = None) -> int:
    """As alltoall (equal blocks, or splits; synchronize returns the output tensor); the
    received splits are learnt before this returns."""
    _check_name(name)
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    return _register(S.require_context().alltoall_nonblocking(tensor, splits=splits, name=name))


def new_group(ranks: List[int]) -> Optional[Context]:
    """A context over `ranks` (in that order: ranks[i] gets rank i), as
    torch.distributed.new_group: every rank calls it with the same list; members get a
    starling.Context (allreduce, reduce_scatter, alltoall, ... on its ranks; close it
    when done), the others None. Collective."""
    context = S.require_context()
    members = [int(r) for r in ranks]
    if len(set(members)) != len(members) or any(r < 0 or r >= context._size for r in members):
        raise ValueError(f"new_group: ranks must be distinct ranks in [0, {context._size}), got {list(ranks)}")
    me = context._rank
    return context.split(0 if me in members else None, members.index(me) if me in members else 0)


# ---- neighbor operations ----------------------------------------------------------------------
def _rank_list(ranks: Any, what: str) -> List[int]:
    try:
        return [int(r) for r in ranks]
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a list of ranks, got {ranks!r}") from None


def _neighbor_allgather(tensor: torch.Tensor, src_ranks: Any, dst_ranks: Any, enable_topo_check: bool,
                        name: Optional[str], nonblocking: bool) -> Any:
    h = S.handle or S.require_handle()
    if (src_ranks is None) != (dst_ranks is None):
        raise ValueError("Argument dst_ranks and src_ranks have to be presented at the same time")
    _check_name(name)
    dynamic = int(src_ranks is not None)
    if dynamic:
        src_ranks, dst_ranks = _rank_list(src_ranks, "src_ranks"), _rank_list(dst_ranks, "dst_ranks")
    cin = _capsule(tensor)
    dims = torch.empty(len(src_ranks) if dynamic else len(S.in_ranks), dtype=torch.int64)
    _core.py_neighbor_allgather_first_dims(h, cin, dims.numpy(), src_ranks, dynamic, dst_ranks,
                                           int(bool(enable_topo_check) and dynamic), name)
    output = torch.empty((int(dims.sum()),) + tuple(tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    cout = _capsule(output)
    request = _core.py_neighbor_allgather(h, cin, cout, None, src_ranks, dynamic, dst_ranks, 0, name,
                                          int(nonblocking))
    if not nonblocking:
        return output
    return _register(Request(request, (tensor, cin, output, cout), None, output))


def neighbor_allgather(tensor: torch.Tensor, *, src_ranks: Optional[List[int]] = None,
                       dst_ranks: Optional[List[int]] = None, enable_topo_check: bool = True,
                       name: Optional[str] = None) -> torch.Tensor:
    """The in-neighbors' tensors concatenated along dimension 0 (ascending rank), or with
    src_ranks and dst_ranks (dynamic) the src_ranks' tensors in the order given."""
    return _neighbor_allgather(tensor, src_ranks, dst_ranks, enable_topo_check, name, False)


def neighbor_allgather_nonblocking(tensor: torch.Tensor, *, src_ranks: Optional[List[int]] = None,
                                   dst_ranks: Optional[List[int]] = None, enable_topo_check: bool = True,
                                   name: Optional[str] = None) -> int:
    """As neighbor_allgather, returning a handle for poll / synchronize / wait."""
    return _neighbor_allgather(tensor, src_ranks, dst_ranks, enable_topo_check, name, True)


_STATIC_DEFAULT = (0, 0.0, None, 0, None)


def _check_weights(self_weight: Any, weights: Any, what: str) -> None:
    if not isinstance(weights, dict):
        raise ValueError(f"Argument {what} has to be a dictionary map from the (in-)neighbor rank to the weights.")
    if not isinstance(self_weight, float):
        raise ValueError("Argument self_weight has to be a float for self rank.")


def _destinations(dst_weights: Any, what: str) -> Any:
    if isinstance(dst_weights, dict):
        return dst_weights
    ranks = _rank_list(dst_weights, what)
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"Argument {what} should only contain the unique ranks.")
    return ranks


def _neighbor_args(self_weight: Any, src_weights: Any, dst_weights: Any) -> tuple:
    """(use_weights, self_weight, sources, dynamic, destinations) with BlueFog's checks."""
    if (self_weight is None) != (src_weights is None):
        raise ValueError("Arguments self_weight and src_weights have to be presented at the same time")
    if dst_weights is None:
        if self_weight is None:
            return _STATIC_DEFAULT
        _check_weights(self_weight, src_weights, "src_weights")
        in_ranks = S.in_ranks
        if not set(src_weights).issubset(in_ranks):
            raise ValueError("The key of weights should only contain the ranks that belong to in-neighbors and "
                             f"self rank (in-neighbors: {in_ranks}; use dst_weights for a dynamic topology).")
        # Uniform weights over every in-neighbor of an unweighted topology: take the
        # exact (x + sum) / (k + 1) path, bit-identical to BlueFog's.
        k = len(in_ranks)
        if (not S.is_weighted and len(src_weights) == k and math.isclose(self_weight, 1.0 / (k + 1))
                and all(math.isclose(w, self_weight) for w in src_weights.values())):
            return _STATIC_DEFAULT
        return 1, self_weight, src_weights, 0, None
    if self_weight is None:
        raise ValueError("Arguments self_weight and src_weights should be presented if enabling dynamic topology.")
    _check_weights(self_weight, src_weights, "src_weights")
    return 1, self_weight, src_weights, 1, _destinations(dst_weights, "dst_weights")


def _neighbor_allreduce(kind: int, tensor: torch.Tensor, args: tuple, enable_topo_check: bool,
                        name: Optional[str], nonblocking: bool) -> Any:
    h = S.handle or S.require_handle()
    if name is not None:
        _check_name(name)
    cin = _capsule(tensor)
    output = _empty_like(tensor)
    use, sw, sources, dynamic, destinations = args
    if not nonblocking:
        # The fresh output crosses as its data pointer (see py_neighbor_allreduce_into).
        _c.py_neighbor_allreduce_into(kind, h, cin, output.data_ptr(), use, sw, sources, dynamic, destinations,
                                      1 if dynamic and enable_topo_check else 0, name)
        return output
    cout = _capsule(output)
    request = _core.py_neighbor_allreduce(kind, h, cin, cout, use, sw, sources, dynamic, destinations,
                                          int(bool(enable_topo_check) and dynamic), name, 1)
    return _register(Request(request, (tensor, cin, output, cout), None, output))


def neighbor_allreduce(tensor: torch.Tensor, *, self_weight: Optional[float] = None,
                       src_weights: Optional[Dict[int, float]] = None,
                       dst_weights: Optional[Union[Dict[int, float], List[int]]] = None,
                       enable_topo_check: bool = True, name: Optional[str] = None,
                       compression: Optional[Compression] = None, **deprecated: Any) -> torch.Tensor:
    """self_weight * tensor + sum_j src_weights[j] * tensor_j, as a new tensor.

    Static topology (dst_weights None): over the in-neighbors, with the topology's
    weights if it was set weighted, else the uniform average, unless self_weight and
    src_weights (a subset of the in-neighbors; the others get 0) are given. Dynamic
    topology: send to dst_weights (a list, or {rank: weight} scaling what each
    receives) and receive from src_weights' ranks (any ranks); enable_topo_check
    verifies collectively that sends and receives match.

    compression (static topology; name required): CHOCO gossip over public copies kept
    per name, tensor + gamma * sum_j w_j (x_hat_j - x_hat_self); see the README."""
    if deprecated:
        _reject_keywords("neighbor_allreduce", deprecated, _NEIGHBOR_DEPRECATED)
    if compression is not None:
        return _compressed(1, tensor, None, 0, _neighbor_args(self_weight, src_weights, dst_weights),
                           enable_topo_check, name, compression, False)
    if self_weight is None and src_weights is None and dst_weights is None:
        # The common call inline, kept short (as allreduce's).
        h = S.handle or S.require_handle()
        if name is not None:
            _check_name(name)
        cin = _capsule(tensor)
        output = _empty_like(tensor)
        _c.py_neighbor_allreduce_static_into(h, cin, output.data_ptr(), name)
        return output
    return _neighbor_allreduce(0, tensor, _neighbor_args(self_weight, src_weights, dst_weights),
                               enable_topo_check, name, False)


def neighbor_allreduce_nonblocking(tensor: torch.Tensor, *, self_weight: Optional[float] = None,
                                   src_weights: Optional[Dict[int, float]] = None,
                                   dst_weights: Optional[Union[Dict[int, float], List[int]]] = None,
                                   enable_topo_check: bool = True, name: Optional[str] = None,
                                   compression: Optional[Compression] = None, **deprecated: Any) -> int:
    """As neighbor_allreduce, returning a handle for poll / synchronize / wait."""
    if deprecated:
        _reject_keywords("neighbor_allreduce_nonblocking", deprecated, _NEIGHBOR_DEPRECATED)
    if compression is not None:
        return _compressed(1, tensor, None, 0, _neighbor_args(self_weight, src_weights, dst_weights),
                           enable_topo_check, name, compression, True)
    return _neighbor_allreduce(0, tensor, _neighbor_args(self_weight, src_weights, dst_weights),
                               enable_topo_check, name, True)


def _hierarchical_args(self_weight: Any, src: Any, dst: Any) -> tuple:
    assert local_size() > 1, "If local size is 1, you should use neighbor allreduce directly."
    assert is_homogeneous(), "Only supports homogeneous environment now"
    given = [v is not None for v in (self_weight, src, dst)]
    if not any(given):
        if S.machine_topology is None:
            raise RuntimeError("Machine topology must be set before the use of hierarchical neighbor allreduce")
        return _STATIC_DEFAULT
    if not all(given):
        raise ValueError("Arguments self_weight, src_machine_weights, dst_machine_weights have to be presented at "
                         "the same time.")
    _check_weights(self_weight, src, "src_machine_weights")
    dst = _destinations(dst, "dst_machine_weights")
    if S.machine_topology is not None:
        if not set(src).issubset(S.in_machine_ranks):
            raise ValueError("The key of src_machine_weights should only contain the ranks that belong to "
                             f"in-neighbors (in-neighbor machines: {S.in_machine_ranks}).")
        if not set(dst).issubset(S.out_machine_ranks):
            raise ValueError("The key of dst_machine_weights should only contain the ranks that belong to "
                             f"out-neighbors and self rank (out-neighbor machines: {S.out_machine_ranks}).")
    return 1, self_weight, src, 1, dst


@_deprecated_arguments(neighbor_machine_weights="Use src_machine_weights instead",
                       send_neighbor_machines="Use dst_machine_weights instead")
def hierarchical_neighbor_allreduce(tensor: torch.Tensor, *, self_weight: Optional[float] = None,
                                    src_machine_weights: Optional[Dict[int, float]] = None,
                                    dst_machine_weights: Optional[Union[Dict[int, float], List[int]]] = None,
                                    enable_topo_check: bool = False, name: Optional[str] = None) -> torch.Tensor:
    """Average inside each machine, neighbor_allreduce between machines (weights keyed by
    machine id), result shared inside each machine: the weighted average of per-machine
    means. Static (no weights: the machine topology) or dynamic (all three given)."""
    return _neighbor_allreduce(1, tensor, _hierarchical_args(self_weight, src_machine_weights, dst_machine_weights),
                               enable_topo_check, name, False)


@_deprecated_arguments(neighbor_machine_weights="Use src_machine_weights instead",
                       send_neighbor_machines="Use dst_machine_weights instead")
def hierarchical_neighbor_allreduce_nonblocking(tensor: torch.Tensor, *, self_weight: Optional[float] = None,
                                                src_machine_weights: Optional[Dict[int, float]] = None,
                                                dst_machine_weights: Optional[Union[Dict[int, float],
                                                                                    List[int]]] = None,
                                                enable_topo_check: bool = False, name: Optional[str] = None) -> int:
    """As hierarchical_neighbor_allreduce, returning a handle for poll / synchronize / wait."""
    return _neighbor_allreduce(1, tensor, _hierarchical_args(self_weight, src_machine_weights, dst_machine_weights),
                               enable_topo_check, name, True)


def _pair_gossip(tensor: torch.Tensor, target_rank: int, self_weight: Any, pair_weight: Any, name: Optional[str],
                 nonblocking: bool) -> Any:
    h = S.handle or S.require_handle()
    if (self_weight is None) != (pair_weight is None):
        raise ValueError("self_weight and pair_weight have to be set at same time.")
    if self_weight is None:
        self_weight = pair_weight = 0.5
    _check_name(name)
    cin = _capsule(tensor)
    output = _empty_like(tensor)
    cout = _capsule(output)
    args = (h, cin, cout, target_rank, float(self_weight), float(pair_weight), name)
    if not nonblocking:
        _core.pair_gossip(*args)
        return output
    return _register(Request(_core.pair_gossip_nonblocking(*args), (tensor, cin, output, cout), None, output))


def pair_gossip(tensor: torch.Tensor, target_rank: int, self_weight: Optional[float] = None,
                pair_weight: Optional[float] = None, name: Optional[str] = None) -> torch.Tensor:
    """Averages with target_rank only (which calls it naming this rank):
    self_weight * tensor + pair_weight * target's tensor (default 0.5 and 0.5)."""
    return _pair_gossip(tensor, target_rank, self_weight, pair_weight, name, False)


def pair_gossip_nonblocking(tensor: torch.Tensor, target_rank: int, self_weight: Optional[float] = None,
                            pair_weight: Optional[float] = None, name: Optional[str] = None) -> int:
    """As pair_gossip, returning a handle for poll / synchronize / wait."""
    return _pair_gossip(tensor, target_rank, self_weight, pair_weight, name, True)


# Windows live in win_ops; BlueFog programs also reach them as bf.mpi_ops.<name>.
from .win_ops import *  # noqa: E402,F401,F403
from .win_ops import __all__ as _win_names  # noqa: E402

__all__ = [
    "init", "is_initialized", "shutdown", "abort", "repair", "grow", "shrink", "resize", "joined", "fault_tolerant", "size", "local_size", "rank", "local_rank", "machine_size", "machine_rank",
    "load_topology", "set_topology", "load_machine_topology", "set_machine_topology",
    "in_neighbor_ranks", "out_neighbor_ranks", "in_neighbor_machine_ranks", "out_neighbor_machine_ranks",
    "mpi_threads_supported", "unified_mpi_window_model_supported", "nccl_built", "is_homogeneous",
    "is_topo_weighted", "is_machine_topo_weighted", "suspend", "resume", "link_latencies",
    "allreduce", "allreduce_nonblocking", "allreduce_", "allreduce_nonblocking_",
    "allgather", "allgather_nonblocking",
    "reduce_scatter", "reduce_scatter_nonblocking", "alltoall", "alltoall_nonblocking", "new_group",
    "broadcast", "broadcast_nonblocking", "broadcast_", "broadcast_nonblocking_",
    "neighbor_allgather", "neighbor_allgather_nonblocking", "neighbor_allreduce", "neighbor_allreduce_nonblocking",
    "hierarchical_neighbor_allreduce", "hierarchical_neighbor_allreduce_nonblocking",
    "pair_gossip", "pair_gossip_nonblocking", "poll", "synchronize", "wait", "barrier", "compression_reset",
    "set_skip_negotiate_stage", "get_skip_negotiate_stage",
    "timeline_start_activity", "timeline_end_activity", "timeline_context",
] + list(_win_names)
