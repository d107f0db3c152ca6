#!/usr/bin/env python3
"""Starling from Python through ctypes alone: no compiled module, any Python 3.

Loads libstarling.so.0 with ctypes, wraps NumPy arrays as DLPack ``DLTensor``
structs (borrowed views: Starling reads and writes the arrays' own memory, no copy),
and runs allreduce, a weighted neighbor_allreduce and a window put/update, checking
every result against NumPy. Exits non-zero on any difference.

    starlingrun -np 2 python3 ctypes_direct.py [--library path/to/libstarling.so.0]

The library is found by --library, else $STARLING_LIBRARY, else the dynamic loader
(an installed libstarling.so.0). Prefer the `starling` package when you can build or
install it; this route suits an interpreter the package was not built for, or a
program that only needs a few calls.
"""

import argparse
import ctypes
import os
import sys

import numpy as np

# --- DLPack (dlpack/dlpack.h; Debian 12 ships 0.6, and the unversioned DLTensor has
# the same layout in every release up to 1.x). Field order and C types must mirror the
# header exactly: ctypes then applies the platform's C alignment rules.


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int),  # enum DLDeviceType: kDLCPU = 1
                ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8),  # kDLInt = 0, kDLUInt = 1, kDLFloat = 2
                ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p),
                ("device", DLDevice),
                ("ndim", ctypes.c_int32),
                ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),  # NULL: compact row-major
                ("byte_offset", ctypes.c_uint64)]


K_DL_CPU = 1
DTYPES = {np.dtype(np.int8): (0, 8), np.dtype(np.int16): (0, 16), np.dtype(np.int32): (0, 32),
          np.dtype(np.int64): (0, 64), np.dtype(np.uint8): (1, 8), np.dtype(np.float16): (2, 16),
          np.dtype(np.float32): (2, 32), np.dtype(np.float64): (2, 64)}


def dltensor(array):
    """A DLTensor view of a C-contiguous NumPy array. The view keeps the array and its
    shape alive for as long as the view itself is referenced."""
    if not array.flags.c_contiguous:
        raise ValueError("Starling takes contiguous tensors: use np.ascontiguousarray")
    code, bits = DTYPES[array.dtype]
    shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    t = DLTensor(data=array.ctypes.data, device=DLDevice(K_DL_CPU, 0), ndim=array.ndim,
                 dtype=DLDataType(code, bits, 1), shape=shape, strides=None, byte_offset=0)
    t._keepalive = (array, shape)
    return t


# --- starling.h: the option structs used here (each starts with struct_size, which
# must be sizeof of this very struct) and the functions' signatures.

class ContextOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("use_host_comm", ctypes.c_int),
                ("host_comm", ctypes.c_int64), ("nodes_per_machine", ctypes.c_int)]


class NeighborArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("use_weights", ctypes.c_int),
                ("self_weight", ctypes.c_double), ("num_sources", ctypes.c_int),
                ("source_ranks", ctypes.POINTER(ctypes.c_int)),
                ("source_weights", ctypes.POINTER(ctypes.c_double)), ("dynamic", ctypes.c_int),
                ("num_destinations", ctypes.c_int), ("destination_ranks", ctypes.POINTER(ctypes.c_int)),
                ("destination_weights", ctypes.POINTER(ctypes.c_double)), ("check_topology", ctypes.c_int),
                ("name", ctypes.c_char_p)]


STARLING_SUM, STARLING_AVERAGE = 0, 1
P = ctypes.c_void_p  # every handle (context, window, ...) is an opaque pointer
PTENSOR = ctypes.POINTER(DLTensor)
SIGNATURES = {
    "starling_context_create": [ctypes.POINTER(ContextOptions), ctypes.POINTER(P)],
    "starling_context_destroy": [P],
    "starling_rank": [P, ctypes.POINTER(ctypes.c_int)],
    "starling_size": [P, ctypes.POINTER(ctypes.c_int)],
    "starling_in_neighbors": [P, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.POINTER(ctypes.c_int)],
    "starling_allreduce": [P, PTENSOR, PTENSOR, ctypes.c_int, ctypes.c_char_p],
    "starling_neighbor_allreduce": [P, PTENSOR, PTENSOR, ctypes.POINTER(NeighborArgs)],
    "starling_barrier": [P],
    "starling_window_create": [P, PTENSOR, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(P)],
    "starling_window_put": [P, PTENSOR, ctypes.c_void_p],     # NULL args: every out-neighbor
    "starling_window_update": [P, ctypes.c_void_p],           # NULL args: uniform average
    "starling_window_free": [P],
}


