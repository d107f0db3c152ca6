"""CUDA tensors through the Python binding, on the emulated device (ctest sets
STARLING_DEVICE_PLUGIN to libstarling_emudevice.so; skipped otherwise): every Context
operation on EmuArrays matches the NumPy path on the same values and a float64
reference; results come back as EmuArrays; the caller's stream is waited for; bad input
is named. Run on both GPU paths (STARLING_GPU_PATH): staged gives the NumPy path's bits
(it runs the CPU algorithm); nccl (every rank its own emulated GPU) sums in NCCL's order,
so its allreduce and neighbor_allreduce agree within rounding, and the operations it
leaves to the staged path stay bit for bit."""

import os
import time

import numpy as np
import pytest

if not os.environ.get("STARLING_DEVICE_PLUGIN"):
    pytest.skip("needs STARLING_DEVICE_PLUGIN (the emulated device): run by ctest", allow_module_level=True)

import starling  # noqa: E402
import emu_array  # noqa: E402
from emu_array import EmuArray, emu, new_stream, using_stream  # noqa: E402
from conftest import FLOAT_DTYPES, NUMPY_DTYPES, RANK, SIZE, assert_close, values  # noqa: E402
from test_core_neighbor import exp2_in_neighbors, rounded  # noqa: E402
from test_core_windows import exp2_out_neighbors  # noqa: E402

# EmuArray is mutable (out=x, windows) and has a current stream of its own.
starling.register_array_type(EmuArray, current_stream=lambda x: emu_array.current_stream, mutable=True)

SHAPE = (3, 700)  # 8400 bytes of float32: several chunks with STARLING_GPU_CHUNK_BYTES=4096


def host(rank, shape, dtype, salt=0):
    return values(rank, shape, dtype, salt).astype(dtype)


def device(rank, shape, dtype, salt=0):
    return EmuArray.from_numpy(host(rank, shape, dtype, salt))


NCCL = os.environ.get("STARLING_GPU_PATH") == "nccl"


def assert_same_bits(result, expected, reduced=False):
    """The device result is an EmuArray with exactly the NumPy path's bytes; a reduction
    (reduced) on the NCCL path only within rounding."""
    assert type(result) is EmuArray, type(result)
    got = result.numpy()
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if reduced and NCCL:
        assert_close(got, expected, got.dtype.name)
        return
    assert got.tobytes() == expected.tobytes(), f"differs from the NumPy path: {got} vs {expected}"


def all_ranks(shape, dtype, salt=0):
    return np.stack([values(r, shape, dtype, salt) for r in range(SIZE)])


# ---- classic collectives ------------------------------------------------------------------
REDUCE = {"sum": np.sum, "average": np.mean, "min": np.min, "max": np.max}


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("op", list(REDUCE))
def test_allreduce(ctx, op, dtype):
    if op == "average" and dtype not in FLOAT_DTYPES:
        pytest.skip("average needs a floating-point dtype")
    x = device(RANK, SHAPE, dtype)
    y = ctx.allreduce(x, op)
    expected = ctx.allreduce(host(RANK, SHAPE, dtype), op)
    assert_same_bits(y, expected, reduced=True)
    assert_close(y.numpy(), REDUCE[op](all_ranks(SHAPE, dtype), axis=0), dtype)
    # Nonblocking, into a given output, and in place: the same bits.
    out = EmuArray(SHAPE, dtype)
    assert ctx.allreduce_nonblocking(x, op, out=out).wait() is out
    assert_same_bits(out, y.numpy())
    assert ctx.allreduce(x, op, out=x) is x
    assert_same_bits(x, y.numpy())


