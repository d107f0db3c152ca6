"""Stragglers, measured: the same MLP trained on scikit-learn's digits by every averaging
method while one rank (or a random rank per epoch) is k times slower, k in {1, 2, 5, 10}.

    starlingrun -np 4 python3 examples/benchmarks/straggler_bench.py \\
        [--slowdowns 1,2,5,10] [--settings fixed,random] [--epochs 20] [--target 0.95] \\
        [--methods allreduce,static,dynamic,winput,pushsum,adpsgd] [--out build/straggler]

How a rank is slowed: after its forward and backward pass (timed), a slow rank sleeps
(k - 1) times that measured compute time, then steps. Sleeping models a slower device
without taking CPU from the other ranks (this benchmark runs oversubscribed on a 2-core
machine); --burn spins the CPU for that time instead (a rank that computes k times
longer, which on an oversubscribed machine also slows its neighbours' cores).
--device-ms D adds D milliseconds of sleep to every rank's step after its backward pass,
modelling an accelerator that computes while the host CPU is free; the slow rank then
stalls (k - 1) times (measured compute + D). On this oversubscribed machine the real
forward and backward are short next to the communication and the CPU contention, so
without D a k-times slower compute hardly slows anyone (see docs/performance.md).
--settings fixed: the last rank is slow throughout; random: every epoch (each rank's own
epoch count) a rank drawn from a seeded generator shared by all ranks is slow.

Methods (torch.optim.SGD with momentum 0.9 inside each, the same initial weights):
  allreduce  gradient allreduce (synchronous: every step waits for every rank);
  static     neighbor averaging on the exponential-2 graph (adapt-with-combine);
  dynamic    neighbor averaging with one peer per step (GetDynamicOnePeerSendRecvRanks);
  winput     asynchronous window averaging (DistributedWinPutOptimizer: put to the
             out-neighbors, average with what arrived);
  pushsum    asynchronous push-sum over windows (DistributedPushSumOptimizer);
  adpsgd     AD-PSGD pair averaging over windows (DistributedPairAveragingOptimizer), with
             in-neighbors that stepped since the last averaging with them only;
  adpsgd_any AD-PSGD drawing from every in-neighbor, stepped or not (KungFu's rule,
             only_fresh_peers=False; not run by default);
  pushsum_barrier  push-sum with a barrier before every step's averaging (BlueFog's
             push-sum, force_barrier=True; not run by default).
Synchronous methods run --epochs epochs on every rank. Asynchronous ones stop when the
first rank has run --epochs epochs (the others, the slow one included, stop at their next
step: the run is over when the fast ranks are done).

Measured, per method, k and setting: time per epoch (the run's wall-clock time divided by
the epochs the ranks completed, averaged over ranks: the time the job takes per epoch of
data), time to --target test accuracy, and the final accuracy. Accuracy is the mean over
ranks of each rank's model on the test set, sampled by every rank each time its clock
crosses a multiple of --sample-interval (the evaluation is not counted in the clock).
After each run, one allreduce averages the ranks' models (what a decentralized run ends
with): the accuracy of that averaged model is reported too.
Rank 0 writes OUT.csv, OUT.json and, where matplotlib is installed, OUT.png (accuracy
against wall-clock time per method, one panel per k and setting).
"""

import argparse
import csv
import json
import os
import random
import shutil
import sys
import tempfile
import time

import numpy as np
import torch

import starling.torch as bf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from train_mlp import accuracy, load_data  # noqa: E402

ASYNCHRONOUS = ("winput", "pushsum", "adpsgd", "adpsgd_any")
DESCRIPTIONS = {
    "allreduce": "gradient allreduce",
    "static": "static neighbor averaging",
    "dynamic": "dynamic one-peer averaging",
    "winput": "window put averaging (async)",
    "pushsum": "push-sum (async)",
    "adpsgd": "AD-PSGD pair averaging (async)",
    "adpsgd_any": "AD-PSGD, any in-neighbor (KungFu's rule)",
    "pushsum_barrier": "push-sum with a barrier per step (BlueFog's)",
}
DEFAULT_METHODS = "allreduce,static,dynamic,winput,pushsum,adpsgd"


