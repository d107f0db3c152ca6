"""Starling: decentralized collective communication for distributed training.

Framework-neutral: every operation takes any tensor that exports DLPack (NumPy arrays,
PyTorch tensors, ...) in CPU memory and returns results of the caller's type::

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

from . import _core
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


def config() -> str:
    """The STARLING_* environment variables: name, value in effect, default, meaning."""
    return _core.config_string()


__all__ = [
    "Context", "Request", "Topology", "Schedule", "Window", "config", "library_version", "__version__",
    "StarlingError", "InvalidArgumentError", "InvalidHandleError", "InvalidUsageError", "UnsupportedError",
    "MismatchError", "StarlingTimeoutError", "ShutdownError", "TransportError", "NotFoundError",
    "AlreadyExistsError", "StarlingMemoryError", "InternalError", "AbortedError", "PeerFailedError", "DeviceError",
]
