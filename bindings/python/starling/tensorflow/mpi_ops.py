"""BlueFog's TensorFlow operations (bluefog.tensorflow.mpi_ops) over Starling, plus the
neighbor operations BlueFog's TensorFlow side lacks.

Every operation goes through the core starling.Context, which takes TensorFlow tensors
through DLPack (starling._tensors.TensorflowAdapter): the input is read in place, the
result is a fresh 64-byte-aligned buffer that TensorFlow adopts without a copy. In eager
mode an operation is a direct call; inside tf.function (a graph) it is one
tf.py_function op, which runs the same eager call when the graph executes. py_function
ops are stateful, so tf.function keeps them in program order on every rank, as
collectives need.
"""

import atexit
import itertools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import networkx as nx
import tensorflow as tf

from .. import _logging
from .. import context as _context_module
from .. import topology_util
from .._graph_topology import set_graph_topology
from ..context import Context
from ..errors import InvalidUsageError, UnsupportedError
from ..request import Request, poll_handle, take_handle

logger = _logging.logger

# TensorFlow dtypes Starling exchanges (bfloat16 has no NumPy dtype to hold a result).
_DTYPES = frozenset((tf.float16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8))
_FLOATS = frozenset((tf.float16, tf.float32, tf.float64))


class _State:
    context: Any = None        # the starling.Context, from init() to shutdown()
    shut_down = False
    topology: Any = None       # the networkx graph last set
    is_weighted = False
    in_ranks: List[int] = []
    out_ranks: List[int] = []
    handles: Dict[int, Request] = {}  # the nonblocking forms' requests, by handle
    next_handle = itertools.count(1).__next__


S = _State()


def _ctx() -> Context:
    if S.context is None:
        if S.shut_down:
            raise InvalidUsageError("Starling was shut down in this process; MPI cannot be restarted, so call "
                                    "init() once per process and shutdown() at the end.")
        raise InvalidUsageError("Starling has not been initialized; call starling.tensorflow.init() first.")
    return S.context


# ---- init, shutdown and layout ---------------------------------------------------------------
def init(topology_fn: Optional[Callable[[int], nx.DiGraph]] = None, is_weighted: bool = False) -> None:
    """Starts Starling (collective, once per process) and sets the topology:
    topology_fn(size()) or the exponential-2 graph. Later calls without a topology do
    nothing; with one they set it again (collective)."""
    if S.context is not None and topology_fn is None:
        return
    if S.context is None:
        if S.shut_down:
            _ctx()  # raises: shut down for good
        S.context = Context()
        _logging.configure(S.context.rank)
        atexit.register(_shutdown_at_exit)
    set_topology(topology_fn(size()) if topology_fn is not None else topology_util.ExponentialGraph(size()),
                 is_weighted)


def is_initialized() -> bool:
    return S.context is not None


def shutdown() -> None:
    """Stops Starling (collective); it cannot be initialized again in this process."""
    if S.context is None:
        return
    context, S.context, S.shut_down = S.context, None, True
    S.topology, S.in_ranks, S.out_ranks, S.handles = None, [], [], {}
    context.close()


def _shutdown_at_exit() -> None:
    """As starling.torch: after an uncaught exception the other ranks are told and the
    context is left locally (a collective shutdown would wait for them forever)."""
    reason = _context_module.exit_reason()
    if reason is not None and S.context is not None:
        try:
            S.context.abandon(f"is exiting: {reason}")
        except Exception:
            pass
    shutdown()


def size() -> int:
    return _ctx().size


def rank() -> int:
    return _ctx().rank


def local_size() -> int:
    return _ctx().local_size


def local_rank() -> int:
    return _ctx().local_rank


def machine_size() -> int:
    return _ctx().machine_size


def machine_rank() -> int:
    return _ctx().machine_rank


def mpi_threads_supported() -> bool:
    """True: Starling's progress thread makes every call thread-safe."""
    _ctx()
    return True


def set_topology(topology: Optional[nx.DiGraph] = None, is_weighted: bool = False) -> bool:
    """Sets the graph neighbor operations use (None: the exponential-2 graph). Collective:
    every rank passes the same graph. Returns False, keeping the old topology, when the
    ranks passed different graphs."""
    return set_graph_topology(_ctx(), S, topology, is_weighted)


