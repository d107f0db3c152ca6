"""Bad input from Python: every case raises TypeError or ValueError (or a Starling
exception subclassing them) with a message saying what to do; nothing crashes."""

import re
import time

import numpy as np
import pytest
import torch

import starling
import starling.torch as bf
from starling import _core
from conftest import RANK, SIZE
from dlpack_fakes import DLPackOnly, FakeTensor


def test_wrong_python_types(ctx):
    for bad in ([1.0, 2.0], 3.0, "abc", None, {"a": 1}):
        with pytest.raises(TypeError, match="__dlpack__"):
            ctx.allreduce(bad)
    with pytest.raises(TypeError, match="torch.Tensor"):
        bf.allreduce(np.ones(3))
    with pytest.raises(TypeError, match="torch.Tensor"):
        bf.neighbor_allreduce([1.0])
    with pytest.raises(TypeError, match="name must be a str"):
        bf.allreduce(torch.ones(3), name=5)
    with pytest.raises(ValueError, match="op must be one of"):
        ctx.allreduce(np.ones(3), "product")
    with pytest.raises(TypeError, match="integer ranks"):
        ctx.neighbor_allreduce(np.ones(3), self_weight=0.5, src_weights={"zero": 0.5})
    with pytest.raises(TypeError, match="numbers"):
        ctx.neighbor_allreduce(np.ones(3), self_weight=0.5, src_weights={0: "half"})
    with pytest.raises(TypeError, match="dict"):
        ctx.neighbor_allreduce(np.ones(3), self_weight=0.5, src_weights=[0.5])
    with pytest.raises(TypeError):
        bf.broadcast(torch.ones(3), root_rank="0")
    with pytest.raises(TypeError, match="list of ranks"):
        bf.neighbor_allgather(torch.ones(3), src_ranks=5, dst_ranks=5)
    with pytest.raises(TypeError, match="topology must be"):
        ctx.set_topology("ring")
    with pytest.raises(TypeError, match="size must be an int"):
        starling.Topology.ring(2.5)


def test_unsupported_dtypes(ctx):
    for bad in (np.zeros(3, dtype=bool), np.zeros(3, dtype=np.complex64), torch.zeros(3, dtype=torch.bool),
                torch.zeros(3, dtype=torch.complex64)):
        with pytest.raises(starling.UnsupportedError, match="float16, bfloat16, float32"):
            ctx.allreduce(bad)
    with pytest.raises(ValueError, match="not supported"):
        bf.allreduce(torch.zeros(3, dtype=torch.bool), average=False)
    # NumPy 2 and PyTorch 2 export bool as DLPack's kDLBool, older ones refuse to export
    # it: either way the error names bool.
    for bad in (np.zeros(3, dtype=bool), torch.zeros(3, dtype=torch.bool)):
        with pytest.raises(starling.UnsupportedError, match="bool"):
            ctx.allreduce(bad)
        with pytest.raises(starling.UnsupportedError, match="bool"):
            ctx.broadcast(bad, 0)
    with pytest.raises(starling.UnsupportedError, match="bool"):
        bf.allgather(torch.zeros(3, dtype=torch.bool))
    # Types PyTorch 2 cannot export at all (BufferError inside torch): Starling's error.
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            bad = torch.zeros(3).to(getattr(torch, name))
            with pytest.raises(starling.UnsupportedError, match="float8"):
                ctx.allreduce(bad)
            with pytest.raises(starling.UnsupportedError, match="float8"):
                bf.allreduce(bad, average=False)  # (average: BlueFog's float-only AssertionError first)
    with pytest.raises(ValueError, match="dtype"):
        ctx.allreduce(np.zeros(3, dtype=np.uint32))  # uint32 has no reduction kernel
    with pytest.raises(ValueError, match="buffer format"):
        _core.allreduce(ctx._handle, memoryview(b"abc").cast("c"), np.zeros(3, np.uint8), 0, None)


