"""The emulator's test helpers through ctypes, as Python tests use them: device memory,
a synchronous copy, a fill queued behind a sleep, and the error message of a bad free.
Usage: emulator_ctypes_test.py <path of libstarling_emudevice.so>"""
import ctypes
import sys
import time

lib = ctypes.CDLL(sys.argv[1])
lib.starling_emu_last_error.restype = ctypes.c_char_p
for name in ("alloc", "alloc_managed"):
    getattr(lib, "starling_emu_" + name).argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
lib.starling_emu_free.argtypes = [ctypes.c_void_p]
lib.starling_emu_memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
lib.starling_emu_stream_create.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
lib.starling_emu_stream_destroy.argtypes = [ctypes.c_void_p]
lib.starling_emu_stream_synchronize.argtypes = [ctypes.c_void_p]
lib.starling_emu_sleep_on_stream.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.starling_emu_fill_on_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


def check(rc):
    if rc != 0:
        raise RuntimeError(lib.starling_emu_last_error().decode())


before = lib.starling_emu_live_allocations()
dev = ctypes.c_void_p()
check(lib.starling_emu_alloc(0, 16, ctypes.byref(dev)))
assert lib.starling_emu_live_allocations() == before + 1

src = (ctypes.c_int32 * 4)(1, 2, 3, 4)
out = (ctypes.c_int32 * 4)()
check(lib.starling_emu_memcpy(dev, src, 16))
check(lib.starling_emu_memcpy(out, dev, 16))
assert list(out) == [1, 2, 3, 4], list(out)

stream = ctypes.c_void_p()
check(lib.starling_emu_stream_create(0, ctypes.byref(stream)))
start = time.monotonic()
check(lib.starling_emu_sleep_on_stream(stream, 200000))
check(lib.starling_emu_fill_on_stream(stream, dev, (ctypes.c_int32 * 4)(5, 6, 7, 8), 16))  # a temporary: copied at the call
check(lib.starling_emu_memcpy(out, dev, 16))
if time.monotonic() - start < 0.15:  # looked in time (a loaded machine may make us late)
    assert list(out) == [1, 2, 3, 4], "the fill ran before the sleep ended"
check(lib.starling_emu_stream_synchronize(stream))
assert time.monotonic() - start >= 0.19
check(lib.starling_emu_memcpy(out, dev, 16))
assert list(out) == [5, 6, 7, 8], list(out)
check(lib.starling_emu_stream_destroy(stream))

check(lib.starling_emu_free(dev))
assert lib.starling_emu_live_allocations() == before
assert lib.starling_emu_free(ctypes.addressof(out)) != 0
assert b"not allocated by the emulated device" in lib.starling_emu_last_error()
print("ok")
