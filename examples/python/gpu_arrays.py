#!/usr/bin/env python3
"""CuPy arrays and JAX GPU arrays through Starling: results come back as the caller's
array type, on the caller's device.

UNTESTED: no machine this project runs on has a GPU (the package's CUDA support is
tested on the emulated device with a DLPack array type of the tests). On a GPU machine
(`tests/gpu/device_kit.sh run` runs it):

    starlingrun -np 2 python3 gpu_arrays.py --framework cupy
    starlingrun -np 2 python3 gpu_arrays.py --framework jax     # jax[cuda12]

Each rank uses GPU (local rank % GPUs). Exits 77 (skipped) when the framework or a GPU
is missing, 1 on a wrong result.
"""

import argparse
import sys

import numpy as np

import starling

SKIPPED = 77


def skip(why):
    print(f"gpu_arrays: skipped: {why}")
    sys.exit(SKIPPED)


def cupy_backend(local_rank):
    try:
        import cupy
    except ImportError:
        skip("CuPy is not installed")
    if cupy.cuda.runtime.getDeviceCount() == 0:
        skip("no GPU")
    device = cupy.cuda.Device(local_rank % cupy.cuda.runtime.getDeviceCount())
    device.use()

    def make(values):
        return cupy.asarray(values, dtype=cupy.float32)

    def where(x):  # (type, device) a result must keep
        return (cupy.ndarray, x.device.id) if isinstance(x, cupy.ndarray) else (type(x), None)

    return make, where, cupy.asnumpy


def jax_backend(local_rank):
    try:
        import jax
    except ImportError:
        skip("JAX is not installed")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        skip("JAX sees no GPU (install jax[cuda12])")
    device = gpus[local_rank % len(gpus)]

    def make(values):
        return jax.device_put(np.asarray(values, np.float32), device)

    def where(x):
        return (jax.Array, tuple(sorted(d.id for d in x.devices()))) if isinstance(x, jax.Array) else (type(x), None)

    return make, where, np.asarray


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=["cupy", "jax"], required=True)
    parser.add_argument("--length", type=int, default=1 << 16)
    args = parser.parse_args()

    ctx = starling.Context()
    backend = cupy_backend if args.framework == "cupy" else jax_backend
    try:
        make, where, to_numpy = backend(ctx.local_rank)
    except SystemExit:  # skipped: every rank skips alike, and closes its context first
        ctx.close()
        raise
    data = [np.arange(args.length) % 13 + r for r in range(ctx.size)]  # every rank's values
    x = make(data[ctx.rank])

    results = {
        "allreduce": (ctx.allreduce(x, "sum"), sum(data)),
        "broadcast": (ctx.broadcast(x, 0), data[0]),
        "neighbor_allreduce": (ctx.neighbor_allreduce(x),
                               (data[ctx.rank] + sum(data[s] for s in ctx.in_neighbors))
                               / (len(ctx.in_neighbors) + 1)),
    }
    bad = []
    for name, (result, expected) in results.items():
        if where(result) != where(x):
            bad.append(f"{name} returned {where(result)}, not {where(x)}")
        elif not np.allclose(to_numpy(result), expected, rtol=1e-6):
            bad.append(f"{name} differs from the NumPy reference")
    if ctx.rank == 0:
        print(f"gpu_arrays ({args.framework}): {ctx.size} ranks, {len(results)} operations: "
              + ("; ".join(bad) if bad else f"results are {where(x)[0].__name__} on the caller's GPU, all equal"))
    ctx.close()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
