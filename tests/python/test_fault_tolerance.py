"""Fault tolerance from Python where no rank dies: Context.repair() is refused with
UnsupportedError saying what is needed (Open MPI 4.1, or a job without ULFM), or, under
ULFM, is a valid collective that drops nothing; PeerFailedError.ranks parses the ranks a
message names. (Ranks dying: tests/fault, on Open MPI 5.)"""

import pytest

import starling
from conftest import RANK, SIZE


def test_repair_without_a_failure(ctx):
    if not ctx.fault_tolerant:
        with pytest.raises(starling.UnsupportedError, match="needs (Open MPI 5 with ULFM|ULFM enabled for the job)"):
            ctx.repair()
        return
    result = ctx.repair()
    assert result == {"old_rank": RANK, "old_size": SIZE, "new_rank": RANK, "new_size": SIZE,
                      "old_to_new": list(range(SIZE)), "failed": []}
    assert ctx.rank == RANK and ctx.size == SIZE


def test_peer_failed_error_names_ranks():
    one = starling.PeerFailedError("allreduce 'x' (float32[4]): rank 2 (pid 1326 on host vm) is gone (killed, "
                                   "crashed or exited without destroying its context) (reported by rank 0 (pid "
                                   "1 on host vm))")
    assert one.ranks == [2]
    two = starling.PeerFailedError("rank 3 (pid 9 on host b) and rank 1 (pid 8 on host a) are gone (killed)")
    assert two.ranks == [1, 3]
    assert starling.PeerFailedError("rank 4 is gone").ranks == [4]
    assert starling.PeerFailedError("a peer revoked the context's communicator").ranks == []
    assert isinstance(one, starling.StarlingError)


def test_grow_refusals(ctx):
    assert ctx.joined is False
    with pytest.raises(ValueError, match="count"):
        ctx.grow(count=2, ranks=[0])  # ranks must have count entries: refused before the C call
    if not ctx.fault_tolerant:
        with pytest.raises(starling.UnsupportedError, match="needs (Open MPI 5 with ULFM|ULFM enabled for the job)"):
            ctx.grow()
        assert ctx.size == SIZE
        return
    with pytest.raises(starling.InvalidArgumentError, match="count must be >= 1"):
        ctx.grow(count=0)
    with pytest.raises(starling.InvalidArgumentError, match="not in"):
        ctx.grow(ranks=[SIZE + 1])
    assert ctx.rank == RANK and ctx.size == SIZE


def test_shrink_and_resize_refusals(ctx):
    with pytest.raises(ValueError, match="count"):
        ctx.shrink(count=2, ranks=[0])  # ranks must have count entries: refused before the C call
    with pytest.raises(ValueError, match="size must be >= 1"):
        ctx.resize(0)
    assert ctx.resize(SIZE) is None  # the same size: nothing to do, nothing collective
    if not ctx.fault_tolerant:
        with pytest.raises(starling.UnsupportedError, match="needs (Open MPI 5 with ULFM|ULFM enabled for the job)"):
            ctx.shrink()
        assert ctx.rank == RANK and ctx.size == SIZE
        return
    with pytest.raises(starling.InvalidArgumentError, match="count must be in"):
        ctx.shrink(count=SIZE)
    with pytest.raises(starling.InvalidArgumentError, match="not in"):
        ctx.shrink(ranks=[SIZE])
    assert ctx.rank == RANK and ctx.size == SIZE
