"""One-sided window operations (win_*) for TensorFlow, with starling.torch's names and
semantics (BlueFog's TensorFlow side has none).

TensorFlow tensors are immutable, so a window cannot write into one: it keeps its own
copy in CPU memory (a NumPy array that Starling's window borrows). Create it from a
tf.Variable and the window follows the variable: every window call first copies the
variable's value in, and win_update / win_update_then_collect assign the result back.
Created from a tf.Tensor, the window's value is what win_update returns. In eager mode
a call runs at once; inside tf.function use them through tf.py_function (the window
state lives in Python).
"""

import contextlib
import itertools
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np
import tensorflow as tf

from ..errors import InvalidUsageError, NotFoundError
from .._args import check_rank_keys
from ..request import Request, poll_handle
from .mpi_ops import S, _ctx, _tensor

_FLOATS = (np.float16, np.float32, np.float64)


class _TfWindow:
    """A Starling window over a NumPy copy of a TensorFlow value (see the module doc)."""

    def __init__(self, tensor: Any, name: str, zero_init: bool) -> None:
        value = _tensor(tensor, "win_create")
        if value.dtype.as_numpy_dtype not in _FLOATS:
            raise InvalidUsageError(f"win_create: a window averages, so it needs a floating-point tensor, got "
                                    f"{value.dtype.name}")
        self.variable = tensor if isinstance(tensor, tf.Variable) else None
        self.dtype = value.dtype
        self.array = np.array(value.numpy(), copy=True, order="C")
        self.window = _ctx().window(self.array, name, zero_init=zero_init)

    def pull(self) -> None:
        """The window's value from its variable (no-op for a window made from a tensor)."""
        if self.variable is not None:
            np.copyto(self.array, self.variable.numpy())

    def value(self) -> tf.Tensor:
        """The window's value as a new tf.Tensor, also assigned to its variable."""
        result = tf.constant(self.array)
        if self.variable is not None:
            self.variable.assign(result)
        return result

    def own(self, tensor: Any) -> bool:
        return tensor is self.variable or tensor is None


_windows: Dict[str, _TfWindow] = {}
_handles: Dict[int, Request] = {}
_after: Dict[int, Callable[[], Any]] = {}  # what win_wait runs once a handle's request is done
_next_handle = itertools.count(1).__next__


def _window(name: str) -> _TfWindow:
    _ctx()
    window = _windows.get(name)
    if window is None:
        raise NotFoundError(f"window {name!r} does not exist (created windows: {sorted(_windows)}); "
                            "create it with win_create first")
    return window


def _register(request: Request, after: Optional[Callable[[], Any]] = None) -> int:
    handle = _next_handle()
    _handles[handle] = request
    if after is not None:
        _after[handle] = after
    return handle


def win_create(tensor: Any, name: str, zero_init: bool = False) -> bool:
    """Creates window `name` from a tf.Variable (followed, see the module doc) or a
    tf.Tensor (copied). Collective: same name, dtype and shape on every rank. Neighbor
    buffers start as copies of the value, or zeros. False if the name is taken."""
    if not isinstance(name, str):
        raise TypeError(f"a window name must be a str, got {type(name).__name__}")
    _ctx()
    if name in _windows:
        return False
    _windows[name] = _TfWindow(tensor, name, zero_init)
    return True


def win_free(name: Optional[str] = None) -> bool:
    """Frees window `name`, or every window when name is None (collective)."""
    _ctx()
    names = sorted(_windows) if name is None else [name]
    if name is not None:
        _window(name)
    for key in names:
        _windows.pop(key).window.free()
    return True


def win_update(name: str, self_weight: Optional[float] = None, neighbor_weights: Optional[Dict[int, float]] = None,
               reset: bool = False, clone: bool = False, require_mutex: bool = False) -> tf.Tensor:
    """value = self_weight * value + sum_r neighbor_weights[r] * buffer_r, returned as a
    tf.Tensor and assigned to the window's variable (with clone=True the window keeps its
    old value and its variable is left alone). Without weights: the topology's if
    weighted, else the uniform average over the value and every in-neighbor buffer. Local."""
    window = _window(name)
    if (self_weight is None) != (neighbor_weights is None):
        raise ValueError("Arguments self_weight and neighbor_weights have to be presented at the same time")
    if neighbor_weights is not None:
        if not isinstance(neighbor_weights, dict):
            raise ValueError("Argument neighbor_weights has to be a dictionary map from the (in-)neighbor rank to "
                             "the weights.")
        check_rank_keys(neighbor_weights, S.in_ranks,
                    "The key of weights should only contain the ranks that belong to in-neighbors and self rank.")
        self_weight = float(self_weight)
    window.pull()
    before = window.array.copy() if clone else None
    window.window.update(self_weight=self_weight, neighbor_weights=neighbor_weights, reset=reset,
                         require_mutex=require_mutex)
    if before is None:
        return window.value()
    result = tf.constant(window.array)
    np.copyto(window.array, before)
    return result


def win_update_then_collect(name: str, require_mutex: bool = True) -> tf.Tensor:
    """value += every in-neighbor buffer, then the buffers are zeroed (push-sum's
    collect step); returns the value (assigned to the window's variable)."""
    window = _window(name)
    window.pull()
    window.window.update_then_collect(require_mutex=require_mutex)
    return window.value()