def load_topology() -> Optional[nx.DiGraph]:
    return S.topology


def is_topo_weighted() -> bool:
    return S.is_weighted


def in_neighbor_ranks() -> List[int]:
    _ctx()
    return list(S.in_ranks)


def out_neighbor_ranks() -> List[int]:
    _ctx()
    return list(S.out_ranks)


def barrier() -> None:
    _ctx().barrier()


# ---- tensors -----------------------------------------------------------------------------------
def _tensor(tensor: Any, function: str) -> tf.Tensor:
    """tensor as a tf.Tensor of a dtype Starling exchanges (a Variable: its value). The
    dtype is checked before anything reaches DLPack: TensorFlow's to_dlpack aborts the
    process on a string tensor."""
    if isinstance(tensor, tf.IndexedSlices):
        raise ValueError(f"{function}: sparse tf.IndexedSlices are not supported; convert with "
                         "tf.convert_to_tensor first")
    if not isinstance(tensor, tf.Tensor):
        try:
            tensor = tf.convert_to_tensor(tensor)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{function}: expected a TensorFlow tensor, got {type(tensor).__name__} ({e})") from None
    if tensor.dtype not in _DTYPES:
        raise UnsupportedError(f"{function}: TensorFlow tensor of dtype {tensor.dtype.name} cannot be exchanged; "
                               "Starling takes float16, float32, float64, int8, int16, int32, int64 and uint8 "
                               "(cast bfloat16 to float32, encode strings first)")
    return tensor


def _run(eager: Callable[[tf.Tensor], tf.Tensor], tensor: tf.Tensor, same_shape: bool = True) -> tf.Tensor:
    """eager(tensor) now, or inside a graph as one tf.py_function op."""
    if tf.executing_eagerly():
        return eager(tensor)
    result = tf.py_function(eager, [tensor], Tout=tensor.dtype)
    result.set_shape(tensor.shape if same_shape else tf.TensorShape([None]).concatenate(tensor.shape[1:]))
    return result


def _check_name(name: Any) -> None:
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")


# ---- allreduce, broadcast, allgather -------------------------------------------------------------
def _allreduce_args(tensor: Any, average: bool, name: Optional[str], function: str) -> Tuple[tf.Tensor, str]:
    tensor = _tensor(tensor, function)
    _check_name(name)
    if average and tensor.dtype not in _FLOATS:
        raise UnsupportedError(f"{function}: average=True needs a floating-point tensor, got {tensor.dtype.name}; "
                               "use average=False for integers")
    return tensor, "average" if average else "sum"


def allreduce(tensor: Any, average: bool = True, name: Optional[str] = None, device: str = "") -> tf.Tensor:
    """The average (or with average=False the sum) of tensor over every rank, as a new
    tensor. The shape and dtype must agree on every rank (else MismatchError on every
    rank). device is accepted for BlueFog's signature; CPU tensors only."""
    tensor, op = _allreduce_args(tensor, average, name, "allreduce")
    context = _ctx()
    return _run(lambda t: context.allreduce(t, op, name=name), tensor)


def allreduce_nonblocking(tensor: Any, average: bool = True, name: Optional[str] = None, device: str = "") -> int:
    """As allreduce, started now; returns a handle for poll / synchronize (eager mode)."""
    tensor, op = _allreduce_args(tensor, average, name, "allreduce_nonblocking")
    return _handle(lambda: _ctx().allreduce_nonblocking(tensor, op, name=name), "allreduce_nonblocking")


def broadcast(tensor: Any, root_rank: int, name: Optional[str] = None) -> tf.Tensor:
    """root_rank's tensor, on every rank, as a new tensor."""
    tensor = _tensor(tensor, "broadcast")
    _check_name(name)
    context, root = _ctx(), int(root_rank)
    return _run(lambda t: context.broadcast(t, root, name=name), tensor)