def make_model(hidden):
    return torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def make_optimizer(method, model, lr, tag):
    base = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    if method == "allreduce":
        return bf.DistributedGradientAllreduceOptimizer(base, model)
    if method in ("static", "dynamic"):
        return bf.DistributedAdaptWithCombineOptimizer(base, model, bf.CommunicationType.neighbor_allreduce)
    if method == "winput":
        return bf.DistributedWinPutOptimizer(base, model, window_prefix=tag)
    if method in ("pushsum", "pushsum_barrier"):
        return bf.DistributedPushSumOptimizer(base, model, force_barrier=method == "pushsum_barrier")
    if method in ("adpsgd", "adpsgd_any"):
        return bf.DistributedPairAveragingOptimizer(base, model, window_prefix=tag,
                                                    only_fresh_peers=method == "adpsgd")
    raise ValueError(method)


def slow_rank(setting, epoch, seed):
    """The rank slowed in this epoch (the same answer on every rank)."""
    if setting == "fixed":
        return bf.size() - 1
    return random.Random(seed * 100003 + epoch).randrange(bf.size())


def stall(seconds, burn):
    if seconds <= 0:
        return
    if not burn:
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def train(method, k, setting, data, args, stop_path):
    """One run; returns this rank's samples [(seconds, accuracy)], seconds, epochs done and
    the accuracy of the ranks' averaged model."""
    train_x, train_y, test_x, test_y = data
    torch.manual_seed(1234)
    model = make_model(args.hidden)
    bf.broadcast_parameters(model.state_dict(), root_rank=0)
    tag = f"straggler.{method}.{setting}.{k}"
    optimizer = make_optimizer(method, model, args.lr, tag)
    schedule = bf.GetDynamicOnePeerSendRecvRanks(bf.load_topology(), bf.rank())
    batches = max(1, len(train_x) // args.batch_size)
    samples = [(0.0, accuracy(model, test_x, test_y))]
    paused, next_sample, epochs_done = 0.0, args.sample_interval, 0.0
    stopped = False
    bf.barrier()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        slow = k > 1 and slow_rank(setting, epoch, args.seed) == bf.rank()
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(epoch * 7919 + bf.rank()))
        for b in range(batches):
            index = order[b * args.batch_size:(b + 1) * args.batch_size]
            if method == "dynamic":
                send, recv = next(schedule)
                optimizer.dst_weights = send
                optimizer.self_weight = 1.0 / (len(recv) + 1)
                optimizer.src_weights = {r: 1.0 / (len(recv) + 1) for r in recv}
            began = time.perf_counter()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(train_x[index]), train_y[index]).backward()
            time.sleep(args.device_ms / 1e3)
            if slow:
                stall((k - 1) * (time.perf_counter() - began), args.burn)
            optimizer.step()
            now = time.perf_counter() - start - paused
            if now >= next_sample:  # evaluation is not counted in the clock
                samples.append((now, accuracy(model, test_x, test_y)))
                next_sample = (int(now / args.sample_interval) + 1) * args.sample_interval
                paused = time.perf_counter() - start - now
            if method in ASYNCHRONOUS and os.path.exists(stop_path):
                stopped = True
                epochs_done = epoch + (b + 1) / batches
                break
        if stopped:
            break
        epochs_done = epoch + 1
    seconds = time.perf_counter() - start - paused
    if method in ASYNCHRONOUS and not stopped:
        open(stop_path, "w").close()  # the first rank done ends the run
    samples.append((seconds, accuracy(model, test_x, test_y)))
    bf.barrier()
    if hasattr(optimizer, "free"):
        optimizer.free()
    elif hasattr(optimizer, "unregister_window"):
        optimizer.unregister_window()
    # What a decentralized run ends with: one allreduce averages the ranks' models.
    averaged = make_model(args.hidden)
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    bf.allreduce_parameters(state)
    averaged.load_state_dict(state)
    return samples, seconds, epochs_done, accuracy(averaged, test_x, test_y)


