"""starling.Context collectives with NumPy arrays and PyTorch tensors: every dtype, out
of place, in place (out=x), and nonblocking, against float64 references."""

import numpy as np
import pytest
import torch

import starling

from conftest import DTYPES, NUMPY_DTYPES, RANK, SIZE, as_f64, assert_close, make, values

CASES = [("numpy", d) for d in NUMPY_DTYPES] + [("torch", d) for d in DTYPES]
SHAPE = (3, 5)


def expected_reduce(op, dtype, shape=SHAPE, salt=0):
    stack = np.stack([values(r, shape, dtype, salt) for r in range(SIZE)])
    if op == "sum":
        total = stack.sum(axis=0)
        if not dtype.startswith("float") and dtype != "bfloat16":
            bits = np.dtype(dtype).itemsize * 8  # integer sums wrap around
            signed = dtype.startswith("int")
            # In Python integers (an object array): under NumPy 2, 1 << 64 does not fit
            # an int64 operand (NEP 50), and int64 arithmetic would wrap by itself.
            total = total.astype(np.int64).astype(object) % (1 << bits)
            if signed:
                total = np.where(total >= 1 << (bits - 1), total - (1 << bits), total)
            total = total.astype(np.float64)
        return total
    return {"average": stack.mean(axis=0), "min": stack.min(axis=0), "max": stack.max(axis=0)}[op]


def result_type(framework):
    return np.ndarray if framework == "numpy" else torch.Tensor


@pytest.mark.parametrize("framework,dtype", CASES)
@pytest.mark.parametrize("op", ["sum", "average", "min", "max"])
def test_allreduce_out_of_place(ctx, framework, dtype, op):
    if op == "average" and dtype not in ("float16", "bfloat16", "float32", "float64"):
        pytest.skip("average is defined for floating-point dtypes")
    x = make(framework, RANK, SHAPE, dtype)
    before = as_f64(x).copy()
    y = ctx.allreduce(x, op)
    assert isinstance(y, result_type(framework)) and y.dtype == x.dtype
    assert_close(y, expected_reduce(op, dtype), dtype)
    assert np.array_equal(as_f64(x), before), "out-of-place allreduce modified its input"


@pytest.mark.parametrize("framework,dtype", CASES)
def test_allreduce_in_place_and_nonblocking(ctx, framework, dtype):
    x = make(framework, RANK, SHAPE, dtype)
    assert ctx.allreduce(x, "max", out=x) is x
    assert_close(x, expected_reduce("max", dtype), dtype)

    x = make(framework, RANK, SHAPE, dtype, salt=1)
    request = ctx.allreduce_nonblocking(x, "sum")
    del x  # the request keeps its tensors alive
    y = request.wait()
    assert request.done() and request.wait() is y
    assert_close(y, expected_reduce("sum", dtype, salt=1), dtype)


def test_allreduce_into_given_output(ctx):
    x = make("torch", RANK, SHAPE, "float32")
    out = torch.empty(SHAPE)
    assert ctx.allreduce(x, "average", out=out) is out
    assert_close(out, expected_reduce("average", "float32"), "float32")


def test_allreduce_local_is_machine_wide(ctx):
    # One host: the machine is the whole world.
    x = make("numpy", RANK, SHAPE, "float64")
    assert_close(ctx.allreduce(x, "average", local=True), expected_reduce("average", "float64"), "float64")


def test_request_context_manager_waits(ctx):
    x = np.full(1000, float(RANK))
    with ctx.allreduce_nonblocking(x, "sum", out=x) as request:
        pass
    assert request.done()
    assert np.all(x == SIZE * (SIZE - 1) / 2)


def test_many_requests_complete_in_any_wait_order(ctx):
    xs = [np.full(10, float(RANK + k)) for k in range(8)]
    requests = [ctx.allreduce_nonblocking(x, "sum") for x in xs]
    results = [r.wait() for r in reversed(requests)][::-1]
    for k, y in enumerate(results):
        assert np.all(y == sum(r + k for r in range(SIZE)))


