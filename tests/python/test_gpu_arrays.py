"""Device arrays of a real framework through the binding, run by the device kit
(tests/gpu/device_kit.sh): STARLING_TEST_ARRAYS names the framework, torch (CUDA
tensors), cupy or jax (GPU arrays) on a GPU machine, or emu (the emulated device's
EmuArray) where there is none, so that the kit's run here exercises this file too.
Skipped when unset (the main suite).

Each operation's result must be of the caller's type, on the caller's device, and equal
the same call on NumPy arrays (bit for bit on the staged path; within rounding on the
NCCL path) and a float64 reference. The stream contract (README, GPUs > Streams) is
checked with a real non-default stream where the framework has one: a long kernel then a
fill queued on it before the call must be waited for, and the result must be complete
for work queued after the call. JAX arrays are immutable: no in-place forms, windows or
streams there."""

import os

import numpy as np
import pytest

FRAMEWORK = os.environ.get("STARLING_TEST_ARRAYS")
if not FRAMEWORK:
    pytest.skip("needs STARLING_TEST_ARRAYS (torch, cupy, jax or emu): run by tests/gpu/device_kit.sh",
                allow_module_level=True)

import starling  # noqa: E402
from conftest import RANK, SIZE, assert_close, values  # noqa: E402
from test_core_neighbor import exp2_in_neighbors  # noqa: E402
from test_core_windows import exp2_out_neighbors  # noqa: E402

NCCL = os.environ.get("STARLING_GPU_PATH") == "nccl"
SHAPE = (3, 700)  # 8400 bytes of float32: several chunks with STARLING_GPU_CHUNK_BYTES=4096
DTYPES = ["float16", "float32", "float64", "int32", "uint8"]
DELAY_MS = 50  # how long a stream's queued work keeps it busy before the fill


class Torch:
    mutable, has_streams = True, True

    def __init__(self):
        import torch
        if not torch.cuda.is_available():
            pytest.skip("PyTorch sees no GPU", allow_module_level=True)
        self.torch = torch
        self.device = torch.device("cuda", torch.cuda.current_device())  # bf.init() chose it

    def array(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def numpy(self, x):
        return x.cpu().numpy()

    def native(self, x):
        return isinstance(x, self.torch.Tensor) and x.device == self.device

    def new_stream(self):
        return self.torch.cuda.Stream(self.device)

    def on(self, stream):
        return self.torch.cuda.stream(stream)

    def busy_then_copy(self, stream, dst, src):
        """On `stream`: a kernel that spins DELAY_MS, then dst[...] = src."""
        with self.torch.cuda.stream(stream):
            self.torch.cuda._sleep(int(DELAY_MS * 2e6))  # cycles at ~2 GHz
            dst.copy_(src, non_blocking=True)

    def double_on(self, stream, x):
        with self.torch.cuda.stream(stream):
            return x * 2

    def synchronize(self, stream):
        stream.synchronize()


class Cupy:
    mutable, has_streams = True, True

    def __init__(self):
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("CuPy sees no GPU", allow_module_level=True)
        self.cupy = cupy
        self.device = cupy.cuda.Device(0)
        self.device.use()
        self.spin = cupy.RawKernel(r'''
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}''', "spin")

    def array(self, a):
        return self.cupy.asarray(np.ascontiguousarray(a))

    def numpy(self, x):
        return self.cupy.asnumpy(x)

    def native(self, x):
        return isinstance(x, self.cupy.ndarray) and x.device.id == self.device.id

    def new_stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def on(self, stream):
        return stream

    def busy_then_copy(self, stream, dst, src):
        with stream:
            self.spin((1,), (1,), (np.int64(DELAY_MS * 2_000_000),))
            dst[...] = src

    def double_on(self, stream, x):
        with stream:
            return x * 2

    def synchronize(self, stream):
        stream.synchronize()


class Jax:
    mutable, has_streams = False, False

    def __init__(self):
        import jax
        # JAX makes float64 arrays float32 unless 64-bit types are enabled: the float64
        # cases must reach Starling as float64.
        jax.config.update("jax_enable_x64", True)
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        if not gpus:
            pytest.skip("JAX sees no GPU", allow_module_level=True)
        self.jax = jax
        self.device = gpus[0]

    def array(self, a):
        return self.jax.device_put(np.ascontiguousarray(a), self.device)

    def numpy(self, x):
        return np.asarray(x)

    def native(self, x):
        return isinstance(x, self.jax.Array) and x.devices() == {self.device}


class Emu:
    """The emulated device: EmuArray, its streams, sleep and fill (tests/python/emu_array.py)."""
    mutable, has_streams = True, True

    def __init__(self):
        import emu_array
        self.m = emu_array
        starling.register_array_type(emu_array.EmuArray, current_stream=lambda x: emu_array.current_stream,
                                     mutable=True)

    def array(self, a):
        return self.m.EmuArray.from_numpy(np.ascontiguousarray(a))

    def numpy(self, x):
        return x.numpy()

    def native(self, x):
        return type(x) is self.m.EmuArray

    def new_stream(self):
        return self.m.new_stream()

    def on(self, stream):
        return self.m.using_stream(stream)

    def busy_then_copy(self, stream, dst, src):
        host = src.numpy()
        self.m.emu.starling_emu_sleep_on_stream(stream, DELAY_MS * 1000)
        self.m.emu.starling_emu_fill_on_stream(stream, dst.ptr, host.ctypes.data, host.nbytes)
        self._keep = host  # the fill reads it later, on the stream's thread

    def double_on(self, stream, x):  # EmuArray has no kernels: read back (after the call) and double
        return self.array(2 * x.numpy())

    def synchronize(self, stream):
        self.m.check(self.m.emu.starling_emu_stream_synchronize(stream))


B = {"torch": Torch, "cupy": Cupy, "jax": Jax, "emu": Emu}[FRAMEWORK]()


def host(rank, shape, dtype, salt=0):
    return values(rank, shape, dtype, salt).astype(dtype)


def device(rank, shape, dtype, salt=0):
    return B.array(host(rank, shape, dtype, salt))


def check(result, expected, reduced=False):
    """result is the caller's type on the caller's device and has the NumPy path's bytes
    (a reduction on the NCCL path: within rounding)."""
    assert B.native(result), f"{type(result)} is not the caller's type on the caller's device"
    got = B.numpy(result)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype)
    if reduced and NCCL:
        assert_close(got, expected, got.dtype.name)
    else:
        assert got.tobytes() == expected.tobytes(), f"differs from the NumPy path: {got} vs {expected}"


