"""EmuArray: a small array type in the emulated device's memory, exported to Starling as
kDLCUDA DLPack capsules, the way a CuPy array on a GPU would be.

The emulator (libstarling_emudevice.so, the file STARLING_DEVICE_PLUGIN names, or
STARLING_EMU_LIBRARY where the core is not to load it) hands out
host memory that it registers as device memory; ctypes loads the same file as the core,
so both see one registry. EmuArray has a notion of "current stream" like a GPU framework
(``with using_stream(s):``), answers ``__dlpack__(stream=...)`` as DLPack asks, and has an
array namespace whose ``empty`` allocates more EmuArrays.
"""

import contextlib
import ctypes
import itertools
import os
from typing import Any, Dict, Iterator, Optional, Sequence

import numpy as np

from dlpack_fakes import DLDataType, DLDevice, DLManagedTensor

KDL_CUDA = 2


def _load() -> ctypes.CDLL:
    # STARLING_EMU_LIBRARY: the emulator, for tests where the core must not find it.
    lib = ctypes.CDLL(os.environ.get("STARLING_EMU_LIBRARY") or os.environ["STARLING_DEVICE_PLUGIN"])
    lib.starling_emu_last_error.restype = ctypes.c_char_p
    lib.starling_emu_alloc.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    lib.starling_emu_free.argtypes = [ctypes.c_void_p]
    lib.starling_emu_memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.starling_emu_stream_create.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.starling_emu_stream_destroy.argtypes = [ctypes.c_void_p]
    lib.starling_emu_stream_synchronize.argtypes = [ctypes.c_void_p]
    lib.starling_emu_sleep_on_stream.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.starling_emu_fill_on_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return lib


emu = _load()


def check(rc: int) -> None:
    if rc != 0:
        raise RuntimeError(emu.starling_emu_last_error().decode())


# ---- streams: the framework's current stream (0: the legacy default stream) -------------
current_stream = 0


@contextlib.contextmanager
def using_stream(stream: int) -> Iterator[None]:
    global current_stream
    saved, current_stream = current_stream, stream
    try:
        yield
    finally:
        current_stream = saved


def new_stream() -> int:
    stream = ctypes.c_void_p()
    check(emu.starling_emu_stream_create(0, ctypes.byref(stream)))
    return stream.value


# ---- DLPack export ----------------------------------------------------------------------
# Each export owns a DLManagedTensor whose manager_ctx keys _exports, which keeps the
# descriptor, its shape and the array (so its memory) alive until the deleter runs: when
# an unconsumed capsule dies (its destructor below), or when a consumer that renamed it
# "used_dltensor" is done. Starling only borrows capsules, so the destructor does it.
_exports: Dict[int, Any] = {}
_ids = itertools.count(1)

_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_DESTRUCTOR = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)  # runs under the GIL, from capsule dealloc

ctypes.pythonapi.PyCapsule_New.restype = ctypes.py_object
ctypes.pythonapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# The capsule is being destroyed: pass it as a plain pointer, never as a new reference.
ctypes.pythonapi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
ctypes.pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
ctypes.pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p


def _release(address: int) -> None:
    _exports.pop(DLManagedTensor.from_address(address).manager_ctx, None)


_delete_managed = _DELETER(_release)  # the DLManagedTensor's deleter, for consumers


@_DESTRUCTOR
def _capsule_destructor(capsule: int) -> None:
    if ctypes.pythonapi.PyCapsule_IsValid(capsule, b"dltensor"):  # not consumed by anyone
        _release(ctypes.pythonapi.PyCapsule_GetPointer(capsule, b"dltensor"))


def live_exports() -> int:
    return len(_exports)


def _dl_dtype(dtype: np.dtype) -> DLDataType:
    code = {"f": 2, "i": 0, "u": 1}[dtype.kind]
    return DLDataType(code, dtype.itemsize * 8, 1)


class EmuDevice:
    """The array API's device object: an emulated GPU."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmuDevice) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("emu", self.index))

    def __repr__(self) -> str:
        return f"emu:{self.index}"


class EmuArray:
    """A C-contiguous array on emulated device 0. host_memory=True gives a liar for the
    bad-input tests: NumPy memory that its DLPack export calls device memory."""

    def __init__(self, shape: Sequence[int], dtype: Any, *, host_memory: bool = False) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.device = EmuDevice(0)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._host = np.zeros(self.shape, self.dtype) if host_memory else None
        self.last_stream: Optional[int] = None  # the stream the last __dlpack__ was asked for
        if self._host is not None:
            self.ptr = self._host.ctypes.data
        else:
            ptr = ctypes.c_void_p()
            check(emu.starling_emu_alloc(0, max(self.nbytes, 1), ctypes.byref(ptr)))
            self.ptr = ptr.value

    @classmethod
    def from_numpy(cls, a: np.ndarray, **kwargs: Any) -> "EmuArray":
        a = np.ascontiguousarray(a)
        x = cls(a.shape, a.dtype, **kwargs)
        x.copy_from(a)
        return x

    def copy_from(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a, dtype=self.dtype)
        assert a.nbytes == self.nbytes
        check(emu.starling_emu_memcpy(self.ptr, a.ctypes.data, self.nbytes))

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        check(emu.starling_emu_memcpy(out.ctypes.data, self.ptr, self.nbytes))
        return out

    def __del__(self) -> None:
        if self._host is None and getattr(self, "ptr", None) and emu is not None:
            emu.starling_emu_free(self.ptr)

    # ---- DLPack
    def __dlpack_device__(self):
        return (KDL_CUDA, 0)

    def __dlpack__(self, stream: Optional[int] = None) -> Any:
        self.last_stream = stream
        mine = current_stream or 1  # DLPack calls the legacy default stream 1
        if stream is not None and stream != mine and stream != -1:
            # The consumer orders against another stream: make our work visible to it.
            check(emu.starling_emu_stream_synchronize(None if mine == 1 else mine))
        key = next(_ids)
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        managed = DLManagedTensor()
        t = managed.dl_tensor
        t.data = self.ptr
        t.device = DLDevice(KDL_CUDA, 0)
        t.ndim = len(self.shape)
        t.dtype = _dl_dtype(self.dtype)
        t.shape = shape
        t.byte_offset = 0
        managed.manager_ctx = key
        managed.deleter = ctypes.cast(_delete_managed, ctypes.c_void_p).value
        _exports[key] = (managed, shape, self)
        return ctypes.pythonapi.PyCapsule_New(ctypes.addressof(managed), b"dltensor",
                                              ctypes.cast(_capsule_destructor, ctypes.c_void_p))

    def __array_namespace__(self, api_version: Optional[str] = None) -> Any:
        return namespace

    def __repr__(self) -> str:
        return f"EmuArray({self.shape}, {self.dtype}, ptr={self.ptr:#x})"


class _Namespace:
    """The parts of the array API Starling uses: empty()."""

    @staticmethod
    def empty(shape: Sequence[int], dtype: Any = None, device: Any = None) -> EmuArray:
        assert device is None or device == EmuDevice(0), device
        return EmuArray(shape, dtype or np.float64)


namespace = _Namespace()
