"""starling_context_grow when the new process never joins (run under
`mpirun --with-ft ulfm` with STARLING_TIMEOUT_SECONDS=3 by ctest fault.grow_never_joins):
a program that exits without initializing MPI (/bin/true), and one that initializes MPI
and exits before creating its Starling context (init_then_exit). Every current rank must
get an error (TIMEOUT, or TRANSPORT when MPI reports the dead process) within the limit
plus 3 s, and the context must stay usable (an exact allreduce). Prints one
'GROW_REFUSED rank=R ...' line per case and 'OK rank=R' at the end.

Usage: grow_never_joins.py INIT_THEN_EXIT_PROGRAM"""
import os
import sys
import time

import numpy as np

import starling

limit = float(os.environ["STARLING_TIMEOUT_SECONDS"])
ctx = starling.Context()
problems = []
for command in ["/bin/true", sys.argv[1]]:
    start = time.monotonic()
    try:
        ctx.grow(count=1, command=command)
        problems.append(f"{command}: the grow succeeded")
    except (starling.StarlingTimeoutError, starling.TransportError) as e:
        took = time.monotonic() - start
        if took > limit + 3:
            problems.append(f"{command}: the error came after {took:.1f} s")
        if "context is unchanged" not in str(e):
            problems.append(f"{command}: unexpected message: {e}")
        print(f"GROW_REFUSED rank={ctx.rank} command={command} after={took:.2f}s {type(e).__name__}", flush=True)
    total = ctx.allreduce(np.array([ctx.rank + 1.0]))
    if ctx.size != int(os.environ.get("OMPI_COMM_WORLD_SIZE", "0")) or total[0] != ctx.size * (ctx.size + 1) / 2:
        problems.append(f"{command}: after the refusal size {ctx.size}, allreduce {total}")
# One verdict for the job (two ranks' "OK" lines may interleave with other output).
failed = ctx.allreduce(np.array([float(len(problems) > 0)]))[0]
rank, size = ctx.rank, ctx.size
ctx.close()
if problems:
    print(f"FAILED rank={rank}: " + "; ".join(problems), flush=True)
    sys.exit(1)
if rank == 0 and failed == 0:
    print(f"ALL_OK ranks={size}", flush=True)
