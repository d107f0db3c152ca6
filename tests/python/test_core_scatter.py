"""reduce_scatter, alltoall and Context.split with NumPy arrays and PyTorch tensors, at
the Context level and the starling.torch level, against float64 NumPy references; bad
input and mismatches across ranks."""

import numpy as np
import pytest
import torch

import starling
import starling.torch as bf

from conftest import DTYPES, NUMPY_DTYPES, RANK, SIZE, as_f64, assert_close, make, values

CASES = [("numpy", d) for d in NUMPY_DTYPES] + [("torch", d) for d in DTYPES]
FLOATS = ("float16", "bfloat16", "float32", "float64")
REDUCE = {"sum": np.sum, "average": np.mean, "min": np.min, "max": np.max}


def stack(shape, dtype, salt=0):
    return np.stack([values(r, shape, dtype, salt) for r in range(SIZE)])


@pytest.mark.parametrize("framework,dtype", CASES)
@pytest.mark.parametrize("op", list(REDUCE))
@pytest.mark.parametrize("rows", [1, 3000])  # 3000 x 7 x size: the ring path for every dtype
def test_reduce_scatter_equal_blocks(ctx, framework, dtype, op, rows):
    if op == "average" and dtype not in FLOATS:
        pytest.skip("average needs a floating-point dtype")
    shape = (rows * SIZE, 7)
    x = make(framework, RANK, shape, dtype, salt=rows)
    y = ctx.reduce_scatter(x, op)
    assert type(y) is type(x) and y.dtype == x.dtype and tuple(y.shape) == (rows, 7)
    full = REDUCE[op](stack(shape, dtype, salt=rows), axis=0)
    assert_close(y, full[RANK * rows:(RANK + 1) * rows], dtype)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_reduce_scatter_counts_in_place_and_nonblocking(ctx, framework):
    counts = [0 if r == 1 else 2 * r + 1 for r in range(SIZE)]
    first = sum(counts[:RANK])
    shape = (sum(counts), 3)
    full = stack(shape, "float64", salt=5).sum(axis=0)
    x = make(framework, RANK, shape, "float64", salt=5)
    request = ctx.reduce_scatter_nonblocking(x, "sum", counts=counts)
    y = request.wait()
    assert tuple(y.shape) == (counts[RANK], 3)
    assert_close(y, full[first:first + counts[RANK]], "float64")
    own = x[first:first + counts[RANK]]  # a view of x: in place
    assert ctx.reduce_scatter(x, "sum", counts=counts, out=own) is own
    assert_close(x[first:first + counts[RANK]], full[first:first + counts[RANK]], "float64")


@pytest.mark.parametrize("framework,dtype", CASES)
def test_alltoall_equal_blocks(ctx, framework, dtype):
    rows = 2
    x = make(framework, RANK, (rows * SIZE, 4), dtype, salt=3)
    y = ctx.alltoall(x)
    expected = np.concatenate([values(q, (rows * SIZE, 4), dtype, 3)[RANK * rows:(RANK + 1) * rows]
                               for q in range(SIZE)])
    assert type(y) is type(x) and y.dtype == x.dtype
    assert np.array_equal(as_f64(y), expected)  # values() is exact in every dtype


def sends(r, q):
    """Rows rank r sends to rank q."""
    return (r + 2 * q) % 3 + (1 if r == q else 0)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_alltoall_splits(ctx, framework):
    splits = [sends(RANK, q) for q in range(SIZE)]
    x = make(framework, RANK, (sum(splits), 5), "int32", salt=9)
    assert ctx.alltoall_splits(splits) == [sends(q, RANK) for q in range(SIZE)]
    expected = []
    for q in range(SIZE):
        theirs = values(q, (sum(sends(q, p) for p in range(SIZE)), 5), "int32", 9)
        start = sum(sends(q, p) for p in range(RANK))
        expected.append(theirs[start:start + sends(q, RANK)])
    expected = np.concatenate(expected)
    assert np.array_equal(as_f64(ctx.alltoall(x, splits=splits)), expected)
    y = ctx.alltoall_nonblocking(x, splits=splits, recv_splits=[sends(q, RANK) for q in range(SIZE)]).wait()
    assert np.array_equal(as_f64(y), expected)


