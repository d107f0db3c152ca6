"""Hand-made DLPack capsules for the bad-input tests: tensors on devices this machine
does not have, and objects that only speak DLPack (like JAX arrays)."""

import ctypes

import numpy as np


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeTensor:
    """A float32 vector of n elements whose DLPack export claims `device_type` (2 =
    CUDA). The keyword arguments replace fields of the descriptor to make malformed ones:
    shape, strides, ndim (default: len(shape)), byte_offset, dtype as (code, bits,
    lanes). Its capsules have no deleter; the object keeps the memory alive."""

    def __init__(self, n: int = 4, device_type: int = 2, name: bytes = b"dltensor", *, shape=None, strides=None,
                 ndim=None, byte_offset: int = 0, dtype=(2, 32, 1)) -> None:
        self.array = np.zeros(n, dtype=np.float32)
        shape = (n,) if shape is None else tuple(shape)
        self.shape_buffer = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides_buffer = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = self.array.ctypes.data
        t.device = DLDevice(device_type, 0)
        t.ndim = len(shape) if ndim is None else ndim
        t.dtype = DLDataType(*dtype)  # default: kDLFloat, 32 bits
        t.shape = self.shape_buffer
        if self.strides_buffer is not None:
            t.strides = self.strides_buffer
        t.byte_offset = byte_offset
        self.name = name
        self.shape = shape
        self.device_type = device_type

    def capsule(self):
        return _new_capsule(ctypes.addressof(self.managed), self.name, None)

    def __dlpack__(self, stream=None):
        return self.capsule()

    def __dlpack_device__(self):
        return (self.device_type, 0)


class DLPackOnly:
    """A CPU array visible only through DLPack (no buffer protocol): like a JAX array."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array
        self.shape = array.shape

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)

    def __array_namespace__(self, api_version=None):
        return _Namespace

    def numpy(self) -> np.ndarray:
        return self._array


class _Namespace:
    """The array-API namespace of DLPackOnly: results come back as DLPackOnly."""

    @staticmethod
    def from_dlpack(x):
        return DLPackOnly(np.from_dlpack(x))
