# ranks: none (cells of examples/python/interactive.ipynb, which ctest notebooks runs in a Jupyter kernel at 4 ranks, checking that it holds every line of this file)
# In the notebook, one cell:
import starling.interactive as si
rc = si.start(n=4)   # or, in a shell: starlingrun start -np 4; then rc = ipyparallel.Client(profile="bluefog")
dv = rc[:]

# Another cell, run by every rank:
%%px
import starling.torch as bf
bf.init()
x0 = torch.from_numpy(np.random.default_rng(100 + bf.rank()).standard_normal(3))
x, history = x0.clone(), []
for _ in range(20):
    x = bf.neighbor_allreduce(x)

# Back in the notebook's own kernel:
x0 = np.stack(dv.pull("x0", block=True))          # engine i = rank i
si.stop()
