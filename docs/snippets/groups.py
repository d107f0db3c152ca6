# ranks: 2 4
# Reduce-scatter, all-to-all and groups, on any framework's tensors (blocks along
# dimension 0, in rows).
import numpy as np
import starling

ctx = starling.Context()
n, r = ctx.size, ctx.rank
x = np.arange(2 * n, dtype=np.float64) + r                  # 2 rows per rank
part = ctx.reduce_scatter(x, "sum")                         # x.shape[0] divisible by size
assert np.allclose(part, n * np.arange(2 * r, 2 * r + 2) + n * (n - 1) / 2)
y = ctx.alltoall(x)                                         # equal blocks
assert np.allclose(y[0::2] - np.arange(n), 2 * r)           # block r of every rank q
sub = ctx.split(r % 2, key=r)                               # a Context, or None for color None
assert sub.size == (n + 1 - r % 2) // 2 and sub.rank == r // 2
print("rank %d: reduce_scatter %s, alltoall ok, split into %d" % (r, part, sub.size))
sub.close()
ctx.close()