def summarize(method, k, setting, samples, seconds, epochs, averaged, target):
    """samples: per rank, [(seconds, accuracy)]. The mean accuracy over ranks at time t
    takes each rank's last sample at or before t."""
    times = sorted({t for rank in samples for t, _ in rank})
    curve = []
    for t in times:
        curve.append((t, float(np.mean([[a for s, a in rank if s <= t][-1] for rank in samples]))))
    reached = next((t for t, a in curve if a >= target), None)
    run = max(seconds)
    return {
        "method": method, "k": k, "setting": setting,
        "seconds_per_epoch": run / float(np.mean(epochs)),
        "seconds_to_target": reached,
        "final_accuracy": curve[-1][1],
        "worst_rank_accuracy": min(rank[-1][1] for rank in samples),
        "averaged_model_accuracy": averaged,
        "run_seconds": run,
        "epochs_per_rank": [round(e, 2) for e in epochs],
        "curve": curve,
    }


def gather(samples, seconds, epochs, name):
    """Every rank's samples, run time and epochs, on every rank."""
    rows = torch.tensor([[bf.rank(), t, a] for t, a in samples], dtype=torch.float64)
    rows = bf.allgather(rows, name=f"{name}.samples").numpy()
    per_rank = [[(t, a) for r, t, a in rows if int(r) == rank] for rank in range(bf.size())]
    totals = bf.allgather(torch.tensor([[seconds, epochs]], dtype=torch.float64), name=f"{name}.totals").numpy()
    return per_rank, list(totals[:, 0]), list(totals[:, 1])


def write_table(results, args, out):
    fields = ["setting", "k", "method", "seconds_per_epoch", "seconds_to_target", "final_accuracy",
              "worst_rank_accuracy", "averaged_model_accuracy", "run_seconds"]
    with open(out + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(results)
    with open(out + ".json", "w") as f:
        json.dump({"ranks": bf.size(), "args": vars(args), "results": results}, f, indent=1)
    print(f"{bf.size()} ranks, {args.epochs} epochs, batch {args.batch_size} per rank, MLP 64-{args.hidden}-"
          f"{args.hidden}-10, device time {args.device_ms:g} ms per step, slow rank "
          f"{'burns CPU' if args.burn else 'sleeps'}, target {args.target}")
    print("| setting | k | method | s/epoch | s to target | vs allreduce | final acc (worst rank) | averaged model |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        base = next((b for b in results if b["method"] == "allreduce" and b["k"] == r["k"]
                     and b["setting"] == r["setting"]), None)
        reached = r["seconds_to_target"]
        speedup = "-"
        if base and base["seconds_to_target"] and reached:
            speedup = f"{base['seconds_to_target'] / reached:.2f}x"
        print(f"| {r['setting']} | {r['k']} | {r['method']} | {r['seconds_per_epoch']:.3f} | "
              f"{'never' if reached is None else f'{reached:.2f}'} | {speedup} | "
              f"{r['final_accuracy']:.4f} ({r['worst_rank_accuracy']:.4f}) | {r['averaged_model_accuracy']:.4f} |")


