"""Communication overlapped with the backward pass, against the same communication after it.

Two methods of starling.torch, each timed four ways on the same MLP (same seed, same
data), the ways interleaved in rounds so that load on the machine hits them alike:

  local    forward, backward and the SGD step, no communication (the compute floor)
  comm     the method's communication alone: the same tensors, launched together
  after    backward, then the communication, then the step (no overlap)
  overlap  the method's optimizer wrapper, which launches from hooks while backward runs

  grad  gradient averaging: allreduce of each gradient
        (DistributedGradientAllreduceOptimizer: launched from each gradient's
        accumulator hook as backward produces it)
  prio  gradient averaging scheduled by priority (the same wrapper with priority=True,
        as ByteScheduler: gradients cut into partitions, held back once the link is
        backed up and then sent input layers first, each layer updated just before its
        next forward use, so the next forward pass overlaps the rest of the averaging)
  awc   adapt-with-combine: neighbor averaging of each parameter
        (DistributedAdaptWithCombineOptimizer: launched after the forward pass, so it
        runs during the whole backward pass)

--device-ms D models an accelerator: each linear layer's forward also takes D ms, and
its backward 2 D ms (two matrix products against the forward's one), during which the
host CPU is free (a sleep), as on a GPU, where the CPU only queues the kernels. Without it the compute is the CPU's own, and on a machine with few
cores it competes with the communication's CPU work (the kernel's TCP stack, the
progress thread) for the same cores.

"after" and "overlap" compute the same thing in the same order, so their parameters
must agree bit for bit at the end (checked). Rank 0 prints the median ms per step, the
speedup after / overlap and the fraction of the communication hidden,
(after - overlap) / comm.

    starlingrun -np 2 python examples/benchmarks/overlap_bench.py [--steps 10] [--rounds 5]
        [--width 1024] [--layers 6] [--batch 256] [--methods grad,prio,awc] [--device-ms 0]
        [--partition-mib 4]
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn

import starling.torch as st


class _DeviceTime(torch.autograd.Function):
    """Identity whose forward takes `seconds` of (modelled) device time, its backward twice that."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        time.sleep(seconds)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(2 * ctx.seconds)
        return grad, None


class DeviceTime(nn.Module):
    def __init__(self, ms):
        super().__init__()
        self.seconds = ms / 1e3

    def forward(self, x):
        return _DeviceTime.apply(x, self.seconds)


def make_model(width, layers, device_ms=0.0):
    torch.manual_seed(0)
    delay = [DeviceTime(device_ms)] if device_ms > 0 else []
    blocks = [nn.Linear(784, width), *delay, nn.ReLU()]
    for _ in range(layers - 2):
        blocks += [nn.Linear(width, width), *delay, nn.ReLU()]
    return nn.Sequential(*blocks, nn.Linear(width, 10), *delay)


def loss_of(model, x, y):
    return nn.functional.cross_entropy(model(x), y)


def launch(method, tensors):
    if method in ("grad", "prio"):
        return [st.allreduce_nonblocking(t, average=True, name=f"overlap.{i}") for i, t in enumerate(tensors)]
    return [st.neighbor_allreduce_nonblocking(t, name=f"overlap.{i}") for i, t in enumerate(tensors)]


def step_local(model, opt, x, y):
    """A plain step; with a Starling optimizer wrapper, its hooks communicate."""
    opt.zero_grad()
    loss_of(model, x, y).backward()
    opt.step()


def step_after(method, model, opt, x, y):
    opt.zero_grad()
    loss_of(model, x, y).backward()
    params = list(model.parameters())
    with torch.no_grad():
        if method in ("grad", "prio"):
            for p, h in zip(params, launch(method, [p.grad for p in params])):
                p.grad.copy_(st.synchronize(h))
        else:  # AWC: w+ = Combine(w) - lr * grad f(w), the gradient taken at w
            for p, h in zip(params, launch(method, [p.data for p in params])):
                p.copy_(st.synchronize(h))
    opt.step()


def step_comm(method, buffers):
    for h in launch(method, buffers):
        st.synchronize(h)


def timed(steps, one_step, finish=None):
    st.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        one_step()
    if finish:  # prio: the last step's updates, which otherwise wait for the next forward pass
        finish()
    st.barrier()
    return (time.perf_counter() - start) / steps * 1e3


