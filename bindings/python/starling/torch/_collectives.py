"""The collectives torch.distributed and Horovod need beyond Starling's core set, and
sub-groups of ranks: the one seam between those front ends and the C ABI.

reduce-scatter and all-to-all are Starling's own (starling_reduce_scatter,
starling_alltoall). Groups over a subset of ranks come from an MPI communicator
(mpi4py): torch.distributed calls a backend only on a group's members, while
starling_context_split is collective over the whole parent context.

Every function takes a starling.Context and flat (1-D, contiguous) torch tensors and
returns a Pending whose wait() finishes the operation.
"""

from typing import Any, Callable, Optional, Sequence

import torch

from .. import _core
from .._tensors import adapter_of
from ..context import Context
from ..request import Request
from ..errors import UnsupportedError


class Pending:
    """A started operation: wait() waits for Starling's request, then runs the local
    finishing step (copying a block out, ...) and returns its result."""

    __slots__ = ("_request", "_finish", "_done", "_result")

    def __init__(self, request: Any, finish: Optional[Callable[[], Any]] = None) -> None:
        self._request, self._finish, self._done, self._result = request, finish, False, None

    def wait(self) -> Any:
        if not self._done:
            result = self._request.wait() if self._request is not None else None
            finish, self._finish = self._finish, None
            self._result = finish() if finish is not None else result
            self._done = True
        return self._result


def allgather_into(ctx: Context, inp: torch.Tensor, out: torch.Tensor) -> Pending:
    """out = every rank's inp concatenated in rank order (out has size() times inp's
    elements; a rank whose size differs fails with MismatchError on every rank)."""
    adapter = adapter_of(inp)
    cin, cout = adapter.capsule(inp), adapter.capsule(out)
    handle = _core.allgather_nonblocking(ctx._handle, cin, cout, None, None)
    return Pending(Request(handle, (inp, cin, out, cout), None, out))


def reduce_scatter(ctx: Context, inp: torch.Tensor, out: torch.Tensor, op: str,
                   counts: Optional[Sequence[int]] = None) -> Pending:
    """out = this rank's block of op over every rank's inp; equal blocks of out.numel()
    elements, or counts[r] elements for rank r (starling_reduce_scatter)."""
    size, rank = ctx.size, ctx.rank
    if counts is None:
        if inp.numel() != size * out.numel():
            raise ValueError(f"reduce_scatter: the input has {inp.numel()} elements, expected size() * "
                             f"{out.numel()} (the output's) = {size * out.numel()}")
    else:
        counts = [int(c) for c in counts]
        if len(counts) != size or any(c < 0 for c in counts) or sum(counts) != inp.numel():
            raise ValueError(f"reduce_scatter: counts {counts} must have size() = {size} entries >= 0 summing to "
                             f"the input's {inp.numel()} elements")
        if counts[rank] != out.numel():
            raise ValueError(f"reduce_scatter: the output has {out.numel()} elements, counts[{rank}] = "
                             f"{counts[rank]}")
    return Pending(ctx.reduce_scatter_nonblocking(inp, op, counts=counts, out=out))


def alltoall(ctx: Context, inp: torch.Tensor, out: torch.Tensor, send_counts: Optional[Sequence[int]] = None,
             recv_counts: Optional[Sequence[int]] = None) -> Pending:
    """Block q of inp goes to rank q; block q of out comes from rank q (MPI_Alltoallv,
    counts in elements; None: equal blocks), through starling_alltoall, which checks on
    every rank that what each rank expects is what was sent to it (MismatchError)."""
    size = ctx.size
    if send_counts is None and recv_counts is None:
        if inp.numel() % size:
            raise ValueError(f"alltoall: the input's {inp.numel()} elements do not split into size() = {size} "
                             "equal blocks")
        return Pending(ctx.alltoall_nonblocking(inp, out=out))
    if send_counts is None:
        send_counts = [inp.numel() // size] * size if inp.numel() % size == 0 else None
        if send_counts is None:
            raise ValueError(f"alltoall: the input's {inp.numel()} elements do not split into size() = {size} "
                             "equal blocks")
    send = [int(c) for c in send_counts]
    if len(send) != size or any(c < 0 for c in send) or sum(send) != inp.numel():
        raise ValueError(f"alltoall: send counts {send} must have size() = {size} entries >= 0 summing to the "
                         f"input's {inp.numel()} elements")
    if recv_counts is None:  # torch.distributed's rule: the output in equal blocks
        if out.numel() % size:
            raise ValueError(f"alltoall: the output's {out.numel()} elements do not split into size() = {size} "
                             "equal blocks; give the receive counts")
        recv_counts = [out.numel() // size] * size
    recv = [int(c) for c in recv_counts]
    return Pending(ctx.alltoall_nonblocking(inp, splits=send, recv_splits=recv, out=out))


def group_context(world: Context, ranks: Sequence[int]) -> Optional[Context]:
    """A new context over `ranks` (ranks of `world`, in this order), for the members of
    `ranks` only: torch.distributed calls a backend only on a group's members. None on
    the other ranks. Over every rank: a fresh Context (collective over the world)."""
    ranks = [int(r) for r in ranks]
    if sorted(ranks) == list(range(world.size)) and ranks == sorted(ranks):
        return Context()
    if world.rank not in ranks:
        return None
    try:
        from mpi4py import MPI  # MPI_Comm_create_group: collective over the members only
    except ImportError:
        raise UnsupportedError("a group over a subset of ranks needs mpi4py (pip install mpi4py) until "
                               "Starling's own context split reaches Python") from None
    members = MPI.COMM_WORLD.Get_group().Incl(ranks)
    comm = MPI.COMM_WORLD.Create_group(members, tag=0x57A)
    members.Free()
    return Context(comm)
