"""Context.probe_peers() against raw mpi4py exchanges of the same sizes, in one run at
2 ranks: the probe's latency against half the best raw 0-byte round trip; its throughput
against a raw one-way transfer and a raw exchange in both directions at once (what the
probe does: every rank pings while it answers).

    starlingrun -np 2 python3 examples/benchmarks/probe_vs_raw.py
"""
import time
import numpy as np
from mpi4py import MPI
import starling

ctx = starling.Context()
comm = MPI.COMM_WORLD
if comm.size != 2:
    raise SystemExit("run at 2 ranks: starlingrun -np 2 python3 examples/benchmarks/probe_vs_raw.py")
rank, other = comm.rank, 1 - comm.rank

def raw_rtt(nbytes, reps=50):
    buf = np.zeros(max(nbytes, 1), np.uint8)
    ack = np.zeros(1, np.uint8)
    best = 1e9
    for _ in range(reps):
        comm.Barrier()
        t = time.perf_counter()
        if rank == 0:
            comm.Send(buf[:nbytes], other); comm.Recv(ack, other)
        else:
            comm.Recv(buf[:nbytes], other); comm.Send(ack, other)
        best = min(best, time.perf_counter() - t)
    return best

def raw_both(nbytes, reps=20):
    # Both ranks send nbytes to each other at once, then exchange a 1-byte answer.
    a = np.zeros(nbytes, np.uint8); b = np.zeros(nbytes, np.uint8); ack = np.zeros(1, np.uint8); ack2 = ack.copy()
    best = 1e9
    for _ in range(reps):
        comm.Barrier()
        t = time.perf_counter()
        comm.Sendrecv(a, other, recvbuf=b, source=other)
        comm.Sendrecv(ack, other, recvbuf=ack2, source=other)
        best = min(best, time.perf_counter() - t)
    return best

for bulk in (1 << 16, 1 << 20, 1 << 24):
    small = raw_rtt(0)
    big = raw_rtt(bulk, 20)
    p = ctx.probe_peers(repetitions=20, bulk_bytes=bulk)
    both = raw_both(bulk)
    if rank == 0:
        print(f"{bulk:>9} B: latency probe {p['latency_seconds'][1]*1e6:.2f} us raw {small/2*1e6:.2f} us; "
              f"throughput probe {p['bytes_per_second'][1]/1e9:.2f} GB/s raw (one way) {bulk/(big-small/2)/1e9:.2f} GB/s, (both ways) {bulk/(both-small)/1e9:.2f} GB/s",
              flush=True)
ctx.close()
