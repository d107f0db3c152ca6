# ranks: 1 2 4
# Decentralized averaging from NumPy: run with  starlingrun -np 4 python3 first.py
import numpy as np
import starling

ctx = starling.Context()                      # every rank of the job; MPI starts here
x = np.full(4, float(ctx.rank))               # rank r holds [r, r, r, r]

mean = ctx.allreduce(x, "average")            # a new array: the exact average
assert np.allclose(mean, (ctx.size - 1) / 2)

for step in range(30):                        # average with the neighbors, in place,
    ctx.neighbor_allreduce(x, out=x)          # over the default exponential-2 graph
print("rank %d of %d: %.6f (the average is %.6f)" % (ctx.rank, ctx.size, x[0], mean[0]))
assert np.allclose(x, mean, atol=1e-6)        # every rank converged to the average

with ctx.allreduce_nonblocking(x, "sum") as request:
    pass                                      # compute here; the GIL is released
total = request.wait()
assert np.allclose(total, ctx.size * mean)
ctx.close()                                   # collective
