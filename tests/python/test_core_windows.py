"""starling.Window (neutral API) with NumPy and PyTorch: put, accumulate, get, update,
versions, mutexes, associated p, nonblocking forms."""

import numpy as np
import pytest
import torch

import starling
from conftest import RANK, SIZE, as_f64, make, values
from test_core_neighbor import exp2_in_neighbors

SHAPE = (3, 2)


def exp2_out_neighbors(rank, size):
    return sorted({(rank + d) % size for d in (2 ** k for k in range(size.bit_length())) if d < size} - {rank})


@pytest.fixture(params=["numpy", "torch"])
def framework(request):
    return request.param


def test_create_put_update(ctx, framework):
    x = make(framework, RANK, SHAPE, "float64")
    with ctx.window(x, "core.put") as win:
        assert ctx.windows == ["core.put"] and win.tensor is x
        assert win.versions() == {j: 0 for j in exp2_in_neighbors(RANK, SIZE)}
        # Buffers start as copies of the rank's own tensor: the default update keeps x.
        win.update()
        np.testing.assert_allclose(as_f64(x), values(RANK, SHAPE, "float64"))
        ctx.barrier()  # no neighbor's put may land before that update
        win.put()
        ctx.barrier()  # every put has landed once every rank returned from put
        sources = exp2_in_neighbors(RANK, SIZE)
        assert win.versions() == {j: 1 for j in sources}
        y = win.update()
        expected = (values(RANK, SHAPE, "float64") + sum(values(j, SHAPE, "float64") for j in sources))
        np.testing.assert_allclose(as_f64(y), expected / (len(sources) + 1), atol=1e-12)
        assert y is x and win.versions() == {j: 0 for j in sources}
        ctx.barrier()
    assert ctx.windows == []


def test_weighted_put_accumulate_and_collect(ctx, framework):
    x = make(framework, RANK, SHAPE, "float32")
    win = ctx.window(x, "core.acc", zero_init=True)
    try:
        out = exp2_out_neighbors(RANK, SIZE)
        win.accumulate(dst_weights={r: 0.5 for r in out})
        win.accumulate(dst_weights={r: 0.25 for r in out}, self_weight=0.5)
        ctx.barrier()
        assert win.versions() == {j: 0 for j in exp2_in_neighbors(RANK, SIZE)}  # accumulate counts no version
        sources = exp2_in_neighbors(RANK, SIZE)
        win.update_then_collect()
        expected = 0.5 * values(RANK, SHAPE, "float32") + sum(0.75 * values(j, SHAPE, "float32") for j in sources)
        np.testing.assert_allclose(as_f64(x), expected, atol=1e-5)
        ctx.barrier()
        # Collect zeroed the buffers: collecting again changes nothing.
        before = as_f64(x).copy()
        win.update_then_collect()
        np.testing.assert_allclose(as_f64(x), before)
        ctx.barrier()
    finally:
        win.free()


def test_get_and_explicit_weights(ctx, framework):
    x = make(framework, RANK, SHAPE, "float64")
    win = ctx.window(x, "core.get", zero_init=True)
    try:
        ctx.barrier()
        sources = exp2_in_neighbors(RANK, SIZE)
        win.get_nonblocking(src_weights={j: 2.0 for j in sources}).wait()
        ctx.barrier()  # nobody updates its tensor while a neighbor may still be reading it
        assert win.versions() == {j: 1 for j in sources}
        chosen = {j: 0.5 for j in sources[:1]}
        y = win.update(self_weight=0.5, neighbor_weights=chosen, reset=True)
        expected = 0.5 * values(RANK, SHAPE, "float64") + sum(0.5 * 2.0 * values(j, SHAPE, "float64")
                                                              for j in chosen)
        np.testing.assert_allclose(as_f64(y), expected, atol=1e-12)
        win.get(src_weights=[])  # an explicit empty set fetches nothing
        ctx.barrier()
    finally:
        win.free()


def test_put_of_another_tensor_nonblocking_and_empty_destinations(ctx):
    x = torch.zeros(4, dtype=torch.float64)
    win = ctx.window(x, "core.nb", zero_init=True)
    try:
        other = torch.full((4,), float(RANK + 1), dtype=torch.float64)
        request = win.put_nonblocking(other, self_weight=0.5)
        del other  # the request keeps the tensor alive
        request.wait()
        ctx.barrier()
        sources = exp2_in_neighbors(RANK, SIZE)
        win.update(self_weight=1.0, neighbor_weights={j: 1.0 for j in sources})
        assert torch.allclose(x, torch.full((4,), float(sum(j + 1 for j in sources)), dtype=torch.float64))
        y = torch.ones(4, dtype=torch.float64)
        win.put(y, dst_weights={}, self_weight=0.25)  # sends nothing, still scales
        assert torch.all(y == 0.25)
        ctx.barrier()
    finally:
        win.free()


def test_associated_p(ctx):
    x = np.ones(2)
    ctx.set_window_associated_p(True)
    win = ctx.window(x, "core.p", zero_init=True)
    try:
        assert win.associated_p == 1.0
        out = exp2_out_neighbors(RANK, SIZE)
        share = 1.0 / (len(out) + 1)
        win.accumulate(dst_weights={r: share for r in out}, self_weight=share)
        assert win.associated_p == pytest.approx(share)
        ctx.barrier()
        win.update_then_collect()
        received = sum(1.0 / (len(exp2_out_neighbors(j, SIZE)) + 1) for j in exp2_in_neighbors(RANK, SIZE))
        assert win.associated_p == pytest.approx(share + received)
        ctx.barrier()
        win.associated_p = 1.0
        assert win.associated_p == 1.0
    finally:
        win.free()
        ctx.set_window_associated_p(False)


def test_mutexes(ctx):
    x = np.zeros(2)
    win = ctx.window(x, "core.mutex")
    try:
        with win.mutex():
            win.put()  # without require_mutex: not blocked by the mutex we hold
        with win.mutex(for_self=True):
            pass
        win.put(require_mutex=True)
        ctx.barrier()
    finally:
        win.free()


def test_window_errors(ctx):
    x = np.zeros(3)
    win = ctx.window(x, "core.errors")
    try:
        with pytest.raises(starling.AlreadyExistsError):
            ctx.window(np.zeros(3), "core.errors")
        with pytest.raises(starling.InvalidArgumentError, match="holds"):
            win.put(np.zeros(4))
        with pytest.raises(ValueError, match="go together"):
            win.update(self_weight=0.5)
        if SIZE > 1:
            with pytest.raises(starling.InvalidArgumentError, match="neighbor"):
                win.put(dst_weights=[RANK])
    finally:
        win.free()
    with pytest.raises(TypeError, match="name"):
        ctx.window(np.zeros(3), 42)
    with pytest.raises(starling.InvalidHandleError):
        win.__class__.versions(win)  # freed