def _put(kind: int, tensor: Any, name: str, self_weight: Optional[float], dst_weights: Any, require_mutex: bool,
         nonblocking: bool) -> Any:
    window = _window(name)
    check_rank_keys(dst_weights, S.out_ranks, "The key of dst_weights should only contain ranks that belong to "
                                          "out-neighbors (self-rank is not allowed).")
    sw = 1.0 if self_weight is None else float(self_weight)
    window.pull()
    if window.own(tensor):
        data = window.array  # the window's value; scaled by self_weight in place below
    else:
        if sw != 1.0 and not isinstance(tensor, tf.Variable):
            raise ValueError("self_weight scales the tensor put, and a tf.Tensor cannot change: pass a tf.Variable "
                             "(or the window's own variable, or None for the window's value)")
        value = _tensor(tensor, "win_put" if kind == 0 else "win_accumulate")
        if value.dtype != window.dtype or value.shape != window.array.shape:
            raise ValueError(f"window {name!r} holds {window.dtype.name}{list(window.array.shape)}; the tensor put "
                             f"is {value.dtype.name}{value.shape.as_list()}")
        data = np.array(value.numpy(), copy=True, order="C")
    if kind == 0:
        call = window.window.put_nonblocking if nonblocking else window.window.put
    else:
        call = window.window.accumulate_nonblocking if nonblocking else window.window.accumulate
    result = call(data, dst_weights=dst_weights, self_weight=sw, require_mutex=require_mutex)
    # The core scales `data` by self_weight once the put is done; a variable follows then.
    after = None
    target = window.variable if data is window.array else tensor
    if sw != 1.0 and target is not None:
        after = lambda: target.assign(tf.constant(data))  # noqa: E731
    if nonblocking:
        return _register(result, after)
    if after is not None:
        after()
    return True


def win_put(tensor: Any, name: str, self_weight: Optional[float] = None,
            dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> bool:
    """Writes tensor * dst_weights[r] into each destination r's buffer for this rank
    (default: every out-neighbor, weight 1); then a tf.Variable given (or the window's
    value, for None or its own variable) is multiplied by self_weight."""
    return _put(0, tensor, name, self_weight, dst_weights, require_mutex, False)


def win_put_nonblocking(tensor: Any, name: str, self_weight: Optional[float] = None,
                        dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> int:
    """As win_put, returning a handle for win_poll / win_wait."""
    return _put(0, tensor, name, self_weight, dst_weights, require_mutex, True)


def win_accumulate(tensor: Any, name: str, self_weight: Optional[float] = None,
                   dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> bool:
    """As win_put, but adds into the destination buffers."""
    return _put(1, tensor, name, self_weight, dst_weights, require_mutex, False)


def win_accumulate_nonblocking(tensor: Any, name: str, self_weight: Optional[float] = None,
                               dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> int:
    """As win_accumulate, returning a handle for win_poll / win_wait."""
    return _put(1, tensor, name, self_weight, dst_weights, require_mutex, True)


def _get(name: str, src_weights: Any, require_mutex: bool, nonblocking: bool) -> Any:
    window = _window(name)
    check_rank_keys(src_weights, S.in_ranks, "The key of src_weights should only contain ranks that belong to "
                                         "in-neighbors.")
    window.pull()  # a neighbor's get reads this rank's value while the request is open
    if nonblocking:
        return _register(window.window.get_nonblocking(src_weights=src_weights, require_mutex=require_mutex))
    window.window.get(src_weights=src_weights, require_mutex=require_mutex)
    return True


def win_get(name: str, src_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> bool:
    """Fetches each source's window value (default: every in-neighbor) into this rank's
    buffer for it, scaled by src_weights[r]."""
    return _get(name, src_weights, require_mutex, False)


def win_get_nonblocking(name: str, src_weights: Optional[Dict[int, float]] = None,
                        require_mutex: bool = False) -> int:
    """As win_get, returning a handle for win_poll / win_wait."""
    return _get(name, src_weights, require_mutex, True)


def win_wait(handle: int) -> bool:
    """Waits for a nonblocking window operation (a tf.Variable put with self_weight is
    scaled now); False for an unknown handle."""
    request = _handles.pop(handle, None)
    if request is None:
        return False
    request.wait()
    after = _after.pop(handle, None)
    if after is not None:
        after()
    return True


def win_poll(handle: int) -> bool:
    """True once the operation of this handle has finished (the handle stays valid until win_wait)."""
    return poll_handle(_handles, handle)


@contextlib.contextmanager
def win_mutex(name: str, for_self: bool = False, ranks: Optional[List[int]] = None) -> Iterator[None]:
    """Holds the distributed mutexes guarding this rank's buffers on `ranks` (default:
    every out-neighbor), or with for_self this rank's own (default: every in-neighbor)."""
    with _window(name).window.mutex(ranks, for_self=for_self):
        yield


def get_win_version(name: str) -> Dict[int, int]:
    """{in-neighbor: puts and gets arrived from it since the last win_update}."""
    return _window(name).window.versions()


def get_current_created_window_names() -> List[str]:
    """The names of the windows that exist now, sorted."""
    return sorted(_windows)


def win_associated_p(name: str) -> float:
    """This rank's push-sum weight p for the window (1.0 at creation)."""
    return _window(name).window.associated_p


def turn_on_win_ops_with_associated_p() -> None:
    """put/accumulate carry p * weight with the data; update combines p alike."""
    _ctx().set_window_associated_p(True)


def turn_off_win_ops_with_associated_p() -> None:
    """Stops carrying push-sum's associated p with window operations."""
    _ctx().set_window_associated_p(False)


__all__ = [
    "win_create", "win_free", "win_update", "win_update_then_collect", "win_put", "win_put_nonblocking",
    "win_get", "win_get_nonblocking", "win_accumulate", "win_accumulate_nonblocking", "win_wait", "win_poll",
    "win_mutex", "get_win_version", "get_current_created_window_names", "win_associated_p",
    "turn_on_win_ops_with_associated_p", "turn_off_win_ops_with_associated_p",
]
