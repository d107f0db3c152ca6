"""Tensors from any framework.

Inputs cross into C as DLPack capsules (``x.__dlpack__()``), which Starling only
borrows. Outputs are allocated by the caller's own framework (``np.empty``,
``torch.empty``) so results come back as the caller's type, without a copy. One small
adapter per framework keeps the per-call cost to a dictionary lookup.

CUDA tensors (DLPack devices kDLCUDA and kDLCUDAManaged) cross as ``(capsule, stream)``.
``stream`` is the framework's current CUDA stream for the tensor's device (a
cudaStream_t as an int, 0 for the legacy default stream): the producer was asked to make
the data ready on it (DLPack's ``__dlpack__(stream=...)``), and the SWIG layer makes it
this thread's Starling stream for the duration of the C call, so the operation starts
after the work queued on it. CPU tensors never take that path.
"""

import contextlib
import math
import sys
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np

from . import _core
from .errors import UnsupportedError

SUPPORTED_DTYPES = "float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8"
_CUDA_DEVICES = (2, 13)  # kDLCUDA, kDLCUDAManaged (pinned host memory, kDLCUDAHost, is host memory)


def _dlpack_stream(stream: int) -> int:
    """The value to pass as __dlpack__(stream=...): DLPack names the legacy default
    stream 1, because 0 is ambiguous there; frameworks report it as 0."""
    return stream or 1


def _device_type(x: Any) -> int:
    device = getattr(x, "__dlpack_device__", None)
    return device()[0] if device is not None else 1  # kDLCPU


