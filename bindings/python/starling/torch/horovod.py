"""Horovod's PyTorch API (horovod.torch) over Starling: ``import starling.torch as hvd``.

BlueFog's API lives in the same namespace; where both define a name the function takes
both forms (docs/tutorials/torch-distributed-and-horovod.md):

- allreduce / allreduce_ / allreduce_nonblocking(_): BlueFog's positional order
  (tensor, average, is_hierarchical_local, name, compression) plus Horovod's keywords
  op=, prescale_factor=, postscale_factor=, process_set=; compression= takes a Horovod
  compressor (hvd.Compression.none / fp16) or a starling.compression one.
- allgather, broadcast(_): the same semantics in both; process_set= added.
- synchronize, poll, broadcast_parameters, broadcast_optimizer_state: BlueFog took
  them from Horovod unchanged.

What Starling does not have raises UnsupportedError naming it: op=Adasum, hvd.elastic,
SyncBatchNorm.
"""

import pickle
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..context import Context
from ..errors import UnsupportedError
from . import _collectives as C
from . import _state as S
from . import mpi_ops

# ---- reduction ops (Horovod's constants) --------------------------------------------------
Average, Sum, Adasum, Min, Max, Product = "average", "sum", "adasum", "min", "max", "product"
_OPS = (Average, Sum, Min, Max, Product)


def _op(op: Any, average: Optional[bool]) -> str:
    if op is None:
        return Sum if average is False else Average
    if op == Adasum:
        raise UnsupportedError("op=Adasum is not available in Starling; use op=hvd.Average, or a decentralized "
                               "optimizer (starling.torch.DistributedNeighborAllreduceOptimizer)")
    if op not in _OPS:
        raise ValueError(f"op must be one of hvd.Average, Sum, Min, Max, Product; got {op!r}")
    return op


# ---- layout and build queries ----------------------------------------------------------------
def is_initialized() -> bool:
    """True between init() and shutdown()."""
    return S.context is not None


def cross_rank() -> int:
    """This rank's machine among the machines (Horovod's cross rank)."""
    return mpi_ops.machine_rank()


def cross_size() -> int:
    """The number of machines (Horovod's cross size)."""
    return mpi_ops.machine_size()


def mpi_built() -> bool:
    """True: Starling runs over MPI."""
    return True


def mpi_enabled() -> bool:
    """True: Starling runs over MPI."""
    return True


def gloo_built() -> bool:
    """False: Starling has no Gloo controller."""
    return False


def gloo_enabled() -> bool:
    """False: Starling has no Gloo controller."""
    return False


def ccl_built() -> bool:
    """False: Starling has no oneCCL support."""
    return False


def ddl_built() -> bool:
    """False: Starling has no IBM DDL support."""
    return False


def rocm_built() -> bool:
    """False: Starling has no ROCm support."""
    return False


# ---- compression (Horovod's compressors) -----------------------------------------------------------
class NoneCompressor:
    """Tensors travel as they are (Horovod's Compression.none)."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> Tuple[torch.Tensor, Any]:
        """(tensor, None): nothing to undo."""
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """tensor itself."""
        return tensor


class FP16Compressor:
    """Floating tensors travel as float16 and come back in their own dtype."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> Tuple[torch.Tensor, Any]:
        """(float16 copy, original dtype) for floating tensors; others as they are."""
        if tensor.dtype.is_floating_point:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """tensor back in the dtype compress() recorded."""
        return tensor.to(ctx) if ctx is not None else tensor


