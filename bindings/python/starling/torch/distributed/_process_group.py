"""StarlingProcessGroup: torch.distributed's ProcessGroup over a starling.Context.

Written against PyTorch's public Python ProcessGroup API (a subclass that C++ callers
such as DDP reach through PyTorch's own trampoline), so nothing is compiled against a
PyTorch build. Every collective is started nonblocking in Starling; its Work wraps a
torch Future that a completion thread fulfils when Starling's request completes (on
PyTorch 1.13 C++ callers cannot see a Python Work subclass's wait(), a Future-backed
Work works on every version). Bad input fails at once on the calling rank; a mismatch
between ranks fails the Work on every rank.
"""

import queue
import sys
import threading
from typing import Any, Callable, List, Optional, Sequence

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from ...context import Context
from ...errors import UnsupportedError
from .. import _collectives as C
from .._collectives import Pending

_R = dist.ReduceOp
# Starling's reduction per torch ReduceOp; PRODUCT is computed from an allgather.
_OPS = [(_R.SUM, "sum"), (_R.MIN, "min"), (_R.MAX, "max"), (_R.PRODUCT, "product")]
if hasattr(_R, "AVG"):
    _OPS.append((_R.AVG, "average"))


def _op_name(reduce_op: Any) -> str:
    for torch_op, name in _OPS:
        if reduce_op == torch_op:
            return name
    raise UnsupportedError(f"reduce op {getattr(reduce_op, 'name', reduce_op)} is not supported by the starling backend (supported: SUM, AVG, "
                           "MIN, MAX, PRODUCT)")


def _option(opts: Any, name: str, default: Any) -> Any:
    return getattr(opts, name, default) if opts is not None else default


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _raise_failure(future: torch.futures.Future) -> Any:
    value = future.value()
    if isinstance(value, _Failure):
        raise value.error
    return value


class _Completer:
    """One thread per group: waits for the group's operations in submission order
    (Starling runs them in that order) and completes their futures."""

    def __init__(self) -> None:
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="starling-pg-completer", daemon=True)
        self._thread.start()

    def submit(self, pendings: List[Pending], result: Any) -> torch.futures.Future:
        """A future completed with result, or with _Failure(the first error)."""
        future: torch.futures.Future = torch.futures.Future()
        self._queue.put((pendings, result, future))
        return future

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            pendings, result, future = item
            error: Optional[BaseException] = None
            for pending in pendings:  # wait for all, even after a failure: they borrow tensors
                try:
                    pending.wait()
                except BaseException as e:  # noqa: B902 - handed to the future
                    error = error or e
            future.set_result(result if error is None else _Failure(error))

    def stop(self) -> None:
        self._queue.put(None)


# Which Work to return. A Python Work subclass lets wait() raise the operation's error
# (a Future-backed Work's wait() returns True even when its future failed), and C++
# callers see its methods on PyTorch 2; on 1.13 they do not (DDP would wait forever),
# so there only calls from torch.distributed's Python functions get one.
_PY_WORK = int(torch.__version__.split(".")[0]) >= 2
_C10D = "torch.distributed.distributed_c10d"


def _called_from_python_c10d() -> bool:
    try:
        return sys._getframe(3).f_globals.get("__name__") == _C10D  # _work <- op <- its caller
    except ValueError:  # called from C++ with no Python frame below
        return False


class _Work(getattr(dist, "_Work", None) or torch._C._distributed_c10d.Work):
    def __init__(self, raw: torch.futures.Future, future: torch.futures.Future) -> None:
        super().__init__()
        self._raw, self._future = raw, future

    def wait(self, timeout: Any = None) -> bool:
        value = self._raw.wait()
        if isinstance(value, _Failure):
            raise value.error
        return True

    def is_completed(self) -> bool:
        return self._future.done()

    def get_future(self) -> torch.futures.Future:
        return self._future


