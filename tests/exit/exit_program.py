"""A job in which rank 0 leaves a training loop early while the others keep calling
allreduce; run by run_exit_test.py (README "Reliability": an exception on one rank).

    exit_program.py <mode> <step> [window] [torch]
      raise     rank 0 raises RuntimeError("user bug on rank 0") at <step> (uncaught)
      exit1     rank 0 calls sys.exit(1) at <step>
      shutdown  rank 0 closes its context (bf.shutdown() with torch) at <step>, exits 0
      with      rank 0 raises inside a `with Context()` block that the script catches
    window: a window lives, with a put and a barrier each step; torch: through
    starling.torch (the BlueFog API) instead of the core API on NumPy.

Rank 0 prints "T_LEAVE <time.monotonic()>" as it leaves. The others do not catch the
error: their own uncaught exception ends them (and tells the rest)."""
import sys
import time

import numpy as np

mode, step = sys.argv[1], int(sys.argv[2])
windowed, use_torch = "window" in sys.argv[3:], "torch" in sys.argv[3:]


def leave():
    print(f"T_LEAVE {time.monotonic():.6f}", flush=True)
    if mode == "raise":
        raise RuntimeError("user bug on rank 0")
    if mode == "exit1":
        sys.exit(1)


if use_torch:
    import torch
    import starling.torch as bf

    bf.init()
    if windowed:
        bf.win_create(torch.zeros(4), "w")
    for i in range(1000):
        if bf.rank() == 0 and i == step:
            leave()
            bf.shutdown()  # mode shutdown
            sys.exit(0)
        total = bf.allreduce(torch.ones(5), average=False, name="g")
        assert total.tolist() == [float(bf.size())] * 5, total
        if windowed:
            bf.win_put(torch.ones(4), "w")
            bf.barrier()
else:
    import starling

    def loop(ctx):
        win = ctx.window(np.zeros(4), "w") if windowed else None
        for i in range(1000):
            if ctx.rank == 0 and i == step:
                leave()
                ctx.close()  # mode shutdown
                sys.exit(0)
            total = ctx.allreduce(np.ones(5), op="sum")
            assert total.tolist() == [float(ctx.size)] * 5, total
            if win is not None:
                win.put()
                ctx.barrier()

    if mode == "with":
        try:
            with starling.Context() as ctx:
                if ctx.rank == 0:
                    print(f"T_LEAVE {time.monotonic():.6f}", flush=True)
                    raise RuntimeError("user bug on rank 0")
                loop(ctx)
        except RuntimeError as e:
            print(f"rank 0 caught {e!r} outside the with block", flush=True)
            sys.exit(3)
    else:
        loop(starling.Context())