class Compression:
    """hvd.Compression.none / hvd.Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor


def _horovod_compressor(compression: Any) -> bool:
    return isinstance(compression, type) and issubclass(compression, (NoneCompressor, FP16Compressor))


# ---- process sets ----------------------------------------------------------------------------------
class ProcessSet:
    """A subset of ranks (Horovod's process set). Operations given process_set= run
    over its members only, in a Starling context of their own."""

    def __init__(self, ranks: Optional[Sequence[int]] = None) -> None:
        self.ranks = None if ranks is None else sorted(int(r) for r in ranks)
        self.context: Optional[Context] = None
        self.process_set_id: Optional[int] = None

    def _require(self) -> Context:
        if self.ranks is None:
            return S.require_context()
        if self.process_set_id is None:
            raise ValueError(f"process set {self.ranks} was not added: call hvd.add_process_set on every rank first")
        if self.context is None:
            raise ValueError(f"rank {mpi_ops.rank()} is not in process set {self.ranks}")
        return self.context

    def included(self) -> bool:
        """Whether this rank is a member."""
        return self.ranks is None or mpi_ops.rank() in self.ranks

    def size(self) -> int:
        """The number of members."""
        return mpi_ops.size() if self.ranks is None else len(self.ranks)

    def rank(self) -> int:
        """This rank's place among the members."""
        return mpi_ops.rank() if self.ranks is None else self.ranks.index(mpi_ops.rank())

    def __repr__(self) -> str:
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet()
global_process_set.process_set_id = 0
_process_sets: Dict[int, ProcessSet] = {0: global_process_set}


def add_process_set(process_set: Any) -> ProcessSet:
    """Registers a process set (a ProcessSet or a list of ranks). Collective: every rank
    calls it, with the same ranks."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.ranks is None or ps.ranks == list(range(mpi_ops.size())):
        raise ValueError("a process set over every rank is hvd.global_process_set")
    world = S.require_context()
    ps.context = C.group_context(world, ps.ranks)
    ps.process_set_id = max(_process_sets) + 1
    _process_sets[ps.process_set_id] = ps
    return ps


def remove_process_set(process_set: ProcessSet) -> bool:
    """Unregisters a process set (collective over its members)."""
    if process_set.process_set_id in (None, 0):
        return False
    _process_sets.pop(process_set.process_set_id, None)
    if process_set.context is not None:
        process_set.context.close()
    process_set.context, process_set.process_set_id = None, None
    return True


# ---- allreduce ---------------------------------------------------------------------------------------
def _is_horovod_call(op: Any, prescale: float, postscale: float, process_set: Any, compression: Any) -> bool:
    return (op is not None or prescale != 1.0 or postscale != 1.0 or process_set is not global_process_set
            or _horovod_compressor(compression))


def _start_allreduce(tensor: torch.Tensor, average: Optional[bool], op: Any, prescale: float, postscale: float,
                     process_set: ProcessSet, compression: Any, name: Optional[str]) -> C.Pending:
    """Horovod's allreduce, started; its Pending returns the result (a new tensor)."""
    op = _op(op, average)
    ctx = process_set._require()
    compressor = compression if _horovod_compressor(compression) else NoneCompressor
    source = tensor * prescale if prescale != 1.0 else tensor
    wire, state = compressor.compress(source.contiguous())
    if op == Product:
        gathered = ctx.allgather_nonblocking(wire.reshape(1, -1), name=name)
        reduced = C.Pending(None, lambda: torch.prod(gathered.wait(), dim=0).reshape(wire.shape))
    else:
        if op == Average and not wire.dtype.is_floating_point:
            raise TypeError(f"op=Average needs a floating-point tensor, got {wire.dtype} (use op=hvd.Sum)")
        reduced = C.Pending(ctx.allreduce_nonblocking(wire, op, name=name))

    def finish() -> torch.Tensor:
        result = compressor.decompress(reduced.wait(), state)
        return result * postscale if postscale != 1.0 else result
    return C.Pending(None, finish)


def _register(pending: C.Pending) -> int:
    """A handle for synchronize()/poll(): the operation completes in synchronize()."""
    handle = S.next_handle()
    S.handles[handle] = _Handle(pending)
    return handle


class _Handle:
    """A Starling request-like wrapper around a Pending (poll() is True once waited or
    once its Starling request is done)."""

    def __init__(self, pending: C.Pending) -> None:
        self._pending = pending

    def done(self) -> bool:
        request = self._pending._request
        return self._pending._done or (request is not None and request.done())

    def wait(self) -> Any:
        return self._pending.wait()


def allreduce(tensor: torch.Tensor, average: Optional[bool] = None, is_hierarchical_local: bool = False,
              name: Optional[str] = None, compression: Any = None, op: Any = None, prescale_factor: float = 1.0,
              postscale_factor: float = 1.0, process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """BlueFog's allreduce (average by default) and Horovod's (op=hvd.Average|Sum|Min|
    Max|Product, pre/postscale, process_set, hvd.Compression), as a new tensor."""
    if not _is_horovod_call(op, prescale_factor, postscale_factor, process_set, compression):
        return mpi_ops.allreduce(tensor, average is not False, is_hierarchical_local, name, compression)
    return _start_allreduce(tensor, average, op, prescale_factor, postscale_factor, process_set, compression,
                            name).wait()


def allreduce_(tensor: torch.Tensor, average: Optional[bool] = None, is_hierarchical_local: bool = False,
               name: Optional[str] = None, compression: Any = None, op: Any = None, prescale_factor: float = 1.0,
               postscale_factor: float = 1.0, process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """In place: returns tensor."""
    if not _is_horovod_call(op, prescale_factor, postscale_factor, process_set, compression):
        return mpi_ops.allreduce_(tensor, average is not False, is_hierarchical_local, name, compression)
    result = _start_allreduce(tensor, average, op, prescale_factor, postscale_factor, process_set, compression,
                              name).wait()
    return tensor.copy_(result)


def allreduce_nonblocking(tensor: torch.Tensor, average: Optional[bool] = None, is_hierarchical_local: bool = False,
                          name: Optional[str] = None, compression: Any = None, op: Any = None,
                          prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                          process_set: ProcessSet = global_process_set) -> int:
    """As ``allreduce``, nonblocking: returns a handle for ``synchronize()``/``poll()``."""
    if not _is_horovod_call(op, prescale_factor, postscale_factor, process_set, compression):
        return mpi_ops.allreduce_nonblocking(tensor, average is not False, is_hierarchical_local, name, compression)
    return _register(_start_allreduce(tensor, average, op, prescale_factor, postscale_factor, process_set,
                                      compression, name))


def allreduce_nonblocking_(tensor: torch.Tensor, average: Optional[bool] = None,
                           is_hierarchical_local: bool = False, name: Optional[str] = None, compression: Any = None,
                           op: Any = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                           process_set: ProcessSet = global_process_set) -> int:
    """As ``allreduce_``, nonblocking (in place): returns a handle for ``synchronize()``/``poll()``."""
    if not _is_horovod_call(op, prescale_factor, postscale_factor, process_set, compression):
        return mpi_ops.allreduce_nonblocking_(tensor, average is not False, is_hierarchical_local, name, compression)
    started = _start_allreduce(tensor, average, op, prescale_factor, postscale_factor, process_set, compression,
                               name)
    return _register(C.Pending(None, lambda: tensor.copy_(started.wait())))


def allreduce_async(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
                    op: Any = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                    process_set: ProcessSet = global_process_set) -> int:
    """Horovod's allreduce_async: a handle for synchronize(); op defaults to Average."""
    return allreduce_nonblocking(tensor, average, False, name, None, op if op is not None else
                                 (Sum if average is False else Average), prescale_factor, postscale_factor,
                                 process_set)


def allreduce_async_(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
                     op: Any = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                     process_set: ProcessSet = global_process_set) -> int:
    """Horovod's ``allreduce_async_`` (in place): a handle for ``synchronize()``."""
    return allreduce_nonblocking_(tensor, average, False, name, None, op if op is not None else
                                  (Sum if average is False else Average), prescale_factor, postscale_factor,
                                  process_set)


def grouped_allreduce(tensors: List[torch.Tensor], average: Optional[bool] = None, name: Optional[str] = None,
                      compression: Any = Compression.none, op: Any = None, prescale_factor: float = 1.0,
                      postscale_factor: float = 1.0, process_set: ProcessSet = global_process_set
                      ) -> List[torch.Tensor]:
    """Every tensor reduced as by allreduce; started together (Starling fuses them)."""
    return [p.wait() for p in [_start_allreduce(t, average, op, prescale_factor, postscale_factor, process_set,
                                                compression, None) for t in tensors]]


def grouped_allreduce_(tensors: List[torch.Tensor], average: Optional[bool] = None, name: Optional[str] = None,
                       op: Any = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                       process_set: ProcessSet = global_process_set) -> List[torch.Tensor]:
    """As grouped_allreduce, in place."""
    results = grouped_allreduce(tensors, average, name, Compression.none, op, prescale_factor, postscale_factor,
                                process_set)
    return [t.copy_(r) for t, r in zip(tensors, results)]


def grouped_allreduce_async(tensors: List[torch.Tensor], average: Optional[bool] = None, name: Optional[str] = None,
                            op: Any = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                            process_set: ProcessSet = global_process_set) -> int:
    """As grouped_allreduce, nonblocking: a handle whose synchronize() gives the list."""
    started = [_start_allreduce(t, average, op, prescale_factor, postscale_factor, process_set, Compression.none,
                                None) for t in tensors]
    return _register(C.Pending(None, lambda: [p.wait() for p in started]))


# ---- allgather, broadcast ----------------------------------------------------------------------------
def allgather(tensor: torch.Tensor, name: Optional[str] = None,
              process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """Every rank's tensor concatenated along dimension 0 (first dimensions may differ)."""
    if process_set is global_process_set:
        return mpi_ops.allgather(tensor, name)
    return process_set._require().allgather(tensor, name=name)


def allgather_async(tensor: torch.Tensor, name: Optional[str] = None,
                    process_set: ProcessSet = global_process_set) -> int:
    """As allgather, nonblocking: a handle for synchronize()."""
    if process_set is global_process_set:
        return mpi_ops.allgather_nonblocking(tensor, name)
    return _register(C.Pending(process_set._require().allgather_nonblocking(tensor, name=name)))


def grouped_allgather(tensors: List[torch.Tensor], name: Optional[str] = None,
                      process_set: ProcessSet = global_process_set) -> List[torch.Tensor]:
    """allgather of every tensor, in order."""
    return [allgather(t, None, process_set) for t in tensors]


def broadcast(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
              process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """root_rank's tensor (root_rank is a rank of process_set), as a new tensor."""
    if process_set is global_process_set:
        return mpi_ops.broadcast(tensor, root_rank, name)
    return process_set._require().broadcast(tensor, root_rank, name=name)


def broadcast_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
               process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """As broadcast, in place."""
    if process_set is global_process_set:
        return mpi_ops.broadcast_(tensor, root_rank, name)
    return tensor.copy_(process_set._require().broadcast(tensor, root_rank, name=name))


def broadcast_async(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
                    process_set: ProcessSet = global_process_set) -> int:
    """As broadcast, nonblocking: a handle for synchronize()."""
    if process_set is global_process_set:
        return mpi_ops.broadcast_nonblocking(tensor, root_rank, name)
    return _register(C.Pending(process_set._require().broadcast_nonblocking(tensor, root_rank, name=name)))


def broadcast_async_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> int:
    """As ``broadcast_``, nonblocking (in place): a handle for ``synchronize()``."""
    if process_set is global_process_set:
        return mpi_ops.broadcast_nonblocking_(tensor, root_rank, name)
    ctx = process_set._require()
    return _register(C.Pending(ctx.broadcast_nonblocking(tensor, root_rank, out=tensor, name=name)))


# ---- alltoall, reducescatter ---------------------------------------------------------------------------
def alltoall(tensor: torch.Tensor, splits: Optional[Any] = None, name: Optional[str] = None,
             process_set: ProcessSet = global_process_set) -> Any:
    """Rows of tensor (dimension 0) go to the ranks: splits[q] rows to rank q (None:
    equal parts). Returns the rows received, in rank order, and with splits given also
    the number received from each rank (Horovod's (output, received_splits))."""
    if process_set is global_process_set:
        return mpi_ops.alltoall(tensor, splits, name)  # the native one (same semantics)
    ctx = process_set._require()
    if splits is None:
        return ctx.alltoall(tensor.contiguous(), name=name)
    send = [int(s) for s in (splits.tolist() if torch.is_tensor(splits) else splits)]
    received = ctx.alltoall_splits(send)  # rows from each rank
    out = ctx.alltoall(tensor.contiguous(), splits=send, recv_splits=received, name=name)
    return out, torch.tensor(received, dtype=torch.int32)


def reducescatter(tensor: torch.Tensor, name: Optional[str] = None, compression: Any = Compression.none,
                  op: Any = Average, process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0) -> torch.Tensor:
    """op over every rank's tensor, cut along dimension 0: rank r keeps block r (the
    first rows % size() ranks get one row more, as in Horovod)."""
    op = _op(op, None)
    if op == Product:
        raise UnsupportedError("reducescatter with op=Product is not available in Starling")
    ctx = process_set._require()
    size = ctx.size
    rows = tensor.shape[0]
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    source = tensor * prescale_factor if prescale_factor != 1.0 else tensor
    compressor = compression if _horovod_compressor(compression) else NoneCompressor
    wire, state = compressor.compress(source.contiguous())
    result = compressor.decompress(ctx.reduce_scatter(wire, op, counts=counts, name=name), state)
    return result * postscale_factor if postscale_factor != 1.0 else result


def grouped_reducescatter(tensors: List[torch.Tensor], name: Optional[str] = None,
                          compression: Any = Compression.none, op: Any = Average,
                          process_set: ProcessSet = global_process_set) -> List[torch.Tensor]:
    """reducescatter of every tensor, in order."""
    return [reducescatter(t, None, compression, op, process_set) for t in tensors]


# ---- objects ----------------------------------------------------------------------------------------------
def broadcast_object(obj: Any, root_rank: int = 0, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> Any:
    """root_rank's object (pickled) on every rank."""
    ctx = process_set._require()
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8) if ctx.rank == root_rank else None
    length = torch.tensor([data.numel() if data is not None else 0], dtype=torch.int64)
    ctx.broadcast(length, root_rank, out=length)
    if data is None:
        data = torch.empty(int(length.item()), dtype=torch.uint8)
    ctx.broadcast(data, root_rank, out=data)
    return pickle.loads(data.numpy().tobytes())


def allgather_object(obj: Any, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> List[Any]:
    """Every rank's object (pickled), in rank order."""
    ctx = process_set._require()
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    lengths = ctx.allgather(torch.tensor([data.numel()], dtype=torch.int64)).tolist()
    gathered = ctx.allgather(data).numpy().tobytes()
    objects, offset = [], 0
    for n in lengths:
        objects.append(pickle.loads(gathered[offset:offset + n]))
        offset += n
    return objects


# ---- join, and what Starling does not have ---------------------------------------------------------
def join(device: int = -1) -> int:
    """Waits until every rank has called join() and returns the last rank to arrive.
    Unlike Horovod's, the ranks that joined early do not stand in (with zeros) for the
    collectives the others still make: every rank must make the same collective calls
    before join() (uneven data: stop at the length of the shortest shard)."""
    ctx = S.require_context()
    arrival = ctx.allgather(torch.tensor([time.time()], dtype=torch.float64))
    return int(torch.argmax(arrival).item())


class SyncBatchNorm:
    """Not available: raises UnsupportedError (use torch.nn.SyncBatchNorm under DDP with
    backend="starling")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedError("hvd.SyncBatchNorm is not available in Starling: use torch.nn.SyncBatchNorm under "
                               "DistributedDataParallel with backend='starling' (import starling.torch.distributed)")


class _Elastic:
    def __getattr__(self, name: str) -> Any:
        raise UnsupportedError(f"hvd.elastic.{name}: Horovod's elastic mode is not available in Starling. Starling "
                               "survives failures with starling.torch.repair() after a PeerFailedError and adds "
                               "processes with grow() (docs/concepts/fault-tolerance.md)")


elastic = _Elastic()


def _all_names() -> List[str]:
    return ["Average", "Sum", "Adasum", "Min", "Max", "Product", "is_initialized", "cross_rank", "cross_size",
            "mpi_built", "mpi_enabled", "gloo_built", "gloo_enabled", "ccl_built", "ddl_built", "rocm_built",
            "Compression", "NoneCompressor", "FP16Compressor", "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
            "allreduce", "allreduce_", "allreduce_nonblocking", "allreduce_nonblocking_", "allreduce_async",
            "allreduce_async_", "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
            "allgather", "allgather_async", "grouped_allgather", "broadcast", "broadcast_", "broadcast_async",
            "broadcast_async_", "alltoall", "reducescatter", "grouped_reducescatter", "broadcast_object",
            "allgather_object", "join", "SyncBatchNorm", "elastic"]


__all__ = _all_names()

