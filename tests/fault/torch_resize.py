"""starling.torch resized on demand (run by run_grow_test.py under `mpirun --with-ft
ulfm`): 4 ranks train a model with a neighbor-averaging optimizer; bf.resize(2) makes
ranks 2 and 3 leave (they print LEFT and exit 0 at once); the 2 that stay train on;
bf.resize(5) starts 3 processes running this script, which join inside bf.init(), pull
the parameters of rank 0 with broadcast_parameters, and train with the others.
Checked with numbers after each change: with the parameters set to rank + 1 and
learning rate 0, one optimizer step gives exactly the neighbor average the topology
(exponential-2 over the new size) defines; the newcomers hold rank 0's parameters bit
for bit. Prints MEMBER / LEFT lines for the driver."""
import sys

import torch

import starling.torch as bf


def neighbor_average_step(model, optimizer):
    """Sets every parameter to rank + 1, takes one step at lr 0 and checks the result
    against the average over this rank and its in-neighbors (uniform weights)."""
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(bf.rank() + 1.0)
    optimizer.zero_grad()
    model(torch.ones(2, 4, dtype=torch.float64)).sum().backward()
    optimizer.step()
    ranks = [bf.rank(), *bf.in_neighbor_ranks()]
    expected = sum(r + 1.0 for r in ranks) / len(ranks)
    for p in model.parameters():
        got = p.detach()
        if not torch.allclose(got, torch.full_like(got, expected), rtol=0, atol=1e-12):
            raise AssertionError(f"size {bf.size()}: neighbor average {got.flatten()[0].item()} != {expected}")


def main():
    bf.init()
    joined = bf.joined()
    torch.manual_seed(7)
    model = torch.nn.Linear(4, 3).double()
    optimizer = bf.DistributedAdaptWithCombineOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), model)
    try:
        if not joined:
            if bf.size() != 4:
                raise AssertionError(f"resize runs at 4 ranks, not {bf.size()}")
            neighbor_average_step(model, optimizer)
            first = bf.rank()
            result = bf.resize(2)
            if result["old_to_new"] != [0, 1, -1, -1] or result["left"] != [2, 3]:
                raise AssertionError(f"shrink result {result}")
            if result["new_rank"] < 0:
                if bf.is_initialized():
                    raise AssertionError("Starling still initialized on a rank that left")
                print(f"LEFT rank={first}", flush=True)
                return 0
            if (bf.rank(), bf.size()) != (first, 2):
                raise AssertionError(f"rank {bf.rank()} of {bf.size()} after the shrink")
            neighbor_average_step(model, optimizer)
            result = bf.resize(5)
            if result["joined"] != [2, 3, 4]:
                raise AssertionError(f"grow result {result}")
        elif not 2 <= bf.rank() <= 4 or bf.size() != 5:
            raise AssertionError(f"newcomer at rank {bf.rank()} of {bf.size()}")
        # Everyone: rank 0's parameters (fixed values, so that a partial copy shows).
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(torch.arange(p.numel(), dtype=torch.float64).reshape(p.shape) / 7 + i
                        if bf.rank() == 0 else torch.full_like(p, -1.0))
        bf.broadcast_parameters(model.state_dict(), root_rank=0)
        for i, p in enumerate(model.parameters()):
            want = torch.arange(p.numel(), dtype=torch.float64).reshape(p.shape) / 7 + i
            if not torch.equal(p.detach(), want):
                raise AssertionError("the parameters differ from rank 0's")
        neighbor_average_step(model, optimizer)
        print(f"MEMBER rank={bf.rank()} joined={int(joined)} ok=1 size={bf.size()}", flush=True)
        bf.shutdown()
        return 0
    except Exception as e:  # the driver reports it; the job must not hang on it
        print(f"MEMBER rank={bf.rank() if bf.is_initialized() else -1} joined={int(joined)} ok=0 reason={e!r}",
              flush=True)
        raise


if __name__ == "__main__":
    sys.exit(main())