def bench(method, args, x, y):
    local = make_model(args.width, args.layers, args.device_ms)
    after = make_model(args.width, args.layers, args.device_ms)
    overlap = make_model(args.width, args.layers, args.device_ms)
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.01) for name, m in
            (("local", local), ("after", after), ("overlap", overlap))}
    if method in ("grad", "prio"):
        opts["overlap"] = st.DistributedGradientAllreduceOptimizer(
            opts["overlap"], model=overlap, priority=method == "prio",
            partition_bytes=int(args.partition_mib * 2**20))
    else:
        opts["overlap"] = st.DistributedAdaptWithCombineOptimizer(
            opts["overlap"], model=overlap, communication_type=st.CommunicationType.neighbor_allreduce)
    buffers = [torch.zeros_like(p) for p in local.parameters()]
    ways = {
        "local": lambda: step_local(local, opts["local"], x, y),
        "comm": lambda: step_comm(method, buffers),
        "after": lambda: step_after(method, after, opts["after"], x, y),
        "overlap": lambda: step_local(overlap, opts["overlap"], x, y),  # the wrapper communicates
    }
    finish = {"overlap": opts["overlap"].synchronize} if method == "prio" else {}
    for name, run in ways.items():  # warm-up: connections, buffers, the launch order, prio's plan
        timed(5, run, finish.get(name))
    times = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, run in ways.items():
            times[name].append(timed(args.steps, run, finish.get(name)))
    if method == "prio" and st.rank() == 0 and args.show_plan:
        print("prio plan:", opts["overlap"].schedule)
    for a, b in zip(after.parameters(), overlap.parameters()):
        assert torch.equal(a, b), f"{method}: the overlapped run diverged from the one without overlap"
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--width", type=int, default=1024, help="hidden width of the MLP")
    parser.add_argument("--layers", type=int, default=6, help="linear layers of the MLP")
    parser.add_argument("--batch", type=int, default=256, help="samples per rank per step")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--methods", default="grad,prio,awc")
    parser.add_argument("--partition-mib", type=float, default=1.0, help="prio: partition size, MiB")
    parser.add_argument("--show-plan", action="store_true", help="prio: print the release plan")
    parser.add_argument("--device-ms", type=float, default=0.0,
                        help="modelled device time per linear layer: D ms forward, 2 D backward (CPU free)")
    args = parser.parse_args()
    if not args.device_ms >= 0:
        parser.error(f"--device-ms must be >= 0, got {args.device_ms}")
    if not args.partition_mib > 0:
        parser.error(f"--partition-mib must be > 0, got {args.partition_mib}")
    torch.set_num_threads(args.threads)
    st.init()
    torch.manual_seed(1 + st.rank())
    x, y = torch.randn(args.batch, 784), torch.randint(0, 10, (args.batch,))
    megabytes = sum(p.numel() for p in make_model(args.width, args.layers).parameters()) * 4 / 2**20
    if st.rank() == 0:
        print(f"overlap with backward: {st.size()} ranks, MLP {args.layers} x {args.width} ({megabytes:.1f} MiB of "
              f"parameters), batch {args.batch}, {args.steps} steps x {args.rounds} rounds (median), "
              f"device time {args.device_ms:g} + {2 * args.device_ms:g} ms per layer, torch {torch.__version__}")
        print(f"{'method':>6} {'local ms':>9} {'comm ms':>8} {'after ms':>9} {'overlap ms':>11} "
              f"{'after/overlap':>14} {'hidden':>7}")
    for method in args.methods.split(","):
        if method not in ("grad", "prio", "awc"):
            raise SystemExit(f"overlap_bench: unknown method '{method}' (grad, prio, awc)")
        med = bench(method, args, x, y)
        if st.rank() == 0:
            hidden = (med["after"] - med["overlap"]) / med["comm"]
            print(f"{method:>6} {med['local']:>9.1f} {med['comm']:>8.1f} {med['after']:>9.1f} "
                  f"{med['overlap']:>11.1f} {med['after'] / med['overlap']:>14.2f} {hidden:>7.0%}")
    st.shutdown()


if __name__ == "__main__":
    main()
