"""Compressed allreduce and CHOCO neighbor averaging from Python (starling.Context and
starling.torch) against NumPy float64 references: exact for the casts and top-k,
statistical for random-k; error feedback; CHOCO consensus; mismatch and bad input."""

import numpy as np
import pytest
import torch

import starling
import starling.torch as bf
from starling.compression import BF16, FP16, RandomK, Sign, TopK
from conftest import RANK, SIZE


def noise(rank, n, step=0):
    i = np.arange(n, dtype=np.float64)
    return np.sin(0.37 * i + 1.3 * rank + 0.71 * step) * (1.0 + 0.01 * ((i * 7 + rank) % 13)) + 1e-4 * rank


def bf16(x):
    """float32 -> bfloat16 -> float64, round to nearest even (NumPy has no bfloat16)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def top_k(v, k):
    return np.argsort(-np.abs(v), kind="stable")[:k]


@pytest.mark.parametrize("compression,cast", [(FP16(), lambda x: x.astype(np.float16).astype(np.float64)),
                                             (BF16(), bf16)])
def test_casts_match_numpy_exactly(ctx, compression, cast):
    x = noise(RANK, 1000).astype(np.float32)
    y = ctx.allreduce(x, compression=compression)
    expected = sum(cast(noise(r, 1000).astype(np.float32)) for r in range(SIZE))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, expected.astype(np.float32))


def test_top_k_matches_numpy_exactly(ctx):
    x = noise(RANK, 300)
    y = ctx.allreduce(x, "average", compression=TopK(17))
    expected = np.zeros(300)
    for r in range(SIZE):
        v = noise(r, 300)
        idx = top_k(v, 17)
        expected[idx] += v[idx]
    np.testing.assert_array_equal(y, expected / SIZE)
    # A float is a ratio: ceil(0.05 * 300) = 15 per rank, on a torch tensor in place.
    t = torch.from_numpy(noise(RANK, 300))
    bf.allreduce_(t, average=False, name="topk.ratio", compression=TopK(0.05))
    expected = np.zeros(300)
    for r in range(SIZE):
        v = noise(r, 300)
        expected[top_k(v, 15)] += v[top_k(v, 15)]
    np.testing.assert_array_equal(t.numpy(), expected)


def test_random_k_is_shared_and_uniform(ctx):
    n, k, steps = 20, 5, 200
    hits = np.zeros(n)
    base = 1.0 + np.arange(n)
    for _ in range(steps):
        y = ctx.allreduce(base + RANK, name="py.randk", compression=RandomK(k, seed=7))
        kept = y != 0
        assert kept.sum() == k
        np.testing.assert_array_equal(y[kept], (SIZE * base + sum(range(SIZE)))[kept])
        hits += kept
    # P(kept) = 1/4: 50 +- 6.1 of 200 steps; 5 standard deviations either way.
    assert np.all(np.abs(hits - 50) < 31), hits
    ctx.compression_reset("py.randk")


def test_sign_matches_numpy(ctx):
    x = noise(RANK, 333).astype(np.float32)
    y = ctx.allreduce(x, compression=Sign())
    expected = np.zeros(333)
    for r in range(SIZE):
        v = noise(r, 333).astype(np.float32).astype(np.float64)
        expected += np.where(np.signbit(v), -1.0, 1.0) * np.abs(v).mean()
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-7)


def test_error_feedback_recovers_the_sum(ctx):
    n, k, steps, drain = 24, 3, 4, 9
    total = np.zeros(n)
    for t in range(steps + drain):
        x = noise(RANK, n, t) if t < steps else np.zeros(n)
        total += bf.allreduce(torch.from_numpy(x), average=False, name="py.ef",
                              compression=TopK(k, error_feedback=True)).numpy()
    expected = sum(noise(r, n, t) for r in range(SIZE) for t in range(steps))
    np.testing.assert_allclose(total, expected, rtol=0, atol=1e-11)
    bf.compression_reset("py.ef")


@pytest.mark.parametrize("compression,steps", [(FP16(), 60), (TopK(0.25, gamma=0.4), 400)])
def test_choco_reaches_consensus(ctx, compression, steps):
    n = 64
    x = noise(RANK, n)
    mean = sum(noise(r, n) for r in range(SIZE)) / SIZE
    for _ in range(steps):
        x = ctx.neighbor_allreduce(x, name="py.choco", compression=compression)
    assert np.abs(x - mean).max() < 1e-6
    ctx.compression_reset("py.choco")


def test_choco_through_starling_torch_nonblocking(ctx):
    x = torch.from_numpy(noise(RANK, 32))
    mean = sum(noise(r, 32) for r in range(SIZE)) / SIZE
    for _ in range(60):
        x = bf.synchronize(bf.neighbor_allreduce_nonblocking(x, name="py.choco.t", compression=BF16()))
    assert np.abs(x.numpy() - mean).max() < 1e-6
    bf.compression_reset()


def test_stats_count_bytes(ctx):
    before = ctx.stats()
    ctx.allreduce(np.ones(1000, dtype=np.float32), compression=TopK(10))
    after = ctx.stats()
    assert after["bytes_before_compression"] - before["bytes_before_compression"] == (SIZE - 1) * 4000
    assert after["bytes_after_compression"] - before["bytes_after_compression"] == (SIZE - 1) * 80


def test_mismatch(ctx):
    if SIZE == 1:
        pytest.skip("needs 2 ranks")
    compression = TopK(5) if RANK == 0 else FP16()
    with pytest.raises(starling.MismatchError, match="compressed allreduce"):
        ctx.allreduce(np.ones(50), compression=compression)


def test_bad_input(ctx):
    with pytest.raises(starling.UnsupportedError, match="top-k compression needs a floating-point tensor"):
        ctx.allreduce(np.ones(10, dtype=np.int8), compression=TopK(2))
    with pytest.raises(starling.UnsupportedError, match="int32"):
        ctx.allreduce(np.ones(10, dtype=np.int32), compression=Sign())
    with pytest.raises(starling.InvalidArgumentError, match="k = 11 is out of range"):
        ctx.allreduce(np.ones(10), compression=TopK(11))
    with pytest.raises(starling.InvalidArgumentError, match="ratio"):
        ctx.allreduce(np.ones(10), compression=TopK(1.5))
    with pytest.raises(starling.InvalidArgumentError, match="gamma"):
        ctx.neighbor_allreduce(np.ones(10), name="g", compression=FP16(gamma=2.0))
    with pytest.raises(starling.InvalidArgumentError, match="pass a name"):
        ctx.allreduce(np.ones(10), compression=FP16(error_feedback=True))
    with pytest.raises(starling.UnsupportedError, match="STARLING_SUM and STARLING_AVERAGE"):
        ctx.allreduce(np.ones(10), "max", compression=FP16())
    with pytest.raises(TypeError, match="starling.compression"):
        ctx.allreduce(np.ones(10), compression="topk")
    with pytest.raises(TypeError):
        TopK(True)
    ctx.allreduce(np.ones(10), name="py.shape", compression=TopK(2, error_feedback=True))
    with pytest.raises(starling.InvalidArgumentError, match=r"float64\[10\] but this call passes float64\[2, 5\]"):
        ctx.allreduce(np.ones((2, 5)), name="py.shape", compression=TopK(2, error_feedback=True))
    ctx.compression_reset("py.shape")
    ctx.allreduce(np.ones((2, 5)), name="py.shape", compression=TopK(2, error_feedback=True))
    ctx.compression_reset()