def plot(results, args, path):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot (the table is written)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["setting"], r["k"]) for r in results}, key=lambda p: (p[0] != "fixed", p[0], p[1]))
    columns = len({k for _, k in panels})
    rows = (len(panels) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 2.7 * rows), squeeze=False,
                                sharey=True)
    for axis, (setting, k) in zip(axes.flat, panels):
        for r in results:
            if (r["setting"], r["k"]) == (setting, k):
                t, a = zip(*r["curve"])
                axis.step(t, a, where="post", label=DESCRIPTIONS[r["method"]], linewidth=1.2)
        axis.axhline(args.target, color="grey", linewidth=0.6, linestyle=":")
        axis.set_title(f"{'last rank' if setting == 'fixed' else 'random rank'} {k}x slower", fontsize=9)
        axis.set_ylim(0.5, 1.0)
        axis.grid(alpha=0.3)
        axis.tick_params(labelsize=7)
    for axis in axes[-1]:
        axis.set_xlabel("wall-clock seconds", fontsize=8)
    for axis in axes[:, 0]:
        axis.set_ylabel("test accuracy", fontsize=8)
    for axis in list(axes.flat)[len(panels):]:
        axis.axis("off")
    axes[0, 0].legend(fontsize=6, loc="lower right")
    figure.suptitle(f"MLP on digits, {bf.size()} ranks, one rank k times slower", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=args.dpi)
    print(f"plot: {os.path.abspath(path)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--methods", default=DEFAULT_METHODS, help=f"any of {','.join(DESCRIPTIONS)}")
    parser.add_argument("--slowdowns", default="1,2,5,10", help="k: the slow rank takes k times as long")
    parser.add_argument("--settings", default="fixed,random", help="fixed (the last rank) and/or random per epoch")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=512, help="width of the two hidden layers")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--target", type=float, default=0.95, help="test accuracy for the time-to-target column")
    parser.add_argument("--sample-interval", type=float, default=0.1, help="seconds between accuracy samples")
    parser.add_argument("--device-ms", type=float, default=0.0,
                        help="simulated accelerator time per step on every rank (sleep), milliseconds")
    parser.add_argument("--burn", action="store_true", help="slow ranks spin the CPU instead of sleeping")
    parser.add_argument("--limit", type=int, default=0, help="use only this many samples (smoke tests)")
    parser.add_argument("--seed", type=int, default=0, help="of the random-rank setting")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--out", default="straggler", help="writes OUT.csv, OUT.json, OUT.png (rank 0)")
    parser.add_argument("--dpi", type=int, default=80)
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit 1 unless every run ends at least this accurate, averaged model too (smoke tests)")
    args = parser.parse_args()
    methods = args.methods.split(",")
    slowdowns = [int(k) for k in args.slowdowns.split(",")]
    settings = args.settings.split(",")
    unknown = [m for m in methods if m not in DESCRIPTIONS] + [s for s in settings if s not in ("fixed", "random")]
    if unknown or any(k < 1 for k in slowdowns):
        parser.error(f"unknown methods or settings {unknown} (or k < 1); methods: {list(DESCRIPTIONS)}")
    torch.set_num_threads(args.threads)

    bf.init()  # the exponential-2 graph
    directory = tempfile.mkdtemp(prefix="straggler.") if bf.rank() == 0 else ""
    encoded = torch.tensor(list(directory.encode().ljust(256, b"\0")), dtype=torch.uint8)
    directory = bytes(bf.broadcast(encoded, root_rank=0, name="stop.dir").tolist()).rstrip(b"\0").decode()
    data = load_data(bf.rank(), bf.size(), args.limit or None)
    runs = [(setting, k, method) for setting in settings for k in slowdowns for method in methods
            if not (setting == "random" and k == 1)]  # random at k = 1 is fixed at k = 1
    results = []
    for setting, k, method in runs:
        stop_path = os.path.join(directory, f"{method}.{setting}.{k}")
        samples, seconds, epochs, averaged = train(method, k, setting, data, args, stop_path)
        per_rank, all_seconds, all_epochs = gather(samples, seconds, epochs, f"{method}.{setting}.{k}")
        results.append(summarize(method, k, setting, per_rank, all_seconds, all_epochs, averaged, args.target))
        if bf.rank() == 0:  # progress: a run at k = 10 takes minutes
            r = results[-1]
            print(f"[{len(results)}/{len(runs)}] {setting} k={k} {method}: {r['seconds_per_epoch']:.3f} s/epoch, "
                  f"final accuracy {r['final_accuracy']:.4f}, averaged model {r['averaged_model_accuracy']:.4f}",
                  file=sys.stderr, flush=True)
    bf.barrier()
    if bf.rank() == 0:
        shutil.rmtree(directory, ignore_errors=True)
        write_table(results, args, args.out)
        plot(results, args, args.out + ".png")
    failed = [(r["method"], r["setting"], r["k"]) for r in results
              if min(r["final_accuracy"], r["averaged_model_accuracy"]) < args.min_accuracy]
    bf.shutdown()
    if failed:
        print(f"below --min-accuracy {args.min_accuracy}: {failed}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