def test_torch_level(ctx):
    x = torch.arange(4 * SIZE, dtype=torch.float32).reshape(2 * SIZE, 2) + RANK
    y = bf.reduce_scatter(x)  # average, as allreduce here
    reference = (np.arange(4 * SIZE, dtype=np.float64).reshape(2 * SIZE, 2) + (SIZE - 1) / 2)[2 * RANK:2 * RANK + 2]
    assert_close(y, reference, "float32")
    handle = bf.reduce_scatter_nonblocking(x, op="sum")
    assert_close(bf.synchronize(handle), reference * SIZE, "float32")
    assert torch.equal(bf.alltoall(x), ctx.alltoall(x))
    splits = [sends(RANK, q) for q in range(SIZE)]
    z = torch.full((sum(splits), 1), float(RANK))
    out, received = bf.alltoall(z, splits=splits)
    assert received.tolist() == [sends(q, RANK) for q in range(SIZE)]
    assert out[:, 0].tolist() == [float(q) for q in range(SIZE) for _ in range(sends(q, RANK))]
    assert torch.equal(bf.synchronize(bf.alltoall_nonblocking(z, splits=torch.tensor(splits))), out)


def test_split_and_new_group(ctx):
    child = ctx.split(RANK % 2, key=-RANK)
    members = [r for r in reversed(range(SIZE)) if r % 2 == RANK % 2]
    try:
        assert child.size == len(members) and members[child.rank] == RANK
        assert child.topology.size == child.size
        total = child.allreduce(np.array([RANK + 1.0]))
        assert total[0] == sum(r + 1 for r in members)
        assert ctx.allreduce(np.array([1.0]))[0] == SIZE  # the parent goes on
    finally:
        child.close()
    assert ctx.split(None) is None  # every rank: no context
    group_ranks = list(range(SIZE - 1, -1, -2))  # every other rank, descending
    group = bf.new_group(group_ranks)
    if RANK in group_ranks:
        try:
            assert group.rank == group_ranks.index(RANK)
            t = group.allreduce(torch.tensor([float(RANK)]), "sum")
            assert t.item() == sum(group_ranks)
            assert group.reduce_scatter(torch.ones(group.size, 2)).tolist() == [[float(group.size)] * 2]
        finally:
            group.close()
    else:
        assert group is None


def test_bad_input(ctx):
    x = np.zeros((2 * SIZE, 3), dtype=np.float32)
    if SIZE > 1:
        with pytest.raises(starling.InvalidArgumentError, match="not a multiple of size"):
            ctx.reduce_scatter(np.zeros((2 * SIZE + 1, 3), dtype=np.float32))
    with pytest.raises(starling.InvalidArgumentError, match="entries but the context has"):
        ctx.reduce_scatter(x, counts=[1] * (SIZE + 1))
    with pytest.raises(starling.InvalidArgumentError, match="negative"):
        ctx.reduce_scatter(x, counts=[-1] + [0] * (SIZE - 1))
    with pytest.raises(starling.InvalidArgumentError, match="sum to"):
        ctx.reduce_scatter(x, counts=[1] * SIZE)
    with pytest.raises(starling.UnsupportedError, match="floating-point"):
        ctx.reduce_scatter(np.zeros(SIZE, dtype=np.int32), "average")
    with pytest.raises(starling.InvalidArgumentError, match="at least one dimension"):
        ctx.alltoall(np.array(1.0, dtype=np.float32))
    with pytest.raises(starling.InvalidArgumentError, match="same dtype"):
        ctx.alltoall(x, out=np.zeros((2 * SIZE, 3), dtype=np.float64))
    with pytest.raises(starling.InvalidArgumentError, match="in place"):
        ctx.alltoall(x, out=x)
    with pytest.raises(starling.InvalidArgumentError, match="recv_splits needs splits"):
        ctx.alltoall(x, recv_splits=[1] * SIZE)
    with pytest.raises(starling.InvalidArgumentError, match="color"):
        ctx.split(-3)
    with pytest.raises(ValueError, match="distinct"):
        bf.new_group([0, 0])
    assert ctx.allreduce(np.ones(1))[0] == SIZE  # nothing was queued


@pytest.mark.skipif(SIZE < 2, reason="needs two ranks")
def test_mismatch_across_ranks(ctx):
    x = np.ones((2 * SIZE, 3), dtype=np.float32)
    # rank 1 expects one row fewer from rank 0 than rank 0 sends.
    splits = [2] * SIZE
    recv = [1 if (RANK == 1 and q == 0) else 2 for q in range(SIZE)]
    with pytest.raises(starling.MismatchError, match="rank 0 sends 6 elements to rank 1, which expects 3"):
        ctx.alltoall(x, splits=splits, recv_splits=recv)
    counts = [2] * SIZE if RANK else [1, 3] + [2] * (SIZE - 2)
    with pytest.raises(starling.MismatchError, match="reduce_scatter"):
        ctx.reduce_scatter(x, counts=counts)
    with pytest.raises(starling.MismatchError):
        if RANK == 0:
            ctx.reduce_scatter(x)
        else:
            ctx.alltoall(x)
    assert ctx.allreduce(np.ones(1))[0] == SIZE
