# ranks: 1 2
# The gradient noise scale and variance while training (starling.torch.monitor_gradients).
import torch
import torch.nn as nn

import starling.torch as bf

bf.init()
torch.manual_seed(bf.rank())
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
bf.broadcast_parameters(model.state_dict(), root_rank=0)
opt = bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.05), model=model)
opt = bf.monitor_gradients(opt, batch_size=16, interval=5)  # 16 samples per rank per step

for step in range(20):
    x = torch.randn(16, 8)
    y = x.sum(dim=1, keepdim=True)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()

m = opt.monitor  # the same values on every rank
assert m.monitored_steps == 4 and m.variance is not None
if bf.rank() == 0:
    print(f"noise scale {m.noise_scale}, variance {m.variance:.4g} after {m.steps} steps")

# How far apart the ranks' replicas are (0 here: gradient averaging keeps them equal).
distance = bf.consensus_distance(model[0].weight)
assert distance < 1e-6
