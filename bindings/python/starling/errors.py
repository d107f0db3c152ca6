"""Exceptions raised by Starling.

Every failing C call raises the subclass of :class:`StarlingError` that matches its
status code, with Starling's own message (what was wrong and what to do). The classes
also derive from the built-in exception a Python user would catch for that kind of
problem (``ValueError`` for bad arguments, ``TimeoutError`` for timeouts, ...), which
is also what BlueFog raised in those cases.
"""

import re

from . import _core


class StarlingError(RuntimeError):
    """Base class of every error reported by the Starling library."""

    #: The C status code (``starling_status_t``) this class stands for.
    status = 0


class InvalidArgumentError(StarlingError, ValueError):
    """A bad tensor, shape, rank, weight or option."""

    status = _core.STARLING_ERR_INVALID_ARGUMENT


class InvalidHandleError(StarlingError, ValueError):
    """A context, request, topology or window that was already freed or destroyed."""

    status = _core.STARLING_ERR_INVALID_HANDLE


class InvalidUsageError(StarlingError, ValueError):
    """The right arguments at the wrong moment (waited twice, windows still exist...)."""

    status = _core.STARLING_ERR_INVALID_USAGE


class UnsupportedError(StarlingError, ValueError):
    """A dtype, device or feature this build does not support."""

    status = _core.STARLING_ERR_UNSUPPORTED


class MismatchError(StarlingError, ValueError):
    """Ranks disagree on a collective call (operation, dtype, shape, root, topology)."""

    status = _core.STARLING_ERR_MISMATCH


class StarlingTimeoutError(StarlingError, TimeoutError):
    """Peers did not answer within STARLING_TIMEOUT_SECONDS."""

    status = _core.STARLING_ERR_TIMEOUT


class ShutdownError(StarlingError):
    """The context was destroyed (shut down) before the operation ran."""

    status = _core.STARLING_ERR_SHUTDOWN


class TransportError(StarlingError):
    """MPI failed; the context is unusable."""

    status = _core.STARLING_ERR_TRANSPORT


class NotFoundError(StarlingError, KeyError, ValueError):
    """No window with that name (a KeyError, as a dict lookup would raise)."""

    status = _core.STARLING_ERR_NOT_FOUND

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class AlreadyExistsError(StarlingError, ValueError):
    """A window name that is already taken."""

    status = _core.STARLING_ERR_ALREADY_EXISTS


class StarlingMemoryError(StarlingError, MemoryError):
    """Starling ran out of memory."""

    status = _core.STARLING_ERR_OUT_OF_MEMORY


class InternalError(StarlingError):
    """A bug in Starling: please report it with the message."""

    status = _core.STARLING_ERR_INTERNAL


class AbortedError(StarlingError):
    """The context was aborted (Context.abort()); close it (closing is then local)."""

    status = _core.STARLING_ERR_ABORTED


class PeerFailedError(StarlingError):
    """A rank of the context is gone (killed, crashed, or exited without closing its
    context); the message names it and :attr:`ranks` lists the ranks it names. Close the
    context (closing is then local), or, on Open MPI 5 with ULFM, repair it
    (Context.repair(), starling.torch.repair()) and go on with the survivors."""

    status = _core.STARLING_ERR_PEER_FAILED

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        message = str(args[0]) if args else ""
        #: The ranks the message names as gone (numbering before any repair), ascending.
        self.ranks = sorted({int(r) for names in _GONE.findall(message) for r in re.findall(r"rank (\d+)", names)})


# "rank 1 (pid 42 on host vm) is gone", "rank 1 and rank 3 (pid ...) are gone".
_GONE = re.compile(r"((?:rank \d+(?: \([^()]*\))?(?:, | and )?)+) (?:is|are) gone")


class DeviceError(StarlingError):
    """The CUDA runtime or NCCL failed; the message names the call."""

    status = _core.STARLING_ERR_DEVICE


_ALL = (InvalidArgumentError, InvalidHandleError, InvalidUsageError, UnsupportedError, MismatchError,
        StarlingTimeoutError, ShutdownError, TransportError, NotFoundError, AlreadyExistsError,
        StarlingMemoryError, InternalError, AbortedError, PeerFailedError, DeviceError)

for _cls in _ALL:
    _core.py_register_error(_cls.status, _cls)

__all__ = ["StarlingError"] + [cls.__name__ for cls in _ALL]
