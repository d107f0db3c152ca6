"""Requests: the handle of a nonblocking operation."""

from typing import Any, Callable, Dict, Optional

from . import _core
from .errors import StarlingError

_PENDING, _DONE, _FAILED = 0, 1, 2


class Request:
    """A running operation. It keeps every tensor the operation uses alive until the
    operation has finished, so the caller may drop its own references.

    ``wait()`` blocks (with the GIL released) and returns the result; ``done()`` polls.
    Used as a context manager, the request is waited on when the block ends.
    """

    __slots__ = ("_handle", "_keep", "_finish", "_state", "_result")

    def __init__(self, handle: Any, keep: Any, finish: Optional[Callable[[], Any]] = None,
                 result: Any = None) -> None:
        self._handle = handle
        self._keep = keep        # tensors and capsules the C side borrows
        self._finish = finish    # builds the result once the operation has finished (or None:
        self._result = result    # the result is this object, e.g. the output tensor)
        self._state = _PENDING

    @classmethod
    def completed(cls, result: Any) -> "Request":
        """A request for work that finished at once (nothing to wait for)."""
        request = cls(None, None, None, result)
        request._state = _DONE
        return request

    def done(self) -> bool:
        """True once the operation has finished (successfully or not: wait() tells)."""
        if self._state != _PENDING:
            return True
        try:
            return _core.request_test(self._handle)
        except StarlingError:
            return True  # finished with an error, which wait() raises

    def wait(self) -> Any:
        """Blocks until the operation finishes; returns its result or raises its error.
        Waiting again returns the same result (or raises the same error)."""
        if self._state == _PENDING:
            handle, self._handle = self._handle, None
            try:
                _core.request_wait(handle)
            except BaseException as error:
                self._state, self._result = _FAILED, error
            else:
                self._state = _DONE
            finally:
                _core.request_free(handle)
                self._keep = None
            finish, self._finish = self._finish, None
            if self._state == _DONE and finish is not None:
                self._result = finish()
        if self._state == _FAILED:
            raise self._result
        return self._result

    def __enter__(self) -> "Request":
        return self

    def __exit__(self, kind: Optional[type], value: Optional[BaseException], tb: Any) -> None:
        if kind is None:
            self.wait()
        elif self._state == _PENDING:
            self._quiet_wait()  # already unwinding: finish the operation, keep the first error

    def _quiet_wait(self) -> None:
        try:
            self.wait()
        except Exception:
            pass

    def __del__(self) -> None:
        # The C side still borrows the tensors: finish before letting them go.
        if self._state == _PENDING and self._handle is not None:
            self._quiet_wait()

    def __repr__(self) -> str:
        state = {_PENDING: "pending", _DONE: "done", _FAILED: "failed"}[self._state]
        return f"<starling.Request {state}>"


# The int handles of the framework front ends (starling.torch, starling.tensorflow):
# each keeps a dict {handle: Request}; these are the lookups all of them share.
def poll_handle(handles: Dict[int, "Request"], handle: int) -> bool:
    """True once the request behind handle has finished; the handle stays registered."""
    request = handles.get(handle)
    if request is None:
        raise ValueError(f"Handle {handle} was not created or has been cleared.")
    return request.done()


def take_handle(handles: Dict[int, "Request"], handle: int) -> "Request":
    """Unregisters handle and returns its request, for synchronize()."""
    request = handles.pop(handle, None)
    if request is None:
        raise ValueError(f"Cannot find handle {handle} to synchronize: it was not returned by a *_nonblocking "
                         "call or was already synchronized.")
    return request