def all_ranks(shape, dtype):
    return np.stack([values(r, shape, dtype) for r in range(SIZE)])


REDUCE = {"sum": np.sum, "average": np.mean, "min": np.min, "max": np.max}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(REDUCE))
def test_allreduce(ctx, op, dtype):
    if op == "average" and not dtype.startswith("float"):
        pytest.skip("average needs a floating-point dtype")
    x = device(RANK, SHAPE, dtype)
    y = ctx.allreduce(x, op)
    expected = ctx.allreduce(host(RANK, SHAPE, dtype), op)
    check(y, expected, reduced=True)
    assert_close(B.numpy(y), REDUCE[op](all_ranks(SHAPE, dtype), axis=0), dtype)
    check(ctx.allreduce_nonblocking(x, op).wait(), B.numpy(y))
    if B.mutable:
        out = device(RANK, SHAPE, dtype, salt=3)
        assert ctx.allreduce(x, op, out=out) is out
        check(out, B.numpy(y))
        assert ctx.allreduce_nonblocking(x, op, out=x).wait() is x
        check(x, B.numpy(y))


def test_broadcast_and_allgather(ctx):
    for root in range(SIZE):
        check(ctx.broadcast(device(RANK, (5, 3), "float16"), root), host(root, (5, 3), "float16"))
    x = device(RANK, (RANK + 1, 4), "float32")
    expected = np.concatenate([host(r, (r + 1, 4), "float32") for r in range(SIZE)])
    check(ctx.allgather(x), expected)
    check(ctx.allgather_nonblocking(x).wait(), expected)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_neighbor_allreduce_static_weighted_dynamic(ctx, dtype):
    x = device(RANK, SHAPE, dtype)
    y = ctx.neighbor_allreduce(x)
    check(y, ctx.neighbor_allreduce(host(RANK, SHAPE, dtype)), reduced=True)
    sources = exp2_in_neighbors(RANK, SIZE)
    reference = (values(RANK, SHAPE, dtype) + sum(values(j, SHAPE, dtype) for j in sources)) / (len(sources) + 1)
    assert_close(B.numpy(y), reference, dtype)
    chosen = {j: 0.125 * (j + 1) for j in sources[:1]}
    y = ctx.neighbor_allreduce_nonblocking(x, self_weight=0.5, src_weights=chosen).wait()
    check(y, ctx.neighbor_allreduce(host(RANK, SHAPE, dtype), self_weight=0.5, src_weights=chosen), reduced=True)
    dst, src = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    args = (dict(self_weight=0.5, src_weights={}, dst_weights=[]) if SIZE == 1 else
            dict(self_weight=0.5, src_weights={src: 0.25}, dst_weights={dst: 2.0}))
    check(ctx.neighbor_allreduce(x, **args), ctx.neighbor_allreduce(host(RANK, SHAPE, dtype), **args), reduced=True)


