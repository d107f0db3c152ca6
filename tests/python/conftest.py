"""Shared fixtures for the Python tests. Every rank runs the same pytest session under
mpirun, so tests make the same collective calls in the same order on every rank, and
compute before they assert (a failed assertion never skips a collective)."""

import os

import numpy as np
import pytest
import torch

import starling
import starling.torch as bf

# One starling.torch context for the whole session (MPI cannot restart once finalized),
# plus a neutral Context for the framework-neutral API. Files that test start-up and
# shutdown themselves run in a fresh process (STARLING_TEST_FRESH_PROCESS=1).
FRESH_PROCESS = os.environ.get("STARLING_TEST_FRESH_PROCESS") == "1"
if FRESH_PROCESS:
    _CONTEXT = None
    RANK = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    SIZE = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
else:
    bf.init()
    _CONTEXT = starling.Context()
    RANK, SIZE = bf.rank(), bf.size()

# Every dtype Starling reduces, with NumPy's and torch's names (NumPy has no bfloat16).
DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8"]
NUMPY_DTYPES = [d for d in DTYPES if d != "bfloat16"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]

# Tolerances against float64 references of magnitude ~1 (integers are exact).
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-6, "float64": 1e-12}


def pytest_configure(config):
    if RANK != 0:
        config.option.verbose = -1  # rank 0 reports in detail, the others summarize


@pytest.fixture(scope="session")
def ctx():
    return _CONTEXT


def values(rank, shape, dtype, salt=0):
    """Deterministic per-rank data every rank can recompute: multiples of 1/8 in
    [-4, 4) for floats (exact in every float type), small integers otherwise (no
    overflow when summed over 4 ranks; non-negative for uint8)."""
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    h = (i * 2654435761 + rank * 40503 + salt * 97) % 64
    if dtype == "uint8":
        v = (h % 50).astype(np.float64)
    elif dtype.startswith("int"):
        v = (h % 41 - 20).astype(np.float64)
    else:
        v = (h - 31) / 8.0
    return v.reshape(shape)


def make(framework, rank, shape, dtype, salt=0):
    """values() as a NumPy array or torch tensor of `dtype`."""
    v = values(rank, shape, dtype, salt)
    if framework == "numpy":
        return v.astype(dtype)
    return torch.from_numpy(v).to(getattr(torch, dtype))


def as_f64(x):
    """Any tensor or array as a float64 NumPy array (torch bfloat16 included)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def assert_close(actual, expected, dtype):
    a, e = as_f64(actual), np.asarray(expected, dtype=np.float64)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    tol = TOLERANCE.get(dtype, 0.0)
    scale = max(1.0, float(np.abs(e).max())) if e.size else 1.0
    np.testing.assert_allclose(a, e, rtol=0, atol=tol * scale)


# Lines tests want in the final report (accuracy figures): printed by rank 0 at the end.
REPORT = []


def pytest_terminal_summary(terminalreporter):
    if REPORT and RANK == 0:
        terminalreporter.section(f"figures ({SIZE} ranks)")
        for line in REPORT:
            terminalreporter.write_line(line)