@contextlib.contextmanager
def caller_stream(stream: int) -> Iterator[None]:
    """This thread's Starling stream is `stream` inside the block (for calls that take no
    tensor argument to carry it, such as window updates)."""
    saved = _core.get_cuda_stream()
    _core.set_cuda_stream(stream)
    try:
        yield
    finally:
        _core.set_cuda_stream(saved)


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
    def stream_of(x: np.ndarray) -> int:
        return 0

    @staticmethod
    def empty(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
        return np.empty(shape, dtype=x.dtype)

    @staticmethod
    def result(out: np.ndarray, like: np.ndarray) -> np.ndarray:
        return out


class TorchAdapter:
    """torch.Tensor: exported with torch's own to_dlpack (no copy; also for tensors
    that require grad, whose data Starling reads or writes like BlueFog did).

    For CUDA tensors, to_dlpack plus torch's current stream is exactly what
    ``x.__dlpack__(stream=current)`` would give: torch queues nothing when the consumer's
    stream is its current one, and __dlpack__ refuses tensors that require grad."""

    name = "torch"
    mutable = True

    def __init__(self, torch_module: Any) -> None:
        self._torch = torch_module
        self._to_dlpack = torch_module.utils.dlpack.to_dlpack

    def capsule(self, x: Any) -> Any:
        try:
            capsule = self._to_dlpack(x)
        except (RuntimeError, TypeError, BufferError) as e:  # PyTorch 2: BufferError (meta, float8)
            raise UnsupportedError(f"tensor of dtype {x.dtype} on device {x.device} with layout {x.layout} "
                                   f"cannot be exchanged ({e}); Starling takes dense CPU or CUDA tensors of dtype "
                                   f"{SUPPORTED_DTYPES}") from None
        if x.is_cuda:
            return capsule, self._torch.cuda.current_stream(x.device).cuda_stream
        return capsule

    def stream_of(self, x: Any) -> int:
        return self._torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0

    def empty(self, x: Any, shape: Sequence[int]) -> Any:
        return self._torch.empty(shape, dtype=x.dtype, device=x.device)

    @staticmethod
    def result(out: Any, like: Any) -> Any:
        return out


class CupyAdapter:
    """cupy.ndarray (always on a GPU): the stream is CuPy's current stream on the
    array's device; outputs are allocated by CuPy on that device."""

    name = "cupy"
    mutable = True

    def __init__(self, cupy_module: Any) -> None:
        self._cupy = cupy_module

    def stream_of(self, x: Any) -> int:
        with x.device:  # CuPy's current stream is per device
            return self._cupy.cuda.get_current_stream().ptr

    def capsule(self, x: Any) -> Any:
        stream = self.stream_of(x)
        return x.__dlpack__(stream=_dlpack_stream(stream)), stream

    def empty(self, x: Any, shape: Sequence[int]) -> Any:
        with x.device:
            return self._cupy.empty(tuple(shape), dtype=x.dtype)

    @staticmethod
    def result(out: Any, like: Any) -> Any:
        return out


class GenericAdapter:
    """Any other object with __dlpack__ (JAX, NumPy 2 subclasses, ...).

    CPU arrays are read through DLPack, results allocated with NumPy and handed back
    through the caller's array namespace (``x.__array_namespace__().from_dlpack``) when
    it has one. CUDA arrays get their results from the array namespace directly
    (``empty(shape, dtype=x.dtype, device=x.device)``). The stream is ``current_stream(x)``
    for types registered with one, else this thread's stream (starling.set_cuda_stream;
    the legacy default stream unless set). Such arrays may be immutable (JAX), so
    in-place forms are refused unless the type was registered as mutable."""

    name = "dlpack"

    def __init__(self, current_stream: Optional[Callable[[Any], int]] = None, mutable: bool = False) -> None:
        self._current_stream = current_stream
        self.mutable = mutable

    def stream_of(self, x: Any) -> int:
        if self._current_stream is not None:
            return int(self._current_stream(x) or 0)
        return _core.get_cuda_stream()

    def capsule(self, x: Any) -> Any:
        if _device_type(x) not in _CUDA_DEVICES:
            return x.__dlpack__()
        stream = self.stream_of(x)
        return x.__dlpack__(stream=_dlpack_stream(stream)), stream

    @staticmethod
    def empty(x: Any, shape: Sequence[int]) -> Any:
        device = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (1, 0)
        if device[0] in _CUDA_DEVICES:
            namespace = getattr(x, "__array_namespace__", None)
            if namespace is None:
                raise UnsupportedError(f"{type(x).__qualname__} is on CUDA device {device[1]} but has no "
                                       "__array_namespace__ to allocate results with: use its framework's "
                                       "in-place form, or copy the array to the CPU first")
            where = x.device
            if callable(where):  # JAX before 0.4.27: device() is a method
                where = where()
            return namespace().empty(tuple(shape), dtype=x.dtype, device=where)
        if device[0] != 1:  # kDLCPU
            raise UnsupportedError(f"{type(x).__qualname__} is on DLPack device {tuple(device)}; Starling moves "
                                   "CPU and CUDA memory only: copy the tensor to the CPU first")
        try:
            dtype = np.from_dlpack(x).dtype
        except (RuntimeError, TypeError, BufferError) as e:  # NumPy 1.24 has no bfloat16
            raise UnsupportedError(f"{type(x).__qualname__} of dtype {getattr(x, 'dtype', '?')} cannot get a "
                                   f"result through NumPy ({e}); pass float32, or a PyTorch tensor") from None
        return np.empty(shape, dtype=dtype)

    @staticmethod
    def result(out: Any, like: Any) -> Any:
        if type(out) is not np.ndarray:
            return out  # a CUDA result, already of the caller's type
        namespace = getattr(like, "__array_namespace__", None)
        if namespace is None:
            return out
        return namespace().from_dlpack(out)


class TensorflowAdapter:
    """tf.Tensor (eager) and tf.Variable, CPU only: read through TensorFlow's own
    to_dlpack (no copy; a Variable is read as its current value). Results are NumPy
    buffers aligned to 64 bytes, handed to TensorFlow with from_dlpack (no copy: TF
    adopts the buffer; it aborts the process on operations over a less aligned one).
    The dtype is checked first: TensorFlow's to_dlpack aborts the process on a string
    tensor. EagerTensors are immutable, so in-place forms and windows are refused."""

    name = "tensorflow"
    mutable = False

    def __init__(self, tf_module: Any) -> None:
        self._tf = tf_module
        self._to_dlpack = tf_module.experimental.dlpack.to_dlpack
        self._from_dlpack = tf_module.experimental.dlpack.from_dlpack
        self._numpy_dtypes = {getattr(tf_module, n): np.dtype(n) for n in
                              ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")}

    def _check(self, x: Any) -> Any:
        np_dtype = self._numpy_dtypes.get(x.dtype)
        if np_dtype is None:
            raise UnsupportedError(f"TensorFlow tensor of dtype {x.dtype.name} cannot be exchanged; Starling takes "
                                   "float16, float32, float64, int8, int16, int32, int64 and uint8 TensorFlow "
                                   "tensors (cast bfloat16 to float32, encode strings first)")
        return np_dtype

    def capsule(self, x: Any) -> Any:
        if type(x) is np.ndarray:  # a result buffer allocated by empty()
            return x.__dlpack__()
        self._check(x)
        if not isinstance(x, self._tf.Tensor):  # tf.Variable: its current value
            x = self._tf.convert_to_tensor(x)
        try:
            capsule = self._to_dlpack(x)
        except Exception as e:  # a symbolic tensor (graph mode), ...
            raise UnsupportedError(f"TensorFlow tensor {getattr(x, 'name', '')!s} cannot be exchanged ({e}); inside "
                                   "tf.function use starling.tensorflow's operations, which run eagerly through "
                                   "tf.py_function") from None
        if x.__dlpack_device__()[0] != 1:  # kDLCPU
            raise UnsupportedError(f"TensorFlow tensor on {x.device}: Starling takes TensorFlow tensors in CPU "
                                   "memory only (copy it with tf.identity under tf.device('/CPU:0'))")
        return capsule

    @staticmethod
    def stream_of(x: Any) -> int:
        return 0

    def empty(self, x: Any, shape: Sequence[int]) -> np.ndarray:
        dtype = self._check(x)
        shape = tuple(shape)  # (a TensorShape: np.prod over it costs ~5 us)
        count = math.prod(shape)
        raw = np.empty(count * dtype.itemsize + 64, dtype=np.uint8)
        start = -raw.__array_interface__["data"][0] % 64
        return np.frombuffer(raw, dtype, count, start).reshape(shape)

    def result(self, out: Any, like: Any) -> Any:
        return self._from_dlpack(out.__dlpack__()) if type(out) is np.ndarray else out


_numpy = NumpyAdapter()
_generic = GenericAdapter()
_by_type: Dict[type, Any] = {np.ndarray: _numpy}  # every type seen, by exact type
_registered: Dict[type, GenericAdapter] = {}      # register_array_type's, found through the MRO


def register_array_type(cls: type, *, current_stream: Optional[Callable[[Any], int]] = None,
                        mutable: bool = False) -> None:
    """Tells Starling how to use arrays of `cls` (and its subclasses), a type that
    exports DLPack but is none of NumPy, PyTorch and CuPy, which Starling knows.

    current_stream(x): the cudaStream_t (as an int; 0 for the legacy default stream)
    that x's framework queues work on for x's device: Starling asks x.__dlpack__ for the
    data on that stream and its operations start after the work queued there. Without
    it: this thread's stream (starling.set_cuda_stream). mutable: Starling may write
    into such arrays (out=x, windows); leave it False for immutable arrays (JAX)."""
    if not isinstance(cls, type) or not hasattr(cls, "__dlpack__"):
        raise TypeError(f"register_array_type needs a class with __dlpack__, got {cls!r}")
    _registered[cls] = GenericAdapter(current_stream, bool(mutable))
    for kind in [k for k in _by_type if k is not np.ndarray and issubclass(k, cls)]:
        del _by_type[kind]  # seen before (cls or a subclass): look it up again


def _is_tensorflow(kind: type) -> bool:
    tf = sys.modules["tensorflow"]
    return issubclass(kind, (tf.Tensor, tf.Variable))


def _lookup(kind: type) -> Any:
    module = kind.__module__.split(".")[0]
    if issubclass(kind, np.ndarray):
        adapter = _numpy
    elif "torch" in sys.modules and (module == "torch" or issubclass(kind, sys.modules["torch"].Tensor)):
        torch = sys.modules["torch"]  # (subclasses of torch.Tensor too, wherever defined)
        if not issubclass(kind, torch.Tensor):
            raise TypeError(f"expected a tensor, got {kind.__module__}.{kind.__qualname__}")
        adapter = TorchAdapter(torch)
    elif module == "cupy" and "cupy" in sys.modules and issubclass(kind, sys.modules["cupy"].ndarray):
        adapter = CupyAdapter(sys.modules["cupy"])
    elif module == "tensorflow" and "tensorflow" in sys.modules and _is_tensorflow(kind):
        adapter = TensorflowAdapter(sys.modules["tensorflow"])
    elif hasattr(kind, "__dlpack__"):
        adapter = next((_registered[base] for base in kind.__mro__ if base in _registered), _generic)
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
        raise TypeError(f"{what} must be a mutable tensor (NumPy, PyTorch, CuPy or a type registered with "
                        f"starling.register_array_type(..., mutable=True)); {type(x).__qualname__} cannot be "
                        "written in place: use the out-of-place form")
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
