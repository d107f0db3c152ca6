"""The Python layer's cost: allreduce and neighbor_allreduce called from PyTorch through
starling.torch, against the same Starling calls made from a C loop (bench_loop.c,
loaded with ctypes) on the same context, in the same process, in alternating batches;
or (--against mpi4py) against mpi4py moving the same bytes.

    mpirun -np 2 python3 examples/benchmarks/python_bench.py [--max-bytes 16777216]
        [--budget 0.3] [--csv python_bench.csv] [--c-loop <build>/examples/benchmarks/libstarling_bench_loop.so]
        [--against c|mpi4py] [--busy N]

Both sides are blocking and out of place on float32 tensors; the Python side allocates
its output with torch on every call, as a BlueFog program does. With --against mpi4py,
allreduce is compared with comm.Allreduce plus the division (Starling averages), and
neighbor_allreduce (on a ring) with Isend/Irecv to and from the same neighbors plus the
same average. --busy N starts N busy-looping processes (rank 0, for the whole run): the
cores are contended as they are in training, where data loaders and framework threads
compete for them. Prints a table (rank 0) and appends CSV rows.
"""

import argparse
import ctypes
import csv
import os
import statistics
import subprocess
import sys
import time

import torch

import starling.torch as bf
from starling import topology_util
from starling import _core
from starling.torch import _state

OPS = {"allreduce": 0, "neighbor_allreduce": 1}


def find_c_loop(path):
    candidates = [path] if path else []
    here = os.path.dirname(os.path.abspath(__file__))
    package = os.path.dirname(os.path.abspath(bf.__file__))
    candidates += [os.path.join(here, "libstarling_bench_loop.so"),
                   os.path.join(package, "..", "..", "..", "examples", "benchmarks", "libstarling_bench_loop.so")]
    for candidate in candidates:
        if candidate and os.path.exists(candidate):
            library = ctypes.CDLL(os.path.abspath(candidate))
            function = library.starling_bench_loop
            function.restype = ctypes.c_double
            function.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                 ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
            return function
    sys.exit("python_bench: libstarling_bench_loop.so not found; build the project and pass --c-loop <path>")


def sizes(min_bytes, max_bytes):
    size = min_bytes
    while size <= max_bytes:
        yield size
        size *= 4


def agree(value):
    """Rank 0's value on every rank (batch sizes must match: the calls are collective)."""
    return int(bf.broadcast(torch.tensor([value], dtype=torch.int64), 0).item())


def mpi4py_call(op):
    """The same data movement as starling.torch's `op`, through mpi4py (blocking, out of
    place, the output allocated per call as on the Starling side)."""
    from mpi4py import MPI  # after bf.init(): MPI is initialized, mpi4py uses it as it is
    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    if op == "allreduce":
        def allreduce(x):
            out = torch.empty_like(x)
            comm.Allreduce(x.numpy(), out.numpy(), op=MPI.SUM)
            return out.div_(size)
        return allreduce
    sources, destinations = bf.in_neighbor_ranks(), bf.out_neighbor_ranks()

    def neighbor_average(x):
        received = [torch.empty_like(x) for _ in sources]
        requests = [comm.Irecv(r.numpy(), source=s, tag=7) for r, s in zip(received, sources)]
        requests += [comm.Isend(x.numpy(), dest=d, tag=7) for d in destinations]
        MPI.Request.Waitall(requests)
        out = x.clone()
        for r in received:
            out.add_(r)
        return out.div_(len(sources) + 1)
    return neighbor_average


def check_mpi4py(op, call):
    """The mpi4py side computes what starling.torch does (else the comparison is void)."""
    x = torch.arange(1000, dtype=torch.float32) * (bf.rank() + 1)
    reference = bf.allreduce(x) if op == "allreduce" else bf.neighbor_allreduce(x)
    if not torch.allclose(call(x), reference, rtol=1e-5):
        sys.exit(f"python_bench: the mpi4py {op} differs from starling.torch's")