def test_broadcast_from_every_root(ctx):
    for root in range(SIZE):
        x = device(RANK, (5, 3), "float16")
        y = ctx.broadcast(x, root)
        assert_same_bits(y, host(root, (5, 3), "float16"))
        assert ctx.broadcast_nonblocking(x, root, out=x).wait() is x
        assert_same_bits(x, host(root, (5, 3), "float16"))


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_allgather_with_varying_first_dims(ctx, dtype):
    x = device(RANK, (RANK + 1, 4), dtype)
    expected = np.concatenate([host(r, (r + 1, 4), dtype) for r in range(SIZE)])
    assert_same_bits(ctx.allgather(x), expected)
    assert_same_bits(ctx.allgather_nonblocking(x).wait(), ctx.allgather(host(RANK, (RANK + 1, 4), dtype)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int16"])
def test_reduce_scatter_and_alltoall(ctx, dtype):
    """On the NCCL path equal blocks go through ncclReduceScatter (a sum within rounding),
    blocks of different sizes and MAX through our kernel in rank order, alltoall through
    grouped sends: the host call's bytes, except for that sum."""
    shape = (2 * SIZE, 700)  # 5600 bytes of float32 per block: several chunks
    x = device(RANK, shape, dtype, salt=4)
    y = ctx.reduce_scatter(x, "sum")
    assert_same_bits(y, ctx.reduce_scatter(host(RANK, shape, dtype, 4), "sum"), reduced=True)
    assert_close(y.numpy(), all_ranks(shape, dtype, 4).sum(axis=0)[2 * RANK:2 * RANK + 2], dtype)
    counts = [r + 1 for r in range(SIZE)]
    z = device(RANK, (sum(counts), 3), dtype)
    assert_same_bits(ctx.reduce_scatter_nonblocking(z, "max", counts=counts).wait(),
                     ctx.reduce_scatter(host(RANK, (sum(counts), 3), dtype), "max", counts=counts))
    a = ctx.alltoall(x)
    assert_same_bits(a, ctx.alltoall(host(RANK, shape, dtype, 4)))
    splits = [(RANK + q) % 3 for q in range(SIZE)]
    w = device(RANK, (sum(splits), 5), dtype)
    assert_same_bits(ctx.alltoall_nonblocking(w, splits=splits).wait(),
                     ctx.alltoall(host(RANK, (sum(splits), 5), dtype), splits=splits))


# ---- neighbor operations ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_neighbor_allreduce_static(ctx, dtype):
    x = device(RANK, SHAPE, dtype)
    y = ctx.neighbor_allreduce(x)
    assert_same_bits(y, ctx.neighbor_allreduce(host(RANK, SHAPE, dtype)), reduced=True)
    sources = exp2_in_neighbors(RANK, SIZE)
    expected = (values(RANK, SHAPE, dtype) + sum(values(j, SHAPE, dtype) for j in sources)) / (len(sources) + 1)
    assert_close(y.numpy(), rounded(expected, dtype), dtype)


def test_neighbor_allreduce_weighted_and_dynamic(ctx):
    sources = ctx.in_neighbors
    chosen = {j: 0.125 * (j + 1) for j in sources[:1]}
    x = device(RANK, SHAPE, "float64")
    y = ctx.neighbor_allreduce_nonblocking(x, self_weight=0.5, src_weights=chosen).wait()
    assert_same_bits(y, ctx.neighbor_allreduce(host(RANK, SHAPE, "float64"), self_weight=0.5, src_weights=chosen),
                     reduced=True)
    expected = 0.5 * values(RANK, SHAPE, "float64") + sum(w * values(j, SHAPE, "float64") for j, w in chosen.items())
    assert_close(y.numpy(), expected, "float64")

    dst, src = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    args = (dict(self_weight=0.5, src_weights={}, dst_weights=[]) if SIZE == 1 else
            dict(self_weight=0.5, src_weights={src: 0.25}, dst_weights={dst: 2.0 * (RANK + 1)}, check_topology=True))
    x = device(RANK, SHAPE, "float32")
    ctx.neighbor_allreduce(x, out=x, **args)
    assert_same_bits(x, ctx.neighbor_allreduce(host(RANK, SHAPE, "float32"), **args), reduced=True)
    expected = 0.5 * values(RANK, SHAPE, "float32")
    if SIZE > 1:
        expected = expected + 0.25 * 2.0 * (src + 1) * values(src, SHAPE, "float32")
    assert_close(x.numpy(), expected, "float32")


def test_neighbor_allgather_static_and_dynamic(ctx):
    x = device(RANK, (RANK + 1, 2), "int32")
    sources = exp2_in_neighbors(RANK, SIZE)
    expected = np.concatenate([host(j, (j + 1, 2), "int32") for j in sources] or [np.zeros((0, 2), "int32")])
    assert_same_bits(ctx.neighbor_allgather(x), expected)
    others = [r for r in reversed(range(SIZE)) if r != RANK]
    z = ctx.neighbor_allgather_nonblocking(x, src_ranks=others, dst_ranks=others, check_topology=True).wait()
    expected = np.concatenate([host(j, (j + 1, 2), "int32") for j in others] or [np.zeros((0, 2), "int32")])
    assert_same_bits(z, expected)


def test_pair_gossip(ctx):
    peer = RANK ^ 1
    if peer < SIZE:  # only the pair calls
        x = device(RANK, SHAPE, "float32")
        y = ctx.pair_gossip(x, peer, self_weight=0.75, pair_weight=0.25)
        assert_same_bits(y, ctx.pair_gossip(host(RANK, SHAPE, "float32"), peer, self_weight=0.75, pair_weight=0.25))
        expected = 0.75 * values(RANK, SHAPE, "float32") + 0.25 * values(peer, SHAPE, "float32")
        assert_close(y.numpy(), expected, "float32")
    ctx.barrier()


# ---- windows ----------------------------------------------------------------------------
def test_windows_put_get_accumulate_update(ctx):
    """The same steps on a device-backed window and a NumPy one give the same bits."""
    shape = (4, 5)
    x = device(RANK, shape, "float64")
    h = host(RANK, shape, "float64")
    sources, out = exp2_in_neighbors(RANK, SIZE), exp2_out_neighbors(RANK, SIZE)
    windows = [ctx.window(x, "gpu.win"), ctx.window(h, "gpu.win.host")]
    try:
        for win in windows:
            win.put()
        ctx.barrier()  # every put has landed once every rank returned from put
        for win in windows:
            win.update()
        assert_same_bits(x, h)
        expected = (values(RANK, shape, "float64") + sum(values(j, shape, "float64") for j in sources))
        assert_close(x.numpy(), expected / (len(sources) + 1), "float64")
        ctx.barrier()  # nobody changes its tensor while a neighbor may read it
        for win in windows:
            win.accumulate(dst_weights={r: 0.5 for r in out}, self_weight=0.5)
        ctx.barrier()
        for win in windows:
            win.update(self_weight=1.0, neighbor_weights={j: 1.0 for j in sources}, reset=True)
        assert_same_bits(x, h)
        ctx.barrier()
        for win in windows:
            win.get_nonblocking(src_weights={j: 2.0 for j in sources}).wait()
        ctx.barrier()
        for win in windows:
            win.update(self_weight=0.5, neighbor_weights={j: 0.25 for j in sources})
            win.update_then_collect()
        assert_same_bits(x, h)
        ctx.barrier()
    finally:
        for win in windows:
            win.free()


# ---- streams ----------------------------------------------------------------------------
def test_operations_wait_for_the_callers_stream(ctx):
    """A fill queued behind a sleep on the array's current stream must be seen: Starling
    orders against that stream (the emulator's random delays make a missed wait show)."""
    stream = new_stream()
    try:
        x = device(RANK, (64,), "float32")
        filled = host(RANK, (64,), "float32", salt=7)
        saved = starling.get_cuda_stream()
        with using_stream(stream):
            emu.starling_emu_sleep_on_stream(stream, 100000)
            emu.starling_emu_fill_on_stream(stream, x.ptr, filled.ctypes.data, filled.nbytes)
            y = ctx.allreduce(x, "sum")
            assert x.last_stream == stream  # asked for the data on the array's own stream
        assert starling.get_cuda_stream() == saved  # the thread's stream is restored after the call
        assert_same_bits(y, ctx.allreduce(filled, "sum"), reduced=True)
        # A window update orders against the stream too (it takes no tensor argument).
        with ctx.window(x, "gpu.stream") as win, using_stream(stream):
            emu.starling_emu_sleep_on_stream(stream, 100000)
            emu.starling_emu_fill_on_stream(stream, x.ptr, filled.ctypes.data, filled.nbytes)
            win.update(self_weight=2.0, neighbor_weights={})
            assert_same_bits(x, 2 * filled)
            ctx.barrier()
    finally:
        emu.starling_emu_stream_destroy(stream)


def test_generic_arrays_use_the_threads_stream(ctx):
    """A type Starling does not know (no registration): its data is asked for on this
    thread's stream (starling.set_cuda_stream), results come from its namespace."""

    class Foreign:
        def __init__(self, inner):
            self.inner, self.shape, self.dtype = inner, inner.shape, inner.dtype

        def device(self):  # a method, as in JAX before 0.4.27
            return self.inner.device

        def __dlpack__(self, stream=None):
            return self.inner.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.inner.__dlpack_device__()

        def __array_namespace__(self, api_version=None):
            return emu_array.namespace

    stream = new_stream()
    try:
        x = device(RANK, (8,), "float64")
        starling.set_cuda_stream(stream)
        try:
            with using_stream(stream):
                y = ctx.allreduce(Foreign(x), "max")
        finally:
            starling.set_cuda_stream(None)
        assert x.last_stream == stream and starling.get_cuda_stream() == 0
        assert_same_bits(y, ctx.allreduce(host(RANK, (8,), "float64"), "max"), reduced=True)
        with pytest.raises(TypeError, match="in place"):
            ctx.allreduce(Foreign(x), out=Foreign(x))
        y = ctx.allreduce(Foreign(x), "sum")  # the legacy default stream: DLPack's 1
        assert x.last_stream == 1
    finally:
        emu.starling_emu_stream_destroy(stream)


# ---- bad input and bookkeeping -----------------------------------------------------------------
def test_device_and_host_memory_in_one_call(ctx):
    x = device(RANK, (4,), "float32")
    with pytest.raises(starling.InvalidArgumentError, match=r"in is on cuda:0 but out is host memory"):
        ctx.allreduce(x, out=np.zeros(4, np.float32))
    with pytest.raises(starling.InvalidArgumentError, match=r"is on cuda:0 but .* is host memory"):
        ctx.allreduce(np.zeros(4, np.float32), out=x)


def test_host_memory_that_claims_to_be_on_the_gpu(ctx):
    liar = EmuArray.from_numpy(np.ones(4, np.float32), host_memory=True)
    with pytest.raises(starling.InvalidArgumentError, match=r"says it is on cuda:0 but its data pointer is host"):
        ctx.allreduce(liar)
    with pytest.raises(starling.InvalidArgumentError, match="host memory"):
        ctx.window(liar, "gpu.liar")
    assert ctx.windows == []


def test_gpu_path_and_staged_bytes(ctx):
    before = ctx.stats()["staged_bytes"]
    paired = (RANK ^ 1) < SIZE
    if paired:
        ctx.pair_gossip(device(RANK, (16,), "float64"), RANK ^ 1)
    ctx.allreduce(device(RANK, (16,), "float64"))
    assert ctx.stats()["gpu_path"] == ("nccl" if NCCL else "staged")
    if NCCL:
        assert ctx.gpu_path.startswith("nccl on cuda:0: every rank has a GPU of its own"), ctx.gpu_path
    else:
        assert ctx.gpu_path.startswith("staged on cuda:0"), ctx.gpu_path
        assert "emulated device" in ctx.gpu_path
        assert ctx.stats()["staged_bytes"] >= before + 2 * 16 * 8  # in and out, each copied once
    if paired:  # pair gossip is staged on both paths
        assert ctx.stats()["staged_bytes"] >= before + 2 * 16 * 8


def test_capsules_and_device_memory_are_released(ctx):
    x = device(RANK, (16,), "float32")
    for _ in range(3):
        ctx.allreduce(x)
        ctx.allreduce_nonblocking(x, out=x).wait()
    assert emu_array.live_exports() == 0  # every capsule Starling borrowed was dropped
    before = emu.starling_emu_live_allocations()
    del x
    assert emu.starling_emu_live_allocations() == before - 1
