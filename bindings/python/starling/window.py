"""One-sided windows: write into (or read from) neighbors' memory and move on.

Each rank's window holds its own tensor plus one buffer per in-neighbor. ``put`` and
``accumulate`` send this rank's tensor into the buffers its out-neighbors keep for
it; ``get`` fetches in-neighbors' tensors into the local buffers; ``update`` combines
the tensor with the buffers, in place. The target's progress thread applies incoming
data while the target computes: it calls nothing.
"""

import contextlib
from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping, Optional, Sequence

from . import _core
from ._args import rank_weights
from ._tensors import adapter_of, caller_stream, mutable_adapter_of
from .request import Request

if TYPE_CHECKING:
    from .context import Context


class Window:
    """A window created collectively by :meth:`Context.window`. It borrows its tensor
    until :meth:`free` (collective), which also runs at context close."""

    def __init__(self, context: "Context", tensor: Any, name: str, zero_init: bool) -> None:
        if not isinstance(name, str):
            raise TypeError(f"a window name must be a str, got {type(name).__name__}")
        adapter = mutable_adapter_of(tensor, "a window's tensor")
        self._context = context
        self._name = name
        self._tensor = tensor
        self._capsule = adapter.capsule(tensor)
        self._adapter = adapter
        # A CUDA tensor's capsule carries its framework's stream, which must be the one
        # current at each call: such windows export their tensor afresh per put.
        self._on_device = type(self._capsule) is tuple
        self._handle = _core.window_create(context._handle, self._capsule, name, int(bool(zero_init)))

    @property
    def name(self) -> str:
        """The name the window was created under."""
        return self._name

    @property
    def tensor(self) -> Any:
        """The window's own tensor (updated in place by update())."""
        return self._tensor

    def free(self) -> None:
        """Frees the window once every rank's earlier operations on it finished.
        Collective."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        self._context._windows.pop(self._name, None)
        _core.window_free(handle)
        self._tensor = self._capsule = None

    def __enter__(self) -> "Window":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.free()

    def __repr__(self) -> str:
        return f"<starling.Window {self._name!r}{'' if self._handle is not None else ' freed'}>"

    # ---- one-sided operations
    def put(self, tensor: Any = None, *, dst_weights: Any = None, self_weight: float = 1.0,
            require_mutex: bool = False) -> None:
        """Overwrites the destinations' buffers for this rank with `tensor` (default:
        the window's tensor) scaled per destination: dst_weights is None (every
        out-neighbor, weight 1), a list of out-neighbors, or {out-neighbor: weight}.
        Afterwards `tensor` is multiplied by self_weight."""
        self._put(0, tensor, dst_weights, self_weight, require_mutex, False)

    def put_nonblocking(self, tensor: Any = None, *, dst_weights: Any = None, self_weight: float = 1.0,
                        require_mutex: bool = False) -> Request:
        """As put, returning a Request."""
        return self._put(0, tensor, dst_weights, self_weight, require_mutex, True)

    def accumulate(self, tensor: Any = None, *, dst_weights: Any = None, self_weight: float = 1.0,
                   require_mutex: bool = False) -> None:
        """As put, but adds into the destinations' buffers."""
        self._put(1, tensor, dst_weights, self_weight, require_mutex, False)

    def accumulate_nonblocking(self, tensor: Any = None, *, dst_weights: Any = None, self_weight: float = 1.0,
                               require_mutex: bool = False) -> Request:
        """As accumulate, returning a Request."""
        return self._put(1, tensor, dst_weights, self_weight, require_mutex, True)

    def _put(self, kind: int, tensor: Any, dst: Any, self_weight: float, mutex: bool, nonblocking: bool) -> Any:
        if tensor is None or tensor is self._tensor:
            tensor = self._tensor
            capsule = self._adapter.capsule(tensor) if self._on_device else self._capsule
        else:
            capsule = mutable_adapter_of(tensor, "tensor").capsule(tensor)
        if dst is not None and len(dst) == 0:
            # An explicit empty set sends nothing (the C call would take it as "every
            # out-neighbor"); only the self_weight scaling remains.
            if self_weight != 1.0:
                if adapter_of(tensor).name == "dlpack":
                    # An array type Starling only knows through DLPack may lack *=: scale
                    # it with a neighbor_allreduce that has no neighbors (local).
                    self._context.neighbor_allreduce(tensor, self_weight=self_weight, src_weights={},
                                                     dst_weights=[], out=tensor)
                else:
                    tensor *= self_weight
                if self._context._associated_p:
                    self.associated_p *= self_weight
            return Request.completed(None) if nonblocking else None
        request = _core.py_window_put(kind, self._handle, capsule, rank_weights(dst, "dst_weights"),
                                      float(self_weight), int(bool(mutex)), int(nonblocking))
        if request is None:
            return None
        return Request(request, (tensor, capsule, self))

    def get(self, *, src_weights: Any = None, require_mutex: bool = False) -> None:
        """Fetches each source's window tensor into this rank's buffer for it, scaled by
        its weight: src_weights None (every in-neighbor), a list, or {rank: weight}."""
        self._get(src_weights, require_mutex, False)

    def get_nonblocking(self, *, src_weights: Any = None, require_mutex: bool = False) -> Request:
        """As get, returning a Request."""
        return self._get(src_weights, require_mutex, True)

    def _get(self, src: Any, mutex: bool, nonblocking: bool) -> Any:
        src = rank_weights(src, "src_weights")
        if src is not None and len(src) == 0:  # an explicit empty set fetches nothing
            return Request.completed(None) if nonblocking else None
        request = _core.py_window_get(self._handle, src, int(bool(mutex)), int(nonblocking))
        return None if request is None else Request(request, self)

    def update(self, *, self_weight: Optional[float] = None, neighbor_weights: Optional[Mapping[int, float]] = None,
               reset: bool = False, require_mutex: bool = False) -> Any:
        """tensor = self_weight * tensor + sum_r w_r * buffer_r, in place; returns the
        tensor. Without weights: the topology's (if weighted) or the uniform average
        over the tensor and every in-neighbor buffer. reset zeroes the buffers used.
        Local: no communication."""
        if (self_weight is None) != (neighbor_weights is None):
            raise ValueError("self_weight and neighbor_weights go together: give both or neither")
        use = int(self_weight is not None)
        args = (self._handle, use, float(self_weight) if use else 0.0,
                rank_weights(neighbor_weights, "neighbor_weights"), int(bool(reset)), int(bool(require_mutex)))
        if self._on_device:
            with caller_stream(self._adapter.stream_of(self._tensor)):
                _core.py_window_update(*args)
        else:
            _core.py_window_update(*args)
        return self._tensor

    def update_then_collect(self, *, require_mutex: bool = False) -> Any:
        """tensor += every in-neighbor buffer, then those buffers are zeroed (push-sum's
        collect step). Returns the tensor."""
        if self._on_device:
            with caller_stream(self._adapter.stream_of(self._tensor)):
                _core.window_update_then_collect(self._handle, int(bool(require_mutex)))
        else:
            _core.window_update_then_collect(self._handle, int(bool(require_mutex)))
        return self._tensor

    def versions(self) -> Dict[int, int]:
        """{in-neighbor: puts and gets arrived since the last update}."""
        return _core.py_window_versions(self._handle)

    @contextlib.contextmanager
    def mutex(self, ranks: Optional[Sequence[int]] = None, *, for_self: bool = False) -> Iterator[None]:
        """Holds distributed mutexes for the block: on each of `ranks` (default: every
        out-neighbor) the one guarding its buffer for this rank, or with for_self this
        rank's own mutexes for `ranks` (default: every in-neighbor)."""
        ranks = None if ranks is None else list(ranks)
        _core.window_mutex_acquire(self._handle, ranks, int(bool(for_self)))
        try:
            yield
        finally:
            _core.window_mutex_release(self._handle, ranks, int(bool(for_self)))

    @property
    def associated_p(self) -> float:
        """Push-sum weight p (1.0 at creation; see Context.set_window_associated_p)."""
        return _core.window_associated_p(self._handle)

    @associated_p.setter
    def associated_p(self, value: float) -> None:
        _core.window_set_associated_p(self._handle, float(value))


__all__ = ["Window"]