class StarlingProcessGroup(dist.ProcessGroup):
    """A torch.distributed process group whose collectives run in Starling."""

    def __init__(self, context: Context, rank: int, size: int) -> None:
        super().__init__(rank, size)
        if context.size != size or context.rank != rank:
            raise ValueError(f"backend 'starling': torch.distributed sees rank {rank} of {size} but Starling's "
                             f"context is rank {context.rank} of {context.size}; start the job with starlingrun "
                             "or mpirun (not torchrun), one process per rank")
        self.context = context
        self._completer = _Completer()

    # ---- identity
    def getBackendName(self) -> str:
        return "starling"

    def name(self) -> str:
        return "starling"

    def __repr__(self) -> str:
        return f"StarlingProcessGroup(rank={self.context.rank}, size={self.context.size})"

    # ---- plumbing
    def _work(self, pendings: List[Pending], result: Any) -> Any:
        raw = self._completer.submit(pendings, result)
        # Future.set_exception only stores the error as the value (PyTorch 1.13 to 2.x);
        # an error raised in a then() callback is what fails a future for C++ callers.
        future = raw.then(_raise_failure)
        if _PY_WORK or _called_from_python_c10d():
            return _Work(raw, future)
        return _create_work_from_future(future)

    @staticmethod
    def _dense(tensor: Any, what: str) -> torch.Tensor:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.layout != torch.strided or tensor.device.type not in ("cpu", "cuda"):
            raise UnsupportedError(f"{what}: the starling backend takes dense CPU or CUDA tensors, got layout "
                                   f"{tensor.layout} on device {tensor.device}")
        return tensor

    def _in_place(self, tensor: torch.Tensor, start: Callable[[torch.Tensor], Any]) -> Pending:
        """Runs start(buffer) on tensor's memory, through a contiguous copy (written
        back when done) if tensor is not contiguous."""
        if tensor.is_contiguous():
            return Pending(start(tensor))
        buffer = tensor.contiguous()
        request = start(buffer)
        return Pending(request, lambda: tensor.copy_(buffer))

    def _reduce(self, tensor: torch.Tensor, op: str, target: Optional[torch.Tensor] = None) -> Pending:
        """target (default tensor) = op over every rank's tensor."""
        target = tensor if target is None else target
        if op == "product":
            flat = tensor.reshape(1, -1).contiguous()
            request = self.context.allgather_nonblocking(flat)
            return Pending(None, lambda: target.copy_(torch.prod(request.wait(), dim=0).reshape(target.shape)))
        if target is tensor:
            return self._in_place(tensor, lambda buf: self.context.allreduce_nonblocking(buf, op, out=buf))
        source = tensor.contiguous()
        out = torch.empty_like(source)
        request = self.context.allreduce_nonblocking(source, op, out=out)
        return Pending(request, lambda: target.copy_(out))

    def _gather_flat(self, tensor: torch.Tensor) -> Pending:
        """Every rank's tensor, flattened and concatenated in rank order."""
        flat = tensor.reshape(-1).contiguous()
        out = torch.empty(self.context.size * flat.numel(), dtype=flat.dtype, device=flat.device)
        return C.allgather_into(self.context, flat, out)

    def _check_list(self, tensors: Sequence[Any], like: torch.Tensor, what: str) -> None:
        size = self.context.size
        if len(tensors) != size:
            raise ValueError(f"{what}: expected a list of size() = {size} tensors, got {len(tensors)}")
        for i, t in enumerate(tensors):
            self._dense(t, f"{what}[{i}]")
            if t.numel() != like.numel() or t.dtype != like.dtype:
                raise ValueError(f"{what}[{i}] has {t.numel()} elements of {t.dtype}; the input has "
                                 f"{like.numel()} of {like.dtype}")

    # ---- collectives
    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None) -> Any:
        op = _op_name(_option(opts, "reduceOp", _R.SUM))
        pendings = [self._reduce(self._dense(t, "allreduce tensor"), op) for t in tensors]
        return self._work(pendings, tensors)

    def allreduce_coalesced(self, tensors: List[torch.Tensor], opts: Any = None) -> Any:
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors: List[torch.Tensor], opts: Any = None) -> Any:
        root = _option(opts, "rootRank", 0)
        pendings = [self._in_place(self._dense(t, "broadcast tensor"),
                                   lambda buf: self.context.broadcast_nonblocking(buf, root, out=buf))
                    for t in tensors]
        return self._work(pendings, tensors)

    def allgather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
                  opts: Any = None) -> Any:
        pendings = []
        for outputs, inp in zip(output_tensors, input_tensors):
            self._dense(inp, "all_gather input")
            gathered = self._gather_flat(inp)  # before checking: a local error must not leave peers waiting

            def finish(g: Pending = gathered, outs: List[torch.Tensor] = outputs, i: torch.Tensor = inp) -> None:
                flat = g.wait()
                self._check_list(outs, i, "all_gather output")
                self._split_into(flat, outs)
            pendings.append(Pending(None, finish))
        return self._work(pendings, output_tensors)

    @staticmethod
    def _split_into(flat: torch.Tensor, outputs: Sequence[torch.Tensor]) -> None:
        offset = 0
        for out in outputs:
            out.copy_(flat[offset:offset + out.numel()].reshape(out.shape))
            offset += out.numel()

    def _allgather_base(self, output: torch.Tensor, inp: torch.Tensor, opts: Any = None) -> Any:
        self._dense(inp, "all_gather_into_tensor input")
        self._dense(output, "all_gather_into_tensor output")
        flat_in = inp.reshape(-1).contiguous()
        if output.numel() == self.context.size * inp.numel() and output.dtype == inp.dtype:
            pending = self._in_place(output, lambda buf: C.allgather_into(self.context, flat_in, buf.view(-1)))
            return self._work([pending], [output])
        # A wrong output on this rank: take part (peers wait for this rank), then fail here.
        gathered = self._gather_flat(inp)

        def fail() -> None:
            gathered.wait()
            raise ValueError(f"all_gather_into_tensor: the output has {output.numel()} elements of {output.dtype}, "
                             f"expected size() * {inp.numel()} = {self.context.size * inp.numel()} of {inp.dtype}")
        return self._work([Pending(None, fail)], [output])

    def reduce_scatter(self, output_tensors: List[torch.Tensor], input_tensors: List[List[torch.Tensor]],
                       opts: Any = None) -> Any:
        op = _op_name(_option(opts, "reduceOp", _R.SUM))
        pendings = []
        for out, inputs in zip(output_tensors, input_tensors):
            self._dense(out, "reduce_scatter output")
            self._check_list(inputs, out, "reduce_scatter input")
            flat = torch.cat([t.reshape(-1) for t in inputs])
            pendings.append(self._reduce_scatter(flat, out, op))
        return self._work(pendings, output_tensors)

    def _reduce_scatter_base(self, output: torch.Tensor, inp: torch.Tensor, opts: Any = None) -> Any:
        op = _op_name(_option(opts, "reduceOp", _R.SUM))
        self._dense(inp, "reduce_scatter_tensor input")
        self._dense(output, "reduce_scatter_tensor output")
        if inp.dtype != output.dtype:
            raise ValueError(f"reduce_scatter_tensor: input dtype {inp.dtype} != output dtype {output.dtype}")
        return self._work([self._reduce_scatter(inp.reshape(-1).contiguous(), output, op)], [output])

    def _reduce_scatter(self, flat: torch.Tensor, out: torch.Tensor, op: str) -> Pending:
        if op == "product":
            raise UnsupportedError("reduce_scatter with PRODUCT is not supported by the starling backend")
        if flat.numel() != self.context.size * out.numel():
            raise ValueError(f"reduce_scatter: the input has {flat.numel()} elements, expected size() * "
                             f"{out.numel()} (the output's) = {self.context.size * out.numel()}")
        return self._in_place(out, lambda buf: C.reduce_scatter(self.context, flat, buf.view(-1), op))

    def alltoall_base(self, output: torch.Tensor, inp: torch.Tensor, output_split_sizes: List[int],
                      input_split_sizes: List[int], opts: Any = None) -> Any:
        self._dense(inp, "all_to_all_single input")
        self._dense(output, "all_to_all_single output")
        if inp.dtype != output.dtype:
            raise ValueError(f"all_to_all_single: input dtype {inp.dtype} != output dtype {output.dtype}")

        def elements(tensor: torch.Tensor, splits: List[int], what: str) -> Optional[List[int]]:
            if not splits:
                return None
            row = tensor[0].numel() if tensor.dim() and tensor.shape[0] else 0
            if len(splits) != self.context.size or sum(splits) != (tensor.shape[0] if tensor.dim() else 1):
                raise ValueError(f"all_to_all_single: {what} {list(splits)} must have size() = {self.context.size} "
                                 f"entries summing to the first dimension {tensor.shape[0] if tensor.dim() else 1}")
            return [int(s) * row for s in splits]
        send = elements(inp, list(input_split_sizes), "input_split_sizes")
        recv = elements(output, list(output_split_sizes), "output_split_sizes")
        flat_in = inp.reshape(-1).contiguous()
        pending = self._in_place(output, lambda buf: C.alltoall(self.context, flat_in, buf.view(-1), send, recv))
        return self._work([pending], [output])

    def alltoall(self, output_tensors: List[torch.Tensor], input_tensors: List[torch.Tensor], opts: Any = None) -> Any:
        size = self.context.size
        if len(output_tensors) != size or len(input_tensors) != size:
            raise ValueError(f"all_to_all: expected lists of size() = {size} tensors, got {len(output_tensors)} "
                             f"outputs and {len(input_tensors)} inputs")
        flat_in = torch.cat([self._dense(t, "all_to_all input").reshape(-1) for t in input_tensors])
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=flat_in.dtype, device=flat_in.device)
        exchanged = C.alltoall(self.context, flat_in, flat_out, [t.numel() for t in input_tensors],
                               [t.numel() for t in output_tensors])
        pending = Pending(None, lambda: self._split_into(exchanged.wait(), output_tensors))
        return self._work([pending], output_tensors)

    def barrier(self, opts: Any = None) -> Any:
        return self._work([Pending(self.context.barrier_nonblocking())], None)

    def reduce(self, tensors: List[torch.Tensor], opts: Any = None) -> Any:
        op = _op_name(_option(opts, "reduceOp", _R.SUM))
        root = _option(opts, "rootRank", 0)
        pendings = []
        for t in tensors:
            self._dense(t, "reduce tensor")
            scratch = torch.empty_like(t)
            pendings.append(self._reduce(t, op, t if self.context.rank == root else scratch))
        return self._work(pendings, tensors)

    def gather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
               opts: Any = None) -> Any:
        root = _option(opts, "rootRank", 0)
        pendings = []
        for i, inp in enumerate(input_tensors):
            self._dense(inp, "gather input")
            outputs = output_tensors[i] if self.context.rank == root else None
            if outputs is not None:
                self._check_list(outputs, inp, "gather output")
            gathered = self._gather_flat(inp)
            pendings.append(Pending(None, lambda g=gathered, outs=outputs: self._split_into(g.wait(), outs or [])))
        return self._work(pendings, output_tensors)

    def scatter(self, output_tensors: List[torch.Tensor], input_tensors: List[List[torch.Tensor]],
                opts: Any = None) -> Any:
        root = _option(opts, "rootRank", 0)
        size = self.context.size
        pendings = []
        for i, out in enumerate(output_tensors):
            self._dense(out, "scatter output")
            if self.context.rank == root:
                self._check_list(input_tensors[i], out, "scatter input")
                whole = torch.cat([t.reshape(-1) for t in input_tensors[i]])
            else:
                whole = torch.empty(size * out.numel(), dtype=out.dtype, device=out.device)
            request = self.context.broadcast_nonblocking(whole, root, out=whole)
            start = self.context.rank * out.numel()
            pendings.append(Pending(request, lambda w=whole, o=out, s=start: o.copy_(w[s:s + o.numel()].view(o.shape))))
        return self._work(pendings, output_tensors)

    def send(self, tensors: List[torch.Tensor], dst: int, tag: int = 0) -> Any:
        raise UnsupportedError("send/recv are not supported by the starling backend: Starling has collectives and "
                               "neighbor operations only (use a gloo group from new_group(backend='gloo') for "
                               "point-to-point)")

    def recv(self, tensors: List[torch.Tensor], src: int, tag: int = 0) -> Any:
        return self.send(tensors, src, tag)

    def recv_anysource(self, tensors: List[torch.Tensor], tag: int = 0) -> Any:
        return self.send(tensors, -1, tag)

    def monitored_barrier(self, opts: Any = None, wait_all_ranks: bool = False) -> Any:
        self.context.barrier()

    # PyTorch 2's names for the same operations, and their coalesced (list) forms.
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base

    def allgather_into_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Any = None) -> Any:
        works = [self._allgather_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._work([Pending(None, lambda: [w.get_future().wait() for w in works])], outputs)

    def reduce_scatter_tensor_coalesced(self, outputs: List[torch.Tensor], inputs: List[torch.Tensor],
                                        opts: Any = None) -> Any:
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._work([Pending(None, lambda: [w.get_future().wait() for w in works])], outputs)

    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def _close(self) -> None:
        self._completer.stop()

