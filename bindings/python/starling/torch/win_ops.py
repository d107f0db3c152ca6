"""BlueFog's one-sided window operations (win_*) over Starling's windows.

Windows are registered by name; each holds the tensor given to win_create (updated in
place by win_update) and one buffer per in-neighbor. Nonblocking window calls return
int handles of their own numbering, waited on with win_wait / win_poll.
"""

import contextlib
from typing import Any, Dict, Iterator, List, Optional

import torch

from ..errors import AlreadyExistsError, NotFoundError
from .._args import check_rank_keys
from ..request import Request, poll_handle
from .. import _logging
from . import _state as S

logger = _logging.logger


def _window(name: str) -> Any:
    window = S.windows.get(name)
    if window is None:
        raise NotFoundError(f"window {name!r} does not exist (created windows: {sorted(S.windows)}); "
                            "create it with win_create first")
    return window


def _register(request: Request) -> int:
    handle = S.next_win_handle()
    S.win_handles[handle] = request
    return handle


def win_create(tensor: torch.Tensor, name: str, zero_init: bool = False) -> bool:
    """Creates window `name` over tensor (collective: same name, dtype and shape on every
    rank). Neighbor buffers start as copies of tensor, or zeros. False if the name is
    already taken."""
    context = S.context if S.handle is not None else S.require_handle()
    if name in S.windows:
        return False
    try:
        S.windows[name] = context.window(tensor, name, zero_init=zero_init)
    except AlreadyExistsError:
        return False
    return True


def win_free(name: Optional[str] = None) -> bool:
    """Frees window `name`, or every window when name is None (collective)."""
    S.require_context()
    if name is None:
        for key in sorted(S.windows):
            S.windows.pop(key).free()
        return True
    _window(name)
    S.windows.pop(name).free()
    return True


def win_update(name: str, self_weight: Optional[float] = None, neighbor_weights: Optional[Dict[int, float]] = None,
               reset: bool = False, clone: bool = False, require_mutex: bool = False) -> torch.Tensor:
    """tensor = self_weight * tensor + sum_r neighbor_weights[r] * buffer_r on the
    window's tensor, in place, returning it (a copy with clone=True, leaving the window's
    tensor as it was). Without weights: the topology's if weighted, else the uniform
    average over the tensor and every in-neighbor buffer. Local."""
    window = _window(name)
    if (self_weight is None) != (neighbor_weights is None):
        raise ValueError("Arguments self_weight and neighbor_weights have to be presented at the same time")
    if neighbor_weights is not None:
        if not isinstance(neighbor_weights, dict):
            raise ValueError("Argument neighbor_weights has to be a dictionary map from the (in-)neighbor rank to "
                             "the weights.")
        if not isinstance(self_weight, float):
            raise ValueError("Argument self_weight has to be a float for self rank.")
        check_rank_keys(neighbor_weights, S.in_ranks,
                    "The key of weights should only contain the ranks that belong to in-neighbors and self rank.")
    before = window.tensor.clone() if clone else None
    window.update(self_weight=self_weight, neighbor_weights=neighbor_weights, reset=reset,
                  require_mutex=require_mutex)
    if before is None:
        return window.tensor
    result = window.tensor.clone()
    window.tensor.copy_(before)
    return result


def win_update_then_collect(name: str, require_mutex: bool = True) -> torch.Tensor:
    """tensor += every in-neighbor buffer, then the buffers are zeroed (push-sum)."""
    return _window(name).update_then_collect(require_mutex=require_mutex)


def _put(kind: int, tensor: torch.Tensor, name: str, self_weight: Optional[float], dst_weights: Any,
         require_mutex: bool, nonblocking: bool) -> Any:
    if S.handle is None:
        raise S.unavailable()
    window = _window(name)
    check_rank_keys(dst_weights, S.out_ranks, "The key of dst_weights should only contain ranks that belong to "
                                          "out-neighbors (self-rank is not allowed).")
    sw = 1.0 if self_weight is None else self_weight
    if kind == 0:
        call = window.put_nonblocking if nonblocking else window.put
    else:
        call = window.accumulate_nonblocking if nonblocking else window.accumulate
    result = call(tensor, dst_weights=dst_weights, self_weight=sw, require_mutex=require_mutex)
    return _register(result) if nonblocking else True