class Starling:
    """The library with typed functions; every call's status is checked."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.starling_last_error.restype = ctypes.c_char_p
        for name, argtypes in SIGNATURES.items():
            function = getattr(self.lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int

    def __getattr__(self, name):
        function = getattr(self.lib, "starling_" + name)

        def checked(*args):
            status = function(*args)
            if status != 0:  # < 0: an error; > 0 (pending) is never returned by blocking calls
                raise RuntimeError(f"starling_{name}: {self.lib.starling_last_error().decode()}")
        return checked


def load(path):
    path = path or os.environ.get("STARLING_LIBRARY") or "libstarling.so.0"
    try:
        return Starling(path)
    except OSError as e:
        sys.exit(f"cannot load {path} ({e}): pass --library path/to/libstarling.so.0 "
                 "(in a build tree: build/libstarling.so.0)")


def require(ok, what):
    """A check that stays on under python -O."""
    if not ok:
        raise SystemExit(f"ctypes_direct: {what} differs from the NumPy reference")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", help="path of libstarling.so.0")
    parser.add_argument("--length", type=int, default=1000)
    args = parser.parse_args()
    st = load(args.library)

    ctx, rank, size = P(), ctypes.c_int(), ctypes.c_int()
    # NULL options: Starling initializes MPI itself (and finalizes it on destroy).
    st.context_create(None, ctypes.byref(ctx))
    st.rank(ctx, ctypes.byref(rank))
    st.size(ctx, ctypes.byref(size))
    rank, size = rank.value, size.value
    n = args.length

    def data(r, dtype=np.float64):  # rank r's contribution, the same on every rank
        return (np.arange(n) % 11 + 3 * r).astype(dtype)

    checks = 0
    # 1. allreduce: sum in several dtypes (out of place), average in place.
    for dtype in (np.float32, np.float64, np.int32):
        x, out = data(rank, dtype), np.empty(n, dtype)
        st.allreduce(ctx, dltensor(x), dltensor(out), STARLING_SUM, b"sum")
        require(np.array_equal(out, sum(data(r, dtype) for r in range(size))), f"allreduce sum ({np.dtype(dtype)})")
        checks += 1
    x = data(rank)
    tx = dltensor(x)
    st.allreduce(ctx, tx, tx, STARLING_AVERAGE, b"average")  # same tensor: in place
    require(np.allclose(x, sum(data(r) for r in range(size)) / size), "allreduce average")
    checks += 1

    # 2. neighbor_allreduce over the default graph (exponential-2) with explicit weights:
    #    keep half, and split the other half over the in-neighbors.
    count, sources = ctypes.c_int(), (ctypes.c_int * size)()  # fewer than size in-neighbors
    st.in_neighbors(ctx, sources, size, ctypes.byref(count))
    sources = list(sources[:count.value])
    self_weight = 0.5 if sources else 1.0
    weights = [(1 - self_weight) / len(sources) for _ in sources]
    # The struct keeps the ctypes arrays assigned to its pointer fields alive.
    nargs = NeighborArgs(struct_size=ctypes.sizeof(NeighborArgs), use_weights=1, self_weight=self_weight,
                         num_sources=len(sources), source_ranks=(ctypes.c_int * max(len(sources), 1))(*sources),
                         source_weights=(ctypes.c_double * max(len(sources), 1))(*weights), name=b"neighbors")
    x, out = data(rank), np.empty(n)
    st.neighbor_allreduce(ctx, dltensor(x), dltensor(out), ctypes.byref(nargs))
    expected = self_weight * data(rank) + sum(wt * data(s) for wt, s in zip(weights, sources))
    require(np.allclose(out, expected), "neighbor_allreduce")
    checks += 1

    # 3. A window over w: put w into every out-neighbor's buffer, then (once every rank's
    #    put has landed: a put is complete when it returns, hence the barrier) average
    #    w with the buffers of the in-neighbors. The window borrows w until it is freed.
    w = data(rank)
    tw = dltensor(w)
    win = P()
    st.window_create(ctx, tw, b"w", 0, ctypes.byref(win))
    st.window_put(win, tw, None)
    st.barrier(ctx)
    st.window_update(win, None)
    st.window_free(win)
    require(np.allclose(w, (data(rank) + sum(data(s) for s in sources)) / (len(sources) + 1)), "window update")
    checks += 1

    st.context_destroy(ctx)
    if rank == 0:
        print(f"ctypes_direct: {size} ranks, {checks} checks against NumPy: all equal")


if __name__ == "__main__":
    main()