def test_non_contiguous_tensors(ctx):
    for bad in (np.zeros((4, 4))[:, ::2], np.zeros((3, 4)).T, torch.zeros(4, 4).t(), torch.zeros(8)[::2]):
        with pytest.raises(starling.InvalidArgumentError, match=r"not contiguous.*contiguous copy"):
            ctx.allreduce(bad)
    with pytest.raises(ValueError, match="contiguous"):
        bf.allreduce(torch.zeros(4, 4).t())
    with pytest.raises(ValueError, match="contiguous"):
        bf.neighbor_allreduce(torch.zeros(4, 4)[:, 1])
    ro = np.zeros((4, 4))[:, ::2]
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="contiguous"):
        ctx.allreduce(ro)  # read-only arrays go through the buffer protocol: same check


def test_tensors_on_an_unsupported_device(ctx):
    fake = FakeTensor(device_type=2)  # claims CUDA memory
    # A host pointer labelled CUDA: UNSUPPORTED where no GPU can be used (CI), else
    # INVALID_ARGUMENT (not device memory); both name the tensor and device.
    with pytest.raises((starling.UnsupportedError, starling.InvalidArgumentError), match=r"in is on cuda:0"):
        _core.allreduce(ctx._handle, fake.capsule(), fake.capsule(), _core.STARLING_SUM, None)
    with pytest.raises(starling.UnsupportedError, match="CPU"):
        ctx.allreduce(fake)
    with pytest.raises(starling.UnsupportedError, match="meta"):
        ctx.allreduce(torch.zeros(3, device="meta"))
    with pytest.raises(ValueError, match="meta"):
        bf.allreduce(torch.zeros(3, device="meta"))
    with pytest.raises(ValueError, match="not supported"):
        bf.allreduce(torch.zeros(3).to_sparse())


# Descriptors whose sizes overflow or make no sense (data: 8 float32, 32 bytes), with the
# message each must give; they reach the C library exactly as written.
BAD_DESCRIPTORS = [
    (dict(shape=[2**61]), "shape [2305843009213693952] of float32 has a byte size that overflows"),
    (dict(shape=[2**32, 2**32], dtype=(2, 64, 1)),
     "shape [4294967296, 4294967296] of float64 has a byte size that overflows"),
    (dict(byte_offset=2**63), "+ byte_offset 9223372036854775808 + 32 bytes runs past the end of the address space"),
    (dict(byte_offset=2**64 - 4), "+ byte_offset 18446744073709551612 + 32 bytes runs past the end of the address space"),
    (dict(shape=[-4]), "negative dimension -4 at index 0"),
    (dict(strides=[-1]), "not contiguous (stride -1 at dimension 0, expected 1)"),
    (dict(shape=[1] * 65), "ndim 65 (must be between 0 and 64)"),
    (dict(ndim=-1), "ndim -1 (must be between 0 and 64)"),
]


# The entry points that take a tensor, called straight through the private module.
DESCRIPTOR_CALLS = {
    "allreduce_in_place": lambda h, bad, good, dims: _core.allreduce(h, bad.capsule(), bad.capsule(), 0, "bad"),
    "allreduce_out": lambda h, bad, good, dims: _core.allreduce(h, good.__dlpack__(), bad.capsule(), 0, "bad"),
    "allreduce_nonblocking": lambda h, bad, good, dims: _core.allreduce_nonblocking(h, bad.capsule(),
                                                                                    bad.capsule(), 0, "bad"),
    "local_allreduce": lambda h, bad, good, dims: _core.local_allreduce(h, bad.capsule(), bad.capsule(), 0, "bad"),
    "broadcast": lambda h, bad, good, dims: _core.broadcast(h, bad.capsule(), bad.capsule(), 0, "bad"),
    "allgather_first_dims": lambda h, bad, good, dims: _core.allgather_first_dims(h, bad.capsule(), dims, "bad"),
    "window_create": lambda h, bad, good, dims: _core.window_create(h, bad.capsule(), "never_created", 0),
}


