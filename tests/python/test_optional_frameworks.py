"""NumPy 2 (DLPack 1.x versioned capsules) and JAX (immutable arrays, results through
the array-API namespace): run where those are installed, skipped otherwise (Debian 12
has NumPy 1.24 and no JAX; see the README for a venv that has both)."""

import numpy as np
import pytest

from starling import _core
from conftest import RANK, SIZE

numpy2 = pytest.mark.skipif(int(np.__version__.split(".")[0]) < 2, reason="needs NumPy 2 (DLPack 1.x)")


@numpy2
def test_versioned_capsules_and_their_read_only_flag(ctx):
    a = np.full(4, float(RANK), dtype=np.float32)
    b = np.zeros(4, np.float32)
    capsule = a.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)
    _core.allreduce(ctx._handle, capsule, b.__dlpack__(max_version=(1, 0)), _core.STARLING_SUM, None)
    assert np.all(b == SIZE * (SIZE - 1) / 2)
    read_only = np.zeros(4, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _core.allreduce(ctx._handle, capsule, read_only.__dlpack__(max_version=(1, 0)), 0, None)


def test_jax_arrays_come_back_as_jax_arrays(ctx):
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.full((2, 3), float(RANK), dtype=jnp.float32)
    y = ctx.allreduce(x, "sum")
    assert type(y) is type(x) and np.all(np.asarray(y) == SIZE * (SIZE - 1) / 2)
    assert type(ctx.allreduce_nonblocking(x, "max").wait()) is type(x)
    assert ctx.allgather(x).shape == (2 * SIZE, 3)
    with pytest.raises(TypeError, match="in place"):
        ctx.allreduce(x, out=x)