def win_put(tensor: torch.Tensor, name: str, self_weight: Optional[float] = None,
            dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> bool:
    """Writes tensor * dst_weights[r] into each destination r's buffer for this rank
    (default: every out-neighbor, weight 1), then ``tensor *= self_weight``."""
    return _put(0, tensor, name, self_weight, dst_weights, require_mutex, False)


def win_put_nonblocking(tensor: torch.Tensor, name: str, self_weight: Optional[float] = None,
                        dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> int:
    """As win_put, returning a window handle for win_poll / win_wait."""
    return _put(0, tensor, name, self_weight, dst_weights, require_mutex, True)


def win_accumulate(tensor: torch.Tensor, name: str, self_weight: Optional[float] = None,
                   dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> bool:
    """As win_put, but adds into the destination buffers."""
    return _put(1, tensor, name, self_weight, dst_weights, require_mutex, False)


def win_accumulate_nonblocking(tensor: torch.Tensor, name: str, self_weight: Optional[float] = None,
                               dst_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> int:
    """As win_accumulate, returning a window handle for win_poll / win_wait."""
    return _put(1, tensor, name, self_weight, dst_weights, require_mutex, True)


def _get(name: str, src_weights: Any, require_mutex: bool, nonblocking: bool) -> Any:
    if S.handle is None:
        raise S.unavailable()
    window = _window(name)
    check_rank_keys(src_weights, S.in_ranks, "The key of src_weights should only contain ranks that belong to "
                                         "in-neighbors.")
    if nonblocking:
        return _register(window.get_nonblocking(src_weights=src_weights, require_mutex=require_mutex))
    window.get(src_weights=src_weights, require_mutex=require_mutex)
    return True


def win_get(name: str, src_weights: Optional[Dict[int, float]] = None, require_mutex: bool = False) -> bool:
    """Fetches each source's window tensor (default: every in-neighbor) into this rank's
    buffer for it, scaled by src_weights[r]."""
    return _get(name, src_weights, require_mutex, False)


def win_get_nonblocking(name: str, src_weights: Optional[Dict[int, float]] = None,
                        require_mutex: bool = False) -> int:
    """As win_get, returning a window handle for win_poll / win_wait."""
    return _get(name, src_weights, require_mutex, True)


neighbor_win_put = win_put
neighbor_win_put_nonblocking = win_put_nonblocking
neighbor_win_accumulate = win_accumulate
neighbor_win_accumulate_nonblocking = win_accumulate_nonblocking
neighbor_win_get = win_get
neighbor_win_get_nonblocking = win_get_nonblocking


def win_wait(handle: int) -> bool:
    """Waits for a window operation; False (with a log message) for an unknown handle."""
    request = S.win_handles.pop(handle, None)
    if request is None:
        logger.warning("win_wait: handle %s was not created or has been waited on already", handle)
        return False
    request.wait()
    return True


def win_poll(handle: int) -> bool:
    """True once the window operation of this handle has finished (the handle stays valid until win_wait)."""
    return poll_handle(S.win_handles, handle)


@contextlib.contextmanager
def win_mutex(name: str, for_self: bool = False, ranks: Optional[List[int]] = None) -> Iterator[None]:
    """Holds the distributed mutexes guarding this rank's buffers on `ranks` (default:
    every out-neighbor), or with for_self this rank's own (default: every in-neighbor)."""
    with _window(name).mutex(ranks, for_self=for_self):
        yield


@contextlib.contextmanager
def win_lock(name: str) -> Iterator[None]:
    """Holds this rank's own mutexes for every in-neighbor buffer of window `name`:
    operations with require_mutex=True wait until the block ends."""
    if name not in S.windows:
        raise ValueError(f"{name} is not found in the registered window object.")
    with S.windows[name].mutex(None, for_self=True):
        yield


def get_win_version(name: str) -> Dict[int, int]:
    """{in-neighbor: puts and gets arrived from it since the last win_update}."""
    return _window(name).versions()


def get_current_created_window_names() -> List[str]:
    """The names of the windows that exist now, sorted."""
    return sorted(S.windows)


def win_associated_p(name: str) -> float:
    """This rank's push-sum weight p for the window (1.0 at creation)."""
    return _window(name).associated_p


def turn_on_win_ops_with_associated_p() -> None:
    """put/accumulate carry p * weight with the data; update combines p alike."""
    S.require_context().set_window_associated_p(True)


def turn_off_win_ops_with_associated_p() -> None:
    """Stops carrying push-sum's associated p with window operations (see turn_on_win_ops_with_associated_p)."""
    S.require_context().set_window_associated_p(False)


__all__ = [
    "win_create", "win_free", "win_update", "win_update_then_collect",
    "neighbor_win_put_nonblocking", "neighbor_win_put", "neighbor_win_get_nonblocking", "neighbor_win_get",
    "neighbor_win_accumulate_nonblocking", "neighbor_win_accumulate",
    "win_put_nonblocking", "win_put", "win_get_nonblocking", "win_get", "win_accumulate_nonblocking",
    "win_accumulate", "win_wait", "win_poll", "win_mutex", "win_lock", "get_win_version",
    "get_current_created_window_names", "win_associated_p", "turn_on_win_ops_with_associated_p",
    "turn_off_win_ops_with_associated_p",
]