def broadcast_nonblocking(tensor: Any, root_rank: int, name: Optional[str] = None) -> int:
    """As broadcast, started now; returns a handle for poll / synchronize (eager mode)."""
    tensor = _tensor(tensor, "broadcast_nonblocking")
    _check_name(name)
    root = int(root_rank)
    return _handle(lambda: _ctx().broadcast_nonblocking(tensor, root, name=name), "broadcast_nonblocking")


def allgather(tensor: Any, name: Optional[str] = None) -> tf.Tensor:
    """Every rank's tensor concatenated along dimension 0 in rank order (the first
    dimensions may differ, the others must agree)."""
    tensor = _tensor(tensor, "allgather")
    _check_name(name)
    context = _ctx()
    return _run(lambda t: context.allgather(t, name=name), tensor, same_shape=False)


def allgather_nonblocking(tensor: Any, name: Optional[str] = None) -> int:
    """As allgather, started now; returns a handle for poll / synchronize (eager mode)."""
    tensor = _tensor(tensor, "allgather_nonblocking")
    _check_name(name)
    return _handle(lambda: _ctx().allgather_nonblocking(tensor, name=name), "allgather_nonblocking")


# ---- handles of the nonblocking forms ------------------------------------------------------------
def _handle(start: Callable[[], Request], function: str) -> int:
    """Starts an operation (eager mode only) and returns the handle it is kept under."""
    if not tf.executing_eagerly():
        raise InvalidUsageError(f"{function} runs eagerly only: inside tf.function use the blocking form, which "
                                "the graph runs as one op")
    handle = S.next_handle()
    S.handles[handle] = start()
    return handle


def poll(handle: int) -> bool:
    """True once the operation behind handle has finished."""
    return poll_handle(S.handles, handle)


def synchronize(handle: int) -> tf.Tensor:
    """Waits for the operation behind handle, releases the handle and returns its result
    as a new tensor (raising the operation's error, if any)."""
    return take_handle(S.handles, handle).wait()


wait = synchronize


# ---- neighbor operations (BlueFog's torch semantics) --------------------------------------------
def _neighbor_allreduce_args(tensor: Any, self_weight: Optional[float], src_weights: Optional[Dict[int, float]],
                             dst_weights: Any, enable_topo_check: bool, name: Optional[str],
                             function: str) -> Tuple[tf.Tensor, Dict[str, Any]]:
    tensor = _tensor(tensor, function)
    _check_name(name)
    if (self_weight is None) != (src_weights is None):
        raise ValueError("Arguments self_weight and src_weights have to be presented at the same time")
    if dst_weights is not None and self_weight is None:
        raise ValueError("Arguments self_weight and src_weights should be presented if enabling dynamic topology.")
    if self_weight is not None and dst_weights is None and not set(src_weights).issubset(S.in_ranks):
        raise ValueError("The key of weights should only contain the ranks that belong to in-neighbors and self "
                         f"rank (in-neighbors: {S.in_ranks}; use dst_weights for a dynamic topology).")
    if tensor.dtype not in _FLOATS:
        raise UnsupportedError(f"{function} needs a floating-point tensor, got {tensor.dtype.name}")
    check = bool(enable_topo_check) and dst_weights is not None
    return tensor, dict(self_weight=self_weight, src_weights=src_weights, dst_weights=dst_weights,
                        check_topology=check, name=name)


def neighbor_allreduce(tensor: Any, *, self_weight: Optional[float] = None,
                       src_weights: Optional[Dict[int, float]] = None,
                       dst_weights: Optional[Union[Dict[int, float], List[int]]] = None,
                       enable_topo_check: bool = True, name: Optional[str] = None) -> tf.Tensor:
    """self_weight * tensor + sum_j src_weights[j] * tensor_j, as a new tensor.

    Static topology (dst_weights None): over the in-neighbors, with the topology's
    weights if it was set weighted, else the uniform average, unless self_weight and
    src_weights (in-neighbors only) are given. Dynamic: send to dst_weights (a list, or
    {rank: weight} scaling what each receives), receive from src_weights' ranks;
    enable_topo_check verifies collectively that sends and receives match."""
    tensor, args = _neighbor_allreduce_args(tensor, self_weight, src_weights, dst_weights, enable_topo_check, name,
                                            "neighbor_allreduce")
    context = _ctx()
    return _run(lambda t: context.neighbor_allreduce(t, **args), tensor)


