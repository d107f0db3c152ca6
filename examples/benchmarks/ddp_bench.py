"""DDP step time over Starling's torch.distributed backend against gloo, in one job.

The default process group is Starling's; a second group over the same ranks uses gloo.
For each model size, the same MLP (same seed) trains under DistributedDataParallel once
per backend, the backends interleaved in rounds so that load on the machine hits them
alike, plus a local step without DDP (the compute floor). Rank 0 prints the median
ms per step over rounds and the ratio gloo / Starling (above 1: Starling is faster).

    starlingrun -np 4 python examples/benchmarks/ddp_bench.py [--steps 20] [--rounds 5]
        [--widths 256,1024,2048] [--batch 32] [--threads 1] [--device cpu|cuda]

--device cuda trains CUDA models (rank r on GPU r % device count): Starling's backend takes
the staged or NCCL path, gloo copies through host memory.
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import starling.torch.distributed  # noqa: F401  (registers backend "starling")


def make_model(width):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


def settle(group, device):
    """The GPU's queued work done, then every rank here: a timer read after this counts it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if group is not None:
        dist.barrier(group=group)


def time_steps(model, steps, x, y, group):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    settle(group, x.device)
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    settle(group, x.device)
    return (time.perf_counter() - start) / steps * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--widths", default="256,1024,2048", help="hidden widths of the MLP")
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the models train")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: PyTorch sees no GPU")
    torch.set_num_threads(args.threads)

    dist.init_process_group(backend="starling")
    gloo = dist.new_group(backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"starling": dist.group.WORLD, "gloo": gloo}
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(args.batch, 784).to(device), torch.randint(0, 10, (args.batch,)).to(device)

    if rank == 0:
        on = torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU"
        print(f"DDP step time, {size} ranks on {on}, batch {args.batch} per rank, {args.steps} steps x "
              f"{args.rounds} rounds (median), torch {torch.__version__}")
        print(f"{'parameters':>11} {'local ms':>9} {'starling ms':>12} {'gloo ms':>8} {'gloo/starling':>14}")
    for width in (int(w) for w in args.widths.split(",")):
        models = {name: nn.parallel.DistributedDataParallel(make_model(width).to(device), process_group=group)
                  for name, group in groups.items()}
        local = make_model(width).to(device)
        times = {name: [] for name in ("local", *groups)}
        for name, group in groups.items():  # warm-up: buckets, connections
            time_steps(models[name], 3, x, y, group)
        for _ in range(args.rounds):
            times["local"].append(time_steps(local, args.steps, x, y, None))
            for name, group in groups.items():
                times[name].append(time_steps(models[name], args.steps, x, y, group))
        # Same data, same seed, same steps: the two DDP models must agree.
        a, b = (torch.cat([p.detach().flatten() for p in models[n].parameters()]) for n in groups)
        # The two sum in different orders, so they drift apart by rounding as steps go on
        # (2e-5 of 0.13 after 300 steps); a wrong reduction is off by far more.
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-3 * a.abs().max().item()), "starling and gloo DDP diverged"
        if rank == 0:
            med = {name: statistics.median(t) for name, t in times.items()}
            params = sum(p.numel() for p in local.parameters())
            print(f"{params:>11,} {med['local']:>9.2f} {med['starling']:>12.2f} {med['gloo']:>8.2f} "
                  f"{med['gloo'] / med['starling']:>14.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