def measure(op, nbytes, c_loop, budget):
    """(reference seconds per call, Python seconds per call): medians over alternating
    batches. The reference is the C loop, or (c_loop is a Python callable) mpi4py."""
    count = nbytes // 4
    x, out = torch.rand(count), torch.empty(count)
    call = bf.allreduce if op == "allreduce" else bf.neighbor_allreduce
    handle, status = int(_state.handle), ctypes.c_int()

    def c_batch(n):
        if not isinstance(c_loop, ctypes._CFuncPtr):
            start = time.perf_counter()
            for _ in range(n):
                c_loop(x)
            return (time.perf_counter() - start) / n
        seconds = c_loop(handle, OPS[op], x.data_ptr(), out.data_ptr(), count, n, ctypes.byref(status))
        if seconds < 0:
            raise RuntimeError(f"C loop failed with status {status.value}: {_core.last_error()}")
        return seconds / n

    def python_batch(n):
        start = time.perf_counter()
        for _ in range(n):
            call(x)
        return (time.perf_counter() - start) / n

    c_batch(3), python_batch(3)  # warm up (connections, scratch buffers, allocator)
    bf.barrier()
    per_call = c_batch(5)
    per_batch = agree(max(1, min(2000, int(budget / 10 / max(per_call, 1e-7)))))
    rounds = 10
    c_times, python_times = [], []
    for _ in range(rounds):
        bf.barrier()
        c_times.append(c_batch(per_batch))
        bf.barrier()
        python_times.append(python_batch(per_batch))
    return statistics.median(c_times), statistics.median(python_times)


def human(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:g} {unit}"
        nbytes /= 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default="allreduce,neighbor_allreduce")
    parser.add_argument("--min-bytes", type=int, default=4)
    parser.add_argument("--max-bytes", type=int, default=16 << 20)
    parser.add_argument("--budget", type=float, default=0.3, help="seconds per side per size")
    parser.add_argument("--csv", default="")
    parser.add_argument("--c-loop", default="", help="path of libstarling_bench_loop.so")
    parser.add_argument("--against", choices=("c", "mpi4py"), default="c",
                        help="the reference: the C loop (the Python layer's cost) or mpi4py")
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes to run alongside")
    args = parser.parse_args()
    c_loop = find_c_loop(args.c_loop) if args.against == "c" else None
    bf.init()
    if args.against == "mpi4py":
        bf.set_topology(topology_util.RingGraph(bf.size()))
    busy = []
    if bf.rank() == 0:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    rows = []
    try:
        for op in args.ops.split(","):
            if op not in OPS:
                sys.exit(f"python_bench: unknown op {op!r} (choose from {', '.join(OPS)})")
            reference = c_loop
            if args.against == "mpi4py":
                reference = mpi4py_call(op)
                check_mpi4py(op, reference)
            for nbytes in sizes(args.min_bytes, args.max_bytes):
                c, python = measure(op, nbytes, reference, args.budget)
                rows.append((op, nbytes, c, python))
    finally:
        for process in busy:
            process.kill()
            process.wait()
    if bf.rank() == 0:
        if args.against == "mpi4py":
            print(f"starling.torch against mpi4py, {bf.size()} ranks, {args.busy} busy processes (median per "
                  "call, alternating batches)")
            print(f"{'op':<20} {'size':>10} {'mpi4py (us)':>12} {'Starling (us)':>14} {'ratio':>7}")
            for op, nbytes, c, python in rows:
                print(f"{op:<20} {human(nbytes):>10} {c * 1e6:>12.2f} {python * 1e6:>14.2f} {python / c:>7.2f}")
        else:
            print(f"Python layer overhead, {bf.size()} ranks (median per call; C loop and starling.torch on the "
                  "same context, alternating batches)")
            print(f"{'op':<20} {'size':>10} {'C (us)':>10} {'Python (us)':>12} {'overhead (us)':>14} {'overhead':>9}")
            for op, nbytes, c, python in rows:
                print(f"{op:<20} {human(nbytes):>10} {c * 1e6:>10.2f} {python * 1e6:>12.2f} "
                      f"{(python - c) * 1e6:>14.2f} {100 * (python - c) / c:>8.1f}%")
        if args.csv:
            new = not os.path.exists(args.csv)
            with open(args.csv, "a", newline="") as f:
                writer = csv.writer(f)
                if new:
                    writer.writerow(["op", "ranks", "bytes", "reference", "busy", "reference_seconds",
                                     "python_seconds", "overhead_seconds"])
                for op, nbytes, c, python in rows:
                    writer.writerow([op, bf.size(), nbytes, args.against, args.busy, f"{c:.9f}", f"{python:.9f}",
                                     f"{python - c:.9f}"])
    bf.shutdown()


if __name__ == "__main__":
    main()