def neighbor_allreduce_nonblocking(tensor: Any, *, self_weight: Optional[float] = None,
                                   src_weights: Optional[Dict[int, float]] = None,
                                   dst_weights: Optional[Union[Dict[int, float], List[int]]] = None,
                                   enable_topo_check: bool = True, name: Optional[str] = None) -> int:
    """As neighbor_allreduce, started now; returns a handle for poll / synchronize (eager mode)."""
    tensor, args = _neighbor_allreduce_args(tensor, self_weight, src_weights, dst_weights, enable_topo_check, name,
                                            "neighbor_allreduce_nonblocking")
    return _handle(lambda: _ctx().neighbor_allreduce_nonblocking(tensor, **args), "neighbor_allreduce_nonblocking")


def _neighbor_allgather_args(tensor: Any, src_ranks: Optional[Sequence[int]], dst_ranks: Optional[Sequence[int]],
                             enable_topo_check: bool, name: Optional[str],
                             function: str) -> Tuple[tf.Tensor, Dict[str, Any]]:
    tensor = _tensor(tensor, function)
    _check_name(name)
    if (src_ranks is None) != (dst_ranks is None):
        raise ValueError("Argument dst_ranks and src_ranks have to be presented at the same time")
    check = bool(enable_topo_check) and src_ranks is not None
    return tensor, dict(src_ranks=src_ranks, dst_ranks=dst_ranks, check_topology=check, name=name)


def neighbor_allgather(tensor: Any, *, src_ranks: Optional[Sequence[int]] = None,
                       dst_ranks: Optional[Sequence[int]] = None, enable_topo_check: bool = True,
                       name: Optional[str] = None) -> tf.Tensor:
    """The in-neighbors' tensors concatenated along dimension 0 (ascending rank), or
    with src_ranks and dst_ranks (dynamic) the src_ranks' tensors in the order given."""
    tensor, args = _neighbor_allgather_args(tensor, src_ranks, dst_ranks, enable_topo_check, name,
                                            "neighbor_allgather")
    context = _ctx()
    return _run(lambda t: context.neighbor_allgather(t, **args), tensor, same_shape=False)


def neighbor_allgather_nonblocking(tensor: Any, *, src_ranks: Optional[Sequence[int]] = None,
                                   dst_ranks: Optional[Sequence[int]] = None, enable_topo_check: bool = True,
                                   name: Optional[str] = None) -> int:
    """As neighbor_allgather, started now; returns a handle for poll / synchronize (eager mode)."""
    tensor, args = _neighbor_allgather_args(tensor, src_ranks, dst_ranks, enable_topo_check, name,
                                            "neighbor_allgather_nonblocking")
    return _handle(lambda: _ctx().neighbor_allgather_nonblocking(tensor, **args), "neighbor_allgather_nonblocking")


# ---- groups of tensors (the optimizers): one call, one order on every rank -------------------------
def _average_eager(tensors: Sequence[tf.Tensor]) -> List[tf.Tensor]:
    context = _ctx()
    requests = [context.allreduce_nonblocking(t, "average") for t in tensors]
    return [r.wait() for r in requests]


def average_group(tensors: Sequence[Any]) -> List[Any]:
    """Every tensor averaged over every rank (None stays None), all in flight together.
    Inside a graph: one tf.py_function op for the whole group, so the order of the
    operations is the same on every rank."""
    present = [i for i, t in enumerate(tensors) if t is not None]
    values = [_tensor(tensors[i], "average_group") for i in present]
    for v in values:
        if v.dtype not in _FLOATS:
            raise UnsupportedError(f"average_group: averaging needs floating-point tensors, got {v.dtype.name}")
    if not values:
        return list(tensors)
    if tf.executing_eagerly():
        averaged = _average_eager(values)
    else:
        averaged = tf.py_function(lambda *ts: _average_eager(ts), values, Tout=[v.dtype for v in values])
        for a, v in zip(averaged, values):
            a.set_shape(v.shape)
    result = list(tensors)
    for i, a in zip(present, averaged):
        result[i] = a
    return result
