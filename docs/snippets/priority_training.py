# ranks: 1 2 4
# Gradient averaging scheduled by priority: step() returns at once, and each layer is
# updated just before its next forward use while the later layers' averages still move.
import torch
import starling.torch as bf

bf.init()
torch.manual_seed(bf.rank())                   # a different data shard per rank
x = torch.randn(512, 32)
y = (x[:, :4].sum(dim=1) > 0).long()

torch.manual_seed(0)                           # one initial model on every rank
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model,
                                               priority=True, partition_bytes=1 << 20)
for step in range(60):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()                                 # returns before the parameters are updated
opt.synchronize()                              # applies the last updates (before a checkpoint)

flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
assert torch.equal(flat, bf.broadcast(flat, root_rank=0)), "replicas differ"  # one model everywhere
print(f"rank {bf.rank()}: loss {loss.item():.3f}, plan {'made' if opt.schedule or bf.size() == 1 else 'none'}")
bf.shutdown()
