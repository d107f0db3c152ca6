# ranks: 1 2
# Model averaging first, synchronous SGD once the gradient noise scale says so
# (starling.torch.DistributedAdaptiveSGDOptimizer).
import torch
import torch.nn as nn

import starling.torch as bf

bf.init()
torch.manual_seed(bf.rank())  # each rank starts elsewhere: SMA pulls them together
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = bf.DistributedAdaptiveSGDOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model,
    change_step=60,             # switch here at the latest (KungFu's rule)
    switch_when="noise_scale",  # or earlier, once noise scale >= size * batch_size
    batch_size=64, monitor_interval=5)

for step in range(80):
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()

assert opt.phase == "ssgd" and opt.switched_at <= 60
if bf.rank() == 0:
    print(f"switched to synchronous SGD at step {opt.switched_at}; noise scale then {opt.monitor.noise_scale}")