@pytest.mark.parametrize("framework,dtype", CASES)
def test_broadcast(ctx, framework, dtype):
    root = SIZE - 1
    x = make(framework, RANK, SHAPE, dtype)
    y = ctx.broadcast(x, root)
    assert_close(y, values(root, SHAPE, dtype), dtype)
    assert isinstance(y, result_type(framework))
    ctx.broadcast(x, 0, out=x)
    assert_close(x, values(0, SHAPE, dtype), dtype)
    z = ctx.broadcast_nonblocking(make(framework, RANK, SHAPE, dtype, salt=3), root).wait()
    assert_close(z, values(root, SHAPE, dtype, salt=3), dtype)


@pytest.mark.parametrize("framework,dtype", [("numpy", "int32"), ("torch", "bfloat16"), ("numpy", "float16")])
def test_allgather_with_different_first_dimensions(ctx, framework, dtype):
    x = make(framework, RANK, (RANK + 1, 2), dtype)
    y = ctx.allgather(x)
    expected = np.concatenate([values(r, (r + 1, 2), dtype) for r in range(SIZE)])
    assert isinstance(y, result_type(framework))
    assert_close(y, expected, dtype)
    z = ctx.allgather_nonblocking(x).wait()
    assert_close(z, expected, dtype)


def test_barrier(ctx):
    ctx.barrier()
    ctx.barrier_nonblocking().wait()


@pytest.mark.skipif(SIZE < 2, reason="needs a peer")
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_pair_gossip(ctx, framework):
    peer = RANK ^ 1
    if peer >= SIZE:  # odd world: the last rank gossips with nobody
        return
    x = make(framework, RANK, SHAPE, "float64")
    y = ctx.pair_gossip(x, peer)
    assert_close(y, (values(RANK, SHAPE, "float64") + values(peer, SHAPE, "float64")) / 2, "float64")
    y = ctx.pair_gossip_nonblocking(x, peer, self_weight=0.25, pair_weight=0.75).wait()
    assert_close(y, 0.25 * values(RANK, SHAPE, "float64") + 0.75 * values(peer, SHAPE, "float64"), "float64")


def test_read_only_numpy_input_is_not_copied(ctx):
    x = np.full(6, float(RANK + 1))
    x.flags.writeable = False  # NumPy 1.24 refuses to export these through DLPack
    y = ctx.allreduce(x, "sum")
    assert np.all(y == SIZE * (SIZE + 1) / 2)


def test_zero_dimensional_and_empty_tensors(ctx):
    s = ctx.allreduce(torch.tensor(float(RANK)), "sum")
    assert s.shape == () and s.item() == SIZE * (SIZE - 1) / 2
    e = ctx.allreduce(np.zeros((0, 3)), "sum")
    assert e.shape == (0, 3)


def test_tensors_that_require_grad(ctx):
    p = torch.full((4,), float(RANK), requires_grad=True)
    y = ctx.allreduce(p, "average")
    assert not y.requires_grad and torch.all(y == (SIZE - 1) / 2)


def test_layout_and_stats(ctx):
    assert (ctx.rank, ctx.size) == (RANK, SIZE)
    assert ctx.local_size * ctx.machine_size == SIZE and ctx.is_homogeneous
    stats = ctx.stats()
    assert stats["operations"] > 0 and set(stats) >= {"messages_sent", "bytes_sent", "fused_operations"}


