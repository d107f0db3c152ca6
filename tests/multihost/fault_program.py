"""A job of tests/multihost/fault_jobs.sh (the fault.multihost test and
examples/benchmarks/fault_timings.sh): ranks allreduce in a loop under
`mpirun --with-ft ulfm` (Open MPI 5) until ranks die; the survivors time the error
(PEER_FAILED) and the repair, and check an allreduce over them is exact.

  fault_program.py --kill-host HOST --mode rank|external

rank: the lowest rank on HOST SIGKILLs itself after --warmup iterations and prints
  VICTIM mono=T (CLOCK_MONOTONIC, one clock for every namespace host of the machine).
external: rank 0 prints READY after the warm-up; the caller kills (or stops) HOST's
  processes and notes the time itself.
Each survivor prints, when its operation fails,
  DETECTED rank=R by=heartbeat|report
(heartbeat: Starling's heartbeat, this rank's or another's, found the silent rank;
report: MPI or the launcher told), and MESSAGE rank=R with the error's text,
then, after the repair,
  SURVIVOR rank=R ok=1 detect_mono=T repair_s=D recovered_mono=T failed=1,3 by=...
(or ok=0 reason=...). Hosts are told apart by host name (the namespace hosts have
their own), ranks on HOST by an allgather of host indexes at the start."""
import argparse
import os
import signal
import socket
import sys
import time
import zlib

import numpy as np

import starling


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-host", required=True)
    parser.add_argument("--mode", choices=("rank", "external"), required=True)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    ctx = starling.Context()
    rank, size = ctx.rank, ctx.size
    host = socket.gethostname()
    hosts = np.asarray(ctx.allgather(np.array([zlib.crc32(host.encode())], dtype=np.int64)))
    on_host = [r for r in range(size) if hosts[r] == zlib.crc32(args.kill_host.encode())]
    expected = on_host if args.mode == "external" else on_host[:1]
    if not expected or len(expected) == size:
        print(f"SURVIVOR rank={rank} ok=0 reason=no rank, or every rank, is on {args.kill_host}", flush=True)
        return 1
    x = np.full(4, rank + 1.0)
    failure = None
    it = 0
    while failure is None:
        if it == args.warmup:
            if args.mode == "rank" and rank == expected[0]:
                print(f"VICTIM rank={rank} mono={time.monotonic():.6f}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            if args.mode == "external" and rank == 0:
                print("READY", flush=True)
        try:
            ctx.allreduce(x)
        except starling.PeerFailedError as e:
            failure = e
        it += 1
    detect = time.monotonic()
    # Its own heartbeat ("no answer to heartbeats") or another rank's, passed on.
    by = "heartbeat" if "heartbeat" in str(failure) else "report"
    print(f"DETECTED rank={rank} by={by}", flush=True)
    print(f"MESSAGE rank={rank} {failure}", flush=True)
    for attempt in range(3):  # a death the shrink missed fails the repair: call it again
        try:
            result = ctx.repair()
            break
        except starling.PeerFailedError:
            if attempt == 2:
                raise
    repaired = time.monotonic()
    got = np.asarray(ctx.allreduce(x))
    recovered = time.monotonic()
    want = sum(old + 1.0 for old, new in enumerate(result["old_to_new"]) if new >= 0)
    problems = []
    if result["failed"] != expected:
        problems.append(f"repair dropped {result['failed']}, expected {expected}")
    if not np.array_equal(got, np.full(4, want)):
        problems.append(f"allreduce over the survivors gave {got.tolist()}, expected {want}")
    ctx.close()
    if problems:
        print(f"SURVIVOR rank={rank} ok=0 reason={'; '.join(problems)}", flush=True)
        return 1
    print(f"SURVIVOR rank={rank} ok=1 detect_mono={detect:.6f} repair_s={repaired - detect:.6f} "
          f"recovered_mono={recovered:.6f} failed={','.join(map(str, result['failed']))} by={by}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