@pytest.mark.parametrize("call", DESCRIPTOR_CALLS.values(), ids=DESCRIPTOR_CALLS.keys())
@pytest.mark.parametrize("fields,message", BAD_DESCRIPTORS, ids=[m.split(" (")[0] for _, m in BAD_DESCRIPTORS])
def test_descriptors_whose_sizes_overflow(ctx, fields, message, call):
    bad = FakeTensor(8, device_type=1, **fields)
    good = np.zeros(8, dtype=np.float32)
    with pytest.raises(starling.InvalidArgumentError, match=re.escape(message)):
        call(ctx._handle, bad, good, np.zeros(SIZE, dtype=np.int64))
    assert not np.any(bad.array) and not np.any(good)  # nothing was written
    ctx.barrier()  # nothing was queued: every rank still lines up
    assert np.all(ctx.allreduce(np.ones(2)) == SIZE)


def test_bad_capsules(ctx):
    fake = FakeTensor(device_type=1, name=b"used_dltensor")
    with pytest.raises(ValueError, match="already consumed"):
        _core.allreduce(ctx._handle, fake.capsule(), fake.capsule(), 0, None)
    fake = FakeTensor(device_type=1, name=b"something")
    with pytest.raises(TypeError, match="'dltensor'"):
        _core.allreduce(ctx._handle, fake.capsule(), fake.capsule(), 0, None)
    with pytest.raises(TypeError, match="capsule"):
        _core.allreduce(ctx._handle, 42, 42, 0, None)


def test_immutable_and_read_only_outputs(ctx):
    x = DLPackOnly(np.full(3, float(RANK)))
    y = ctx.allreduce(x, "sum")  # out of place works and returns the caller's type
    assert isinstance(y, DLPackOnly) and np.all(y.numpy() == SIZE * (SIZE - 1) / 2)
    with pytest.raises(TypeError, match="in place"):
        ctx.allreduce(x, out=x)
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        ctx.allreduce(np.zeros(3), out=ro)


def test_mismatched_shapes_on_one_rank(ctx):
    with pytest.raises(starling.InvalidArgumentError, match="same dtype and shape"):
        ctx.allreduce(np.zeros(3), out=np.zeros(4))
    with pytest.raises(starling.InvalidArgumentError, match="same dtype and shape"):
        ctx.allreduce(np.zeros(3), out=np.zeros(3, dtype=np.float32))
    with pytest.raises(starling.InvalidArgumentError):
        ctx.allgather(np.array(1.0))  # 0-d: nothing to concatenate


@pytest.mark.skipif(SIZE < 2, reason="needs two ranks that disagree")
def test_mismatched_shapes_across_ranks(ctx):
    x = np.zeros(3 + RANK)  # every rank a different length
    with pytest.raises(starling.MismatchError, match="rank"):
        ctx.allreduce(x)
    with pytest.raises(ValueError, match="rank"):
        bf.allreduce(torch.zeros(2, 2 + RANK))
    h = bf.allreduce_nonblocking(torch.zeros(2 + RANK))
    with pytest.raises(ValueError, match="rank"):
        bf.synchronize(h)  # a nonblocking mismatch surfaces at synchronize, as in BlueFog
    with pytest.raises(starling.MismatchError):
        ctx.broadcast(np.zeros(4), root=RANK)  # every rank names itself as root
    ctx.barrier()  # the context stays usable after mismatches
    assert np.all(ctx.allreduce(np.ones(2)) == SIZE)


