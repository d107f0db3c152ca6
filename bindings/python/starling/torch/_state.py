"""The process-global state behind starling.torch (BlueFog's API is global: bf.init())."""

import itertools
from typing import Any, Dict, List

from ..errors import InvalidUsageError

context: Any = None          # the starling.Context, from init() to shutdown()
handle: Any = None           # its C handle; None while not initialized, shut down or suspended
shut_down = False
suspended = False
skip_negotiate_stage = False

topology: Any = None         # the networkx graph last set (load_topology returns it)
is_weighted = False
in_ranks: List[int] = []     # cached neighbor lists of the current topology
out_ranks: List[int] = []
machine_topology: Any = None
is_machine_weighted = False
in_machine_ranks: List[int] = []
out_machine_ranks: List[int] = []

# Handles of *_nonblocking calls: int -> starling.Request (which keeps the tensors
# alive). Window operations have their own numbering, as in BlueFog.
handles: Dict[int, Any] = {}
next_handle = itertools.count(1).__next__
win_handles: Dict[int, Any] = {}
next_win_handle = itertools.count(1).__next__
windows: Dict[str, Any] = {}   # name -> starling.Window

repairs = 0                  # repair() calls so far: optimizers drop what they had in flight
timeline_on = False          # the context writes a timeline (STARLING_TIMELINE / BLUEFOG_TIMELINE)
timeline_warned = False


def unavailable() -> Exception:
    """The error for a call that needs a running, unsuspended context."""
    if suspended and context is not None:
        return InvalidUsageError("Starling is suspended (starling.torch.suspend()); call resume() first.")
    if shut_down:
        return InvalidUsageError("Starling was shut down in this process (shutdown() or exit); MPI cannot be "
                                 "restarted, so call init() once per process and shutdown() at the end.")
    return InvalidUsageError("Starling has not been initialized; call starling.torch.init() first.")


def require_context() -> Any:
    """The context (also while suspended), or the error saying why there is none."""
    if context is None:
        raise unavailable()
    return context


def require_handle() -> Any:
    """The C handle for enqueuing work (not while suspended)."""
    h = handle
    if h is None:
        raise unavailable()
    return h