def test_peer_stats_match_what_each_peer_received(ctx):
    """What rank i counted as sent to j is what j counted as received from i (once every
    rank has left a barrier, every message is counted on both sides), and an allreduce
    of n float64 sends this rank's peers at least the bytes the algorithm must move."""
    before = ctx.peer_stats()
    blocked = ctx.stats()["blocked_ns"]
    n = 50_000
    ctx.allreduce(np.ones(n), "sum")
    ctx.barrier()
    rows = ctx.peer_stats()
    assert len(rows) == SIZE
    assert ctx.stats()["blocked_ns"] > blocked
    if SIZE > 1:
        sent_now = sum(r["bytes_sent"] for r in rows) - sum(r["bytes_sent"] for r in before)
        assert sent_now >= n * 8 * (SIZE - 1) // SIZE  # no algorithm sends less than a reduce-scatter
    keys = ("bytes_sent", "bytes_received", "messages_sent", "messages_received")
    mine = np.array([[r[k] for k in keys] for r in rows], dtype=np.float64)  # [peer, key]
    everyone = ctx.allgather(mine[None])  # [rank, peer, key]; exact below 2**53
    for i in range(SIZE):
        for j in range(SIZE):
            assert everyone[i, j, 0] == everyone[j, i, 1], ("bytes", i, j)
            assert everyone[i, j, 2] == everyone[j, i, 3], ("messages", i, j)
    totals = ctx.stats()
    assert totals["bytes_received"] >= sum(r["bytes_received"] for r in rows)
    waits = [r for r in rows if r["waits"]]
    assert all(r["wait_ns"] >= r["last_wait_ns"] for r in waits)


def test_probe_peers(ctx):
    import time
    start = time.perf_counter()
    probe = ctx.probe_peers(repetitions=2, bulk_bytes=100_000)
    elapsed = time.perf_counter() - start
    latency, throughput = probe["latency_seconds"], probe["bytes_per_second"]
    assert len(latency) == len(throughput) == SIZE and latency[RANK] == throughput[RANK] == 0.0
    peers = ctx.peer_stats()
    for peer in range(SIZE):
        if peer != RANK:  # the best of 2 round trips is at most their mean
            assert 0 < 2 * latency[peer] <= elapsed / 2, (peer, latency)
            assert 0 < 100_000 / throughput[peer] <= elapsed / 2, (peer, throughput)
            assert peers[peer]["probe_latency_ns"] == round(latency[peer] * 1e9)
    with pytest.raises(starling.InvalidArgumentError, match="repetitions is 0; give 1 to 1000"):
        ctx.probe_peers(repetitions=0)
    with pytest.raises(starling.InvalidArgumentError, match="bulk_bytes is -1"):
        ctx.probe_peers(bulk_bytes=-1)
    with pytest.raises(TypeError, match="repetitions must be an int"):
        ctx.probe_peers(repetitions=2.5)


def test_peer_stats_bad_input(ctx):
    with pytest.raises(starling.InvalidArgumentError, match="peer is -1"):
        ctx.peer_stats(-1)
    with pytest.raises(starling.InvalidArgumentError, match=f"peer is {SIZE} but the context's ranks are 0 .. {SIZE - 1}"):
        ctx.peer_stats(SIZE)
    with pytest.raises(TypeError, match="peer must be an int"):
        ctx.peer_stats("0")
    with pytest.raises(TypeError, match="peer must be an int"):
        ctx.peer_stats(True)
    assert ctx.peer_stats(np.int64(0)) == ctx.peer_stats(0)


def test_context_over_an_mpi4py_communicator():
    MPI = pytest.importorskip("mpi4py.MPI")
    half = MPI.COMM_WORLD.Split(RANK % 2, RANK)
    try:
        with starling.Context(half) as ctx:
            assert (ctx.rank, ctx.size) == (half.Get_rank(), half.Get_size())
            total = ctx.allreduce(np.array([float(RANK)]), "sum")
            assert total[0] == sum(r for r in range(SIZE) if r % 2 == RANK % 2)
        assert not MPI.Is_finalized()  # MPI belongs to its owner: closing the context kept it
        half.Barrier()
    finally:
        half.Free()
    with pytest.raises(TypeError, match="mpi4py communicator"):
        starling.Context("world")