@pytest.mark.skipif(SIZE < 3, reason="at two ranks the rings are the default graph")
def test_disagreement_under_a_ring_ends_on_every_rank_within_seconds():
    """Rank 0 calls allreduce, the others neighbor_allreduce, under the ring where each
    rank sends to the one before it: rank 0 and the last rank then wait for each other
    and no message of either operation reaches the other. Their stalled waits tell each
    other where they are (STARLING_MISMATCH_CHECK_SECONDS, 1 s): every rank gets
    MismatchError in seconds, or completes with a right result where all its sources
    made its call; the next call gives the exact sum or fails at once."""
    c = starling.Context()
    try:
        c.set_topology(starling.Topology.ring(SIZE, 1))
        sources = list(c.in_neighbors)  # under this ring: the next rank
        may_succeed = RANK != 0 and 0 not in sources
        x = np.full(24, RANK + 1.0)
        start = time.monotonic()
        error = None
        try:
            out = c.allreduce(x) if RANK == 0 else c.neighbor_allreduce(x)
        except starling.MismatchError as e:
            error = str(e)
        took = time.monotonic() - start
        after_error = None
        try:
            total = c.allreduce(np.ones(3), name="after")
        except (starling.MismatchError, starling.PeerFailedError) as e:  # a rank that failed may have closed
            after_error = str(e)
        after_took = time.monotonic() - start - took
    finally:
        c.close()
    assert took < 5 and after_took < 5, (took, after_took)
    if error is None:
        assert may_succeed, f"rank {RANK} completed with a wrong result"
        assert np.allclose(out, (RANK + 1.0 + sum(r + 1.0 for r in sources)) / (1 + len(sources)))
    else:
        assert re.search("ranks disagree|different operations|out of step", error), error
    if after_error is None:
        assert np.all(total == SIZE)


def test_bad_ranks_and_weights(ctx):
    x = np.ones(3)
    with pytest.raises(starling.InvalidArgumentError, match="root"):
        ctx.broadcast(x, SIZE + 3)
    with pytest.raises(starling.InvalidArgumentError, match="out of range"):
        ctx.neighbor_allreduce(x, self_weight=0.5, src_weights={}, dst_weights=[SIZE + 1])
    with pytest.raises(starling.InvalidArgumentError, match="self"):
        ctx.neighbor_allreduce(x, self_weight=0.5, src_weights={RANK: 0.5}, dst_weights=[])
    with pytest.raises(starling.InvalidArgumentError, match="finite and >= 0"):
        ctx.neighbor_allreduce(x, self_weight=float("nan"), src_weights={}, dst_weights=[])
    with pytest.raises(starling.InvalidArgumentError, match="finite and >= 0"):
        bf.neighbor_allreduce(torch.ones(3), self_weight=-0.5, src_weights={}, dst_weights=[])
    with pytest.raises(starling.InvalidArgumentError, match="peer"):
        ctx.pair_gossip(x, RANK)
    with pytest.raises(ValueError, match="go together"):
        ctx.neighbor_allreduce(x, self_weight=0.5)
    with pytest.raises(starling.InvalidArgumentError):
        starling.Topology(2, [(0, 5)])
    with pytest.raises(ValueError, match="edge"):
        starling.Topology(2, [(0,)])
    with pytest.raises(starling.InvalidArgumentError, match="nodes"):
        ctx.set_topology(starling.Topology.ring(SIZE + 1))


def test_request_misuse_is_harmless(ctx):
    request = ctx.allreduce_nonblocking(np.ones(3))
    assert request.wait() is request.wait()  # waiting twice returns the first result
    with pytest.raises(starling.UnsupportedError, match="floating-point"):
        ctx.allreduce_nonblocking(np.ones(3, dtype=np.int32), "average")  # checked before anything is queued
    ctx.barrier()  # nothing was queued by the failed call: the ranks still agree


def test_closed_context_raises():
    other = starling.Context()
    other.close()
    other.close()  # closing twice is harmless
    with pytest.raises(starling.InvalidHandleError, match="already freed or destroyed"):
        other.allreduce(np.ones(2))
    with pytest.raises(starling.InvalidHandleError):
        other.rank


def test_private_module_survives_garbage():
    """Every wrapped C function, called with garbage of every arity, raises: it never
    crashes the interpreter (SWIG's error paths release only what they converted)."""
    garbage = (None, 42, -1, "x", 2.5, b"\x00")
    names = [n for n in dir(_core) if callable(getattr(_core, n)) and not n.startswith("_")]
    calls = 0
    for name in names:
        fn = getattr(_core, name)
        for arity in range(0, 18):
            for value in garbage:
                try:
                    fn(*([value] * arity))
                except (TypeError, ValueError, OverflowError, starling.StarlingError):
                    pass
                calls += 1
    _core.set_cuda_stream(None)  # set_cuda_stream(-1) is valid: leave the session's default
    assert calls > 1000
