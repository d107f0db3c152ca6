"""Tensors from any framework.

Inputs cross into C as DLPack capsules (``x.__dlpack__()``), which Starling only
borrows. Outputs are allocated by the caller's own framework (``np.empty``,
``torch.empty``) so results come back as the caller's type, without a copy. One small
adapter per framework keeps the per-call cost to a dictionary lookup.
"""

import sys
from typing import Any, Dict, Sequence, Tuple

import numpy as np

from .errors import UnsupportedError

SUPPORTED_DTYPES = "float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8"


class NumpyAdapter:
    """numpy.ndarray: writable arrays export a capsule; read-only ones (which NumPy
    1.24 refuses to export) cross through the buffer protocol, without a copy."""

    name = "numpy"
    mutable = True

    @staticmethod
    def capsule(x: np.ndarray) -> Any:
        if not x.flags.writeable:
            return x
        try:
            return x.__dlpack__()
        except (BufferError, TypeError, RuntimeError) as e:
            raise UnsupportedError(f"NumPy array of dtype {x.dtype} cannot be exchanged ({e}); "
                                   f"supported dtypes: {SUPPORTED_DTYPES}") from None

    @staticmethod
    def empty(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
        return np.empty(shape, dtype=x.dtype)

    @staticmethod
    def is_floating(x: np.ndarray) -> bool:
        return x.dtype.kind == "f"

    @staticmethod
    def result(out: np.ndarray, like: np.ndarray) -> np.ndarray:
        return out


class TorchAdapter:
    """torch.Tensor: exported with torch's own to_dlpack (no copy; also for tensors
    that require grad, whose data Starling reads or writes like BlueFog did)."""

    name = "torch"
    mutable = True

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._to_dlpack = torch_module.utils.dlpack.to_dlpack

    def capsule(self, x: Any) -> Any:
        try:
            return self._to_dlpack(x)
        except RuntimeError as e:
            raise UnsupportedError(f"tensor of dtype {x.dtype} on device {x.device} with layout {x.layout} "
                                   f"cannot be exchanged ({e}); Starling takes dense CPU tensors of dtype "
                                   f"{SUPPORTED_DTYPES}") from None

    def empty(self, x: Any, shape: Sequence[int]) -> Any:
        return self._torch.empty(shape, dtype=x.dtype, device=x.device)

    @staticmethod
    def is_floating(x: Any) -> bool:
        return x.is_floating_point()

    @staticmethod
    def result(out: Any, like: Any) -> Any:
        return out


class GenericAdapter:
    """Any other object with __dlpack__ (JAX, NumPy 2 subclasses, ...): read through
    DLPack, results allocated with NumPy and handed back through the caller's array
    namespace (``x.__array_namespace__().from_dlpack``) when it has one. Such arrays
    may be immutable (JAX), so in-place forms are refused."""

    name = "dlpack"
    mutable = False

    @staticmethod
    def capsule(x: Any) -> Any:
        return x.__dlpack__()

    @staticmethod
    def empty(x: Any, shape: Sequence[int]) -> np.ndarray:
        device = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (1, 0)
        if device[0] != 1:  # kDLCPU
            raise UnsupportedError(f"{type(x).__qualname__} is on DLPack device {tuple(device)}; this build moves "
                                   "CPU memory only: copy the tensor to the CPU first")
        return np.empty(shape, dtype=np.from_dlpack(x).dtype)

    @staticmethod
    def is_floating(x: Any) -> bool:
        return np.from_dlpack(x).dtype.kind == "f"

    @staticmethod
    def result(out: np.ndarray, like: Any) -> Any:
        namespace = getattr(like, "__array_namespace__", None)
        if namespace is None:
            return out
        return namespace().from_dlpack(out)


_numpy = NumpyAdapter()
_generic = GenericAdapter()
_by_type: Dict[type, Any] = {np.ndarray: _numpy}


def _lookup(kind: type) -> Any:
    if issubclass(kind, np.ndarray):
        adapter = _numpy
    elif kind.__module__.split(".")[0] == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        if not issubclass(kind, torch.Tensor):
            raise TypeError(f"expected a tensor, got {kind.__module__}.{kind.__qualname__}")
        adapter = TorchAdapter(torch)
    elif hasattr(kind, "__dlpack__"):
        adapter = _generic
    else:
        raise TypeError(f"expected a tensor with __dlpack__ (a NumPy array, a PyTorch tensor, ...), got "
                        f"{kind.__module__}.{kind.__qualname__}; convert it first, e.g. with numpy.asarray")
    _by_type[kind] = adapter
    return adapter


def adapter_of(x: Any) -> Any:
    """The adapter for x's type (TypeError for objects that are not tensors)."""
    adapter = _by_type.get(type(x))
    return adapter if adapter is not None else _lookup(type(x))


def mutable_adapter_of(x: Any, what: str) -> Any:
    """adapter_of(x), refusing types that cannot be written in place."""
    adapter = adapter_of(x)
    if not adapter.mutable:
        raise TypeError(f"{what} must be a mutable tensor (NumPy or PyTorch); {type(x).__qualname__} "
                        "cannot be written in place: use the out-of-place form")
    return adapter


def output_like(x: Any, out: Any) -> Tuple[Any, Any, Any, Any, bool]:
    """(adapter, capsule of x, out, capsule of out, allocated) for a result shaped like
    x: out None allocates it with x's framework; out is x means in place."""
    adapter = adapter_of(x)
    cin = adapter.capsule(x)
    if out is None:
        out = adapter.empty(x, x.shape)
        return adapter, cin, out, adapter.capsule(out), True
    if out is x:
        mutable_adapter_of(x, "out")
        return adapter, cin, out, cin, False
    return adapter, cin, out, mutable_adapter_of(out, "out").capsule(out), False
