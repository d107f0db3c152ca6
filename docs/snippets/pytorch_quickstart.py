# ranks: 1 2 4
# Decentralized training with starling.torch (BlueFog's API): each rank fits a linear
# model to its own data and averages its parameters with its neighbors at every step.
import torch
import starling.torch as bf                    # was: import bluefog.torch as bf

bf.init()                                      # the exponential-2 topology
torch.manual_seed(bf.rank())                   # a different data shard per rank
true_w = torch.arange(1.0, 11.0)
x = torch.randn(256, 10)
y = x @ true_w + 0.01 * torch.randn(256)

model = torch.nn.Linear(10, 1, bias=False)
bf.broadcast_parameters(model.state_dict(), root_rank=0)     # start from one model
optimizer = bf.DistributedAdaptWithCombineOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.05), model,
    communication_type=bf.CommunicationType.neighbor_allreduce)
for epoch in range(100):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
    loss.backward()
    optimizer.step()                           # local step + neighbor averaging

error = (model.weight.detach().squeeze(0) - true_w).abs().max().item()
print("rank %d: loss %.5f, largest weight error %.4f" % (bf.rank(), loss.item(), error))
assert error < 0.05

# One step of a dynamic one-peer topology: receive from rank - 1, send to rank + 1.
if bf.size() > 1:
    t = torch.full((8,), float(bf.rank()))
    prev, nxt = (bf.rank() - 1) % bf.size(), (bf.rank() + 1) % bf.size()
    t = bf.neighbor_allreduce(t, self_weight=0.5, src_weights={prev: 0.5}, dst_weights=[nxt])
    assert torch.allclose(t, torch.full((8,), (bf.rank() + prev) / 2.0))
bf.shutdown()
