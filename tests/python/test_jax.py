"""JAX arrays (CPU): every result comes back as a jax.Array, equal to a NumPy reference;
JAX's own transformations (jit, grad) compose with Starling's calls between them.

Skipped when JAX cannot be imported, unless STARLING_REQUIRE_JAX=1 (set by CI, whose
dependency installation installs JAX): then a missing JAX is a failure, not a skip."""

import os

import numpy as np
import pytest

from conftest import RANK, SIZE, values

if os.environ.get("STARLING_REQUIRE_JAX") == "1":
    import jax  # noqa: F401  (a failure here is the point)
else:
    jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

# JAX computes in float32 unless x64 is enabled; int32 and int8 stand for the integers.
DTYPES = ["float16", "float32", "int8", "uint8", "int32"]
TOLERANCE = {"float16": 2e-3, "float32": 1e-6}


def jax_array(rank, shape, dtype, salt=0):
    return jnp.asarray(values(rank, shape, dtype, salt).astype(dtype))


def reference(rank, shape, dtype, salt=0):
    return values(rank, shape, dtype, salt).astype(dtype).astype(np.float64)


def check(actual, expected, dtype, tolerance=None):
    assert isinstance(actual, jax.Array), type(actual)
    assert str(actual.dtype) == dtype
    tolerance = TOLERANCE.get(dtype, 0.0) if tolerance is None else tolerance
    scale = max(1.0, float(np.abs(expected).max())) if np.size(expected) else 1.0
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("dtype", DTYPES)
def test_collectives(ctx, dtype):
    x = jax_array(RANK, (3, 4), dtype)
    everyone = [reference(r, (3, 4), dtype) for r in range(SIZE)]
    total = ctx.allreduce(x, "sum")
    largest = ctx.allreduce_nonblocking(x, "max").wait()
    root = ctx.broadcast(x, SIZE - 1)
    gathered = ctx.allgather(x)
    check(total, sum(everyone), dtype)
    check(largest, np.max(everyone, axis=0), dtype)
    check(root, everyone[-1], dtype)
    check(gathered, np.concatenate(everyone), dtype)


def test_average_and_neighbor_operations(ctx):
    x = jax_array(RANK, (5,), "float32")
    mean = ctx.allreduce(x, "average")
    averaged = ctx.neighbor_allreduce(x)
    sources = ctx.in_neighbors
    weights = {s: 0.5 / len(sources) for s in sources}
    with ctx.neighbor_allreduce_nonblocking(x, self_weight=0.5 if sources else 1.0, src_weights=weights) as req:
        pass  # JAX computes meanwhile
    weighted = req.wait()
    neighbors = ctx.neighbor_allgather(x)
    check(mean, sum(reference(r, (5,), "float32") for r in range(SIZE)) / SIZE, "float32")
    mine = reference(RANK, (5,), "float32")
    check(averaged, (mine + sum(reference(s, (5,), "float32") for s in sources)) / (len(sources) + 1), "float32")
    check(weighted, (0.5 if sources else 1.0) * mine + sum(w * reference(s, (5,), "float32") for s, w in weights.items()),
          "float32")
    check(neighbors, np.concatenate([reference(s, (5,), "float32") for s in sources] or [np.zeros(0)]), "float32")


def test_jit_and_grad_compose_with_starling(ctx):
    """Data-parallel least squares: a jitted gradient per rank, averaged by Starling,
    equals the gradient of the global loss (every rank's data), computed here by JAX."""
    def loss(w, a, b):
        return jnp.mean((a @ w - b) ** 2)

    grad = jax.jit(jax.grad(loss))
    a = [jnp.asarray(values(r, (8, 3), "float32", salt=1), jnp.float32) for r in range(SIZE)]
    b = [jnp.asarray(values(r, (8,), "float32", salt=2), jnp.float32) for r in range(SIZE)]
    w = jnp.ones(3, jnp.float32)
    averaged = ctx.allreduce(grad(w, a[RANK], b[RANK]), "average")
    step = w - 0.1 * averaged  # the result feeds straight back into JAX
    expected = grad(w, jnp.concatenate(a), jnp.concatenate(b))
    check(averaged, np.asarray(expected, np.float64), "float32", tolerance=1e-5)  # summation order
    assert isinstance(step, jax.Array)


def test_immutable_arrays_refuse_in_place_forms(ctx):
    x = jnp.zeros(4, jnp.float32)
    with pytest.raises(TypeError, match="in place"):
        ctx.allreduce(x, out=x)
    with pytest.raises(TypeError, match="mutable"):
        ctx.window(x, "jax_window")


def test_bfloat16_is_a_clear_refusal(ctx):
    # NumPy 1.24 (Debian 12) has no bfloat16 to hold the result: say so, naming the dtype.
    import starling
    with pytest.raises(starling.UnsupportedError, match="bfloat16.*float32"):
        ctx.allreduce(jnp.ones(4, jnp.bfloat16))
