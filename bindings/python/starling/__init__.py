"""Starling: decentralized collective communication for distributed training.

Framework-neutral: every operation takes any tensor that exports DLPack (NumPy arrays,
PyTorch tensors, CuPy arrays, ...) in CPU or CUDA memory and returns results of the
caller's type::

    import numpy as np
    import starling

    ctx = starling.Context()                      # MPI_COMM_WORLD (or Context(mpi4py_comm))
    x = np.full(4, float(ctx.rank))
    avg = ctx.allreduce(x, op="average")          # out of place: a new NumPy array
    ctx.neighbor_allreduce(x, out=x)              # in place, over the exponential-2 graph
    with ctx.allreduce_nonblocking(x) as req:     # nonblocking: a Request
        ...                                       # compute while Starling communicates
    total = req.wait()

``starling.torch`` is a drop-in replacement for ``bluefog.torch`` and
``starling.topology_util`` for ``bluefog.common.topology_util``.
"""

from typing import Optional

from . import _core, compression
from ._tensors import register_array_type
from .context import Context
from .errors import (AbortedError, AlreadyExistsError, InternalError, InvalidArgumentError, InvalidHandleError,
                     InvalidUsageError, MismatchError, NotFoundError, PeerFailedError, DeviceError, ShutdownError,
                     StarlingError, StarlingMemoryError, StarlingTimeoutError, TransportError, UnsupportedError)
from .request import Request
from .topology import Schedule, Topology
from .window import Window

__version__ = f"{_core.STARLING_VERSION_MAJOR}.{_core.STARLING_VERSION_MINOR}.{_core.STARLING_VERSION_PATCH}"


def library_version() -> str:
    """The version of the loaded libstarling (may differ from the headers' __version__)."""
    code = _core.get_version()
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def set_cuda_stream(stream: Optional[int]) -> None:
    """Sets this thread's CUDA stream (a cudaStream_t as an int; 0 or None: the legacy
    default stream) for arrays whose framework Starling cannot ask for its current
    stream (types it does not know, e.g. JAX arrays): their data is requested on it and
    operations on them start after the work queued there. PyTorch, CuPy and types
    registered with a current_stream use their framework's own stream instead."""
    _core.set_cuda_stream(stream)


def get_cuda_stream() -> int:
    """This thread's CUDA stream as set by set_cuda_stream (0: the legacy default)."""
    return _core.get_cuda_stream()


def config() -> str:
    """The STARLING_* environment variables: name, value in effect, default, meaning;
    then a "shm: ..." line per live context (which same-host ranks can share memory)."""
    return _core.config_string()


__all__ = [
    "Context", "Request", "Topology", "Schedule", "Window", "config", "library_version", "__version__",
    "register_array_type", "set_cuda_stream", "get_cuda_stream", "compression",
    "StarlingError", "InvalidArgumentError", "InvalidHandleError", "InvalidUsageError", "UnsupportedError",
    "MismatchError", "StarlingTimeoutError", "ShutdownError", "TransportError", "NotFoundError",
    "AlreadyExistsError", "StarlingMemoryError", "InternalError", "AbortedError", "PeerFailedError", "DeviceError",
]
