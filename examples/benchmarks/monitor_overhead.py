"""What starling.torch.monitor_gradients costs per training step: an MLP (784-256-256-10,
~270k parameters) trained with DistributedGradientAllreduceOptimizer, without the
monitor, with it at every step and every 10th step, the configurations interleaved
in rounds so that load on the machine hits them alike. Rank 0 prints ms per step
(the median over rounds).

    starlingrun -np 2 python examples/benchmarks/monitor_overhead.py [steps] [rounds]
"""

import statistics
import sys
import time

import torch
import torch.nn as nn

import starling.torch as bf


def make(interval):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.01), model=model)
    if interval:
        opt = bf.monitor_gradients(opt, batch_size=32, interval=interval, name=f"every{interval}")
    return model, opt


def run(model, opt, steps, x, y):
    bf.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    bf.barrier()
    return (time.perf_counter() - start) / steps * 1e3


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    bf.init()
    torch.set_num_threads(1)
    x, y = torch.randn(32, 784), torch.randint(0, 10, (32,))
    configs = {"no monitor": make(0), "monitor every step": make(1), "monitor every 10th step": make(10)}
    times = {name: [] for name in configs}
    for _ in range(rounds):
        for name, (model, opt) in configs.items():
            times[name].append(run(model, opt, steps, x, y))
    if bf.rank() == 0:
        base = statistics.median(times["no monitor"])
        for name, values in times.items():
            ms = statistics.median(values)
            print(f"{name:24s} {ms:7.3f} ms/step  ({ms / base:5.3f}x)")
        print(f"noise scale {configs['monitor every step'][1].monitor.noise_scale:.1f}, "
              f"variance {configs['monitor every step'][1].monitor.variance:.3g} "
              f"({bf.size()} ranks, batch 32 per rank)")


if __name__ == "__main__":
    main()
