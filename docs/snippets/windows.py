# ranks: 1 2 4
# Asynchronous averaging over one-sided windows: each rank puts its vector into its
# out-neighbors' buffers and averages with whatever has arrived, without waiting.
import time

import numpy as np
import starling

ctx = starling.Context()
ctx.set_topology(starling.Topology.ring(ctx.size), weighted=False)   # before any window
x = np.full(16, float(ctx.rank))
average = ctx.allreduce(x, "average")             # for comparison

win = ctx.window(x, "x")                      # collective: one buffer per in-neighbor
for step in range(200):
    win.put(x)                                # returns once the data is in the buffers
    win.update()                              # x = average of x and the buffers, in place
    time.sleep(1e-4 * (ctx.rank % 2))         # ranks at different speeds
ctx.barrier()                                 # every put has landed
for _ in range(3):                            # a few synchronous rounds to finish
    win.put(x)
    ctx.barrier()
    win.update()
ctx.barrier()
spread = ctx.allreduce(x, "max") - ctx.allreduce(x, "min")
print("rank %d: x = %.4f (the average is %.4f), spread over ranks %.1e"
      % (ctx.rank, x[0], average[0], spread.max()))
assert spread.max() < 1e-3                    # consensus: every rank holds the same value,
assert 0 <= x[0] <= ctx.size - 1              # inside the initial range; not exactly the
                                              # average: ranks out of step lose mass
                                              # (push-sum keeps it, below)
win.free()                                    # collective
ctx.close()