def test_neighbor_allgather_and_pair_gossip(ctx):
    x = device(RANK, (RANK + 1, 2), "int32")
    sources = exp2_in_neighbors(RANK, SIZE)
    expected = np.concatenate([host(j, (j + 1, 2), "int32") for j in sources] or [np.zeros((0, 2), "int32")])
    check(ctx.neighbor_allgather(x), expected)
    peer = RANK ^ 1
    if peer < SIZE:
        y = ctx.pair_gossip(device(RANK, SHAPE, "float32"), peer, self_weight=0.75, pair_weight=0.25)
        check(y, ctx.pair_gossip(host(RANK, SHAPE, "float32"), peer, self_weight=0.75, pair_weight=0.25))
    ctx.barrier()


def test_windows_match_host_windows(ctx):
    """Device-backed windows: the same steps as on a NumPy window give the same bits."""
    if not B.mutable:
        with pytest.raises(TypeError, match="mutable"):
            ctx.window(device(RANK, (4,), "float64"), "gpu.arrays.immutable")
        return
    shape = (4, 5)
    x, h = device(RANK, shape, "float64"), host(RANK, shape, "float64")
    sources, out = exp2_in_neighbors(RANK, SIZE), exp2_out_neighbors(RANK, SIZE)
    windows = [ctx.window(x, "gpu.arrays"), ctx.window(h, "gpu.arrays.host")]
    try:
        for win in windows:
            win.put()
        ctx.barrier()
        for win in windows:
            win.update()
        check(x, h)
        expected = (values(RANK, shape, "float64") + sum(values(j, shape, "float64") for j in sources))
        assert_close(B.numpy(x), expected / (len(sources) + 1), "float64")
        ctx.barrier()
        for win in windows:
            win.accumulate(dst_weights={r: 0.5 for r in out}, self_weight=0.5)
        ctx.barrier()
        for win in windows:
            win.update(self_weight=1.0, neighbor_weights={j: 1.0 for j in sources}, reset=True)
        check(x, h)
        ctx.barrier()
        for win in windows:
            win.get_nonblocking(src_weights={j: 2.0 for j in sources}).wait()
        ctx.barrier()
        for win in windows:
            win.update(self_weight=0.5, neighbor_weights={j: 0.25 for j in sources})
        check(x, h)
        ctx.barrier()
    finally:
        for win in windows:
            win.free()


def test_the_callers_stream_is_waited_for_and_results_are_ready(ctx):
    """A fill queued on the framework's current stream (a non-default one) behind a
    DELAY_MS kernel must be what Starling reads; the result must be complete for work
    queued on that stream after the call; the thread's Starling stream is restored."""
    if not B.has_streams:
        pytest.skip(f"{FRAMEWORK} has no user streams")
    stream = B.new_stream()
    x = device(RANK, (64, 1024), "float32")
    filled = device(RANK, (64, 1024), "float32", salt=7)
    B.synchronize(stream)
    saved = starling.get_cuda_stream()
    with B.on(stream):
        B.busy_then_copy(stream, x, filled)
        y = ctx.allreduce(x, "sum")
        doubled = B.double_on(stream, y)
    assert starling.get_cuda_stream() == saved
    B.synchronize(stream)
    expected = ctx.allreduce(host(RANK, (64, 1024), "float32", salt=7), "sum")
    check(y, expected, reduced=True)
    assert_close(B.numpy(doubled), 2 * expected.astype(np.float64), "float32")
    # A window update takes no tensor argument: it orders against the stream too.
    with ctx.window(x, "gpu.arrays.stream") as win:
        with B.on(stream):
            B.busy_then_copy(stream, x, filled)
            win.update(self_weight=2.0, neighbor_weights={})
        B.synchronize(stream)
        check(x, 2 * host(RANK, (64, 1024), "float32", salt=7))
        ctx.barrier()


def test_gpu_path(ctx):
    ctx.allreduce(device(RANK, (16,), "float64"))
    path = ctx.gpu_path
    assert path.startswith("nccl on cuda:" if NCCL else "staged on cuda:"), path
    assert ("emulated device" in path) == (FRAMEWORK == "emu"), path
    print(f"\n[{FRAMEWORK}] gpu path: {path}")
