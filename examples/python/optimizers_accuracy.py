"""Accuracy against bytes on the wire, per optimizer: the MLP of train_mlp.py on
scikit-learn's digits, each rank training on its own shard, once per method, from the
same initial weights. After every epoch it records the test accuracy (mean over
ranks) and the bytes this rank sent (the core's bytes_sent counter, which counts
every message's payload: collectives, neighbor operations, window data); at the end
it prints a table and plots accuracy against bytes sent per rank, one line per method.

    starlingrun -np 4 python3 examples/python/optimizers_accuracy.py [--epochs 30] \\
        [--methods allreduce,dsgd,sma,adpsgd,gt,ed] [--plot build/optimizers_accuracy.png]

The decentralized methods run on a ring (each rank has two neighbors): exact diffusion
needs a symmetric mixing matrix, and one graph for all keeps the bytes comparable.
A method is one entry of METHODS: a function (model, lr) -> optimizer, plus its
learning rate; compressed methods join the table the same way.
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

import starling.torch as bf
from starling import compression
from starling.torch import _state

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import accuracy, load_data, make_model  # noqa: E402


def sgd(model, lr, momentum=0.9):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)


# name -> (description, factory(model, lr) -> optimizer, learning rate). Every method
# wraps the same SGD with momentum 0.9 (for gradient tracking and exact diffusion,
# momentum is a heuristic: their exactness results are for plain SGD; measured, it
# trains better here than plain SGD at lr 0.1-0.6).
METHODS = {
    "allreduce": ("gradient allreduce (baseline)",
                  lambda m, lr: bf.DistributedGradientAllreduceOptimizer(sgd(m, lr), m), 0.05),
    "dsgd": ("neighbor averaging (adapt-with-combine)",
             lambda m, lr: bf.DistributedAdaptWithCombineOptimizer(sgd(m, lr), m), 0.05),
    "sma": ("synchronous model averaging, alpha 0.1",
            lambda m, lr: bf.DistributedSynchronousModelAveragingOptimizer(sgd(m, lr), m, alpha=0.1), 0.05),
    "adpsgd": ("AD-PSGD pair averaging over windows",
               lambda m, lr: bf.DistributedPairAveragingOptimizer(sgd(m, lr), m, window_prefix="accuracy"), 0.05),
    "gt": ("gradient tracking",
           lambda m, lr: bf.DistributedGradientTrackingOptimizer(sgd(m, lr), m), 0.05),
    "ed": ("exact diffusion",
           lambda m, lr: bf.DistributedExactDiffusionOptimizer(sgd(m, lr), m), 0.05),
    # Compressed (docs/concepts/compression.md): gradient allreduce of compressed
    # gradients with error feedback, and CHOCO-SGD (compressed gossip, step size gamma).
    "topk_ef": ("gradient allreduce, top-k 1% + error feedback",
                lambda m, lr: bf.DistributedCompressedGradientAllreduceOptimizer(
                    sgd(m, lr), m, compression=compression.TopK(0.01, error_feedback=True)), 0.05),
    "randomk_ef": ("gradient allreduce, random-k 1% + error feedback",
                   lambda m, lr: bf.DistributedCompressedGradientAllreduceOptimizer(
                       sgd(m, lr), m, compression=compression.RandomK(0.01, error_feedback=True, seed=7)), 0.005),
    "randomk10_ef": ("gradient allreduce, random-k 10% + error feedback",
                     lambda m, lr: bf.DistributedCompressedGradientAllreduceOptimizer(
                         sgd(m, lr), m, compression=compression.RandomK(0.1, error_feedback=True, seed=7)), 0.01),
    "sign_ef": ("gradient allreduce, sign + error feedback",
                lambda m, lr: bf.DistributedCompressedGradientAllreduceOptimizer(
                    sgd(m, lr), m, compression=compression.Sign(error_feedback=True)), 0.05),
    "fp16": ("gradient allreduce, float16",
             lambda m, lr: bf.DistributedCompressedGradientAllreduceOptimizer(
                 sgd(m, lr), m, compression=compression.FP16()), 0.05),
    "choco_topk": ("CHOCO-SGD, top-k 1%, gamma 0.1",
                   lambda m, lr: bf.DistributedChocoSGDOptimizer(
                       sgd(m, lr), m, compression=compression.TopK(0.01, gamma=0.1)), 0.05),
    "choco_topk5": ("CHOCO-SGD, top-k 5%, gamma 0.3",
                    lambda m, lr: bf.DistributedChocoSGDOptimizer(
                        sgd(m, lr), m, compression=compression.TopK(0.05, gamma=0.3)), 0.05),
}


def bytes_sent():
    """This rank's bytes_sent counter (the context's stats; local)."""
    return _state.require_context().stats()["bytes_sent"]


def mean_over_ranks(value, name):
    return bf.allreduce(torch.tensor([float(value)], dtype=torch.float64), average=True, name=name).item()


def train(method, data, epochs, batch_size):
    train_x, train_y, test_x, test_y = data
    _, factory, lr = METHODS[method]
    bf.compression_reset()  # compressed methods keep state per parameter name: start afresh
    torch.manual_seed(1234)
    model = make_model()
    bf.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = factory(model, lr)
    batches = max(1, len(train_x) // batch_size)
    sent, curve = 0, []
    started = time.perf_counter()
    for epoch in range(epochs):
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(epoch * 7919 + bf.rank()))
        bf.barrier()  # AD-PSGD's gets are served by their targets: count an epoch's bytes once all finished it
        before = bytes_sent()
        for b in range(batches):
            index = order[b * batch_size:(b + 1) * batch_size]
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(train_x[index]), train_y[index]).backward()
            optimizer.step()
        bf.barrier()
        sent += bytes_sent() - before
        curve.append((mean_over_ranks(sent, f"acc.{method}.bytes.{epoch}"),
                      mean_over_ranks(accuracy(model, test_x, test_y), f"acc.{method}.acc.{epoch}")))
    seconds = time.perf_counter() - started
    if hasattr(optimizer, "free"):
        optimizer.free()  # AD-PSGD's windows
    every = bf.allgather(torch.tensor([[accuracy(model, test_x, test_y)]]), name=f"acc.{method}.all")
    return curve, seconds, float(every.min())


def plot(path, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 4.8))
    for method, (curve, _, _) in results.items():
        sent = np.array([c[0] for c in curve]) / 2 ** 20
        acc = np.array([c[1] for c in curve])
        axis.plot(sent, acc, marker=".", label=f"{method}: {METHODS[method][0]}")
    axis.set_xscale("log")
    axis.set_xlabel("MiB sent per rank (cumulative, log scale)")
    axis.set_ylabel("test accuracy (mean over ranks)")
    axis.set_ylim(0.5, 1.0)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize="small", loc="lower right")
    axis.set_title(f"MLP on digits, {bf.size()} ranks, one point per epoch")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description="Test accuracy against bytes sent, per decentralized optimizer")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--limit", type=int, default=0, help="use only this many samples (smoke tests)")
    parser.add_argument("--plot", default="optimizers_accuracy.png", help="where to write the PNG (rank 0)")
    parser.add_argument("--target", type=float, default=0.95,
                        help="the table says how many bytes each method sent to first reach this accuracy")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit 1 unless every method reaches this final accuracy (smoke tests)")
    args = parser.parse_args()
    methods = args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; known: {list(METHODS)}")

    bf.init(lambda size: bf.RingGraph(size))
    data = load_data(bf.rank(), bf.size(), args.limit or None)
    results = {m: train(m, data, args.epochs, args.batch_size) for m in methods}
    if bf.rank() == 0:
        baseline = results.get("allreduce")
        print(f"{bf.size()} ranks, {args.epochs} epochs, batch {args.batch_size} per rank, ring topology")
        print(f"| method | lr | test accuracy, mean (worst rank) | MiB sent per rank | vs allreduce "
              f"| MiB to reach {args.target} | seconds |")
        print("|---|---|---|---|---|---|---|")
        for method, (curve, seconds, worst) in results.items():
            sent, acc = curve[-1]
            ratio = f"{sent / baseline[0][-1][0]:.2f}x" if baseline and baseline[0][-1][0] else "-"
            reached = next((f"{b / 2 ** 20:.2f}" for b, a in curve if a >= args.target), "never")
            print(f"| {method}: {METHODS[method][0]} | {METHODS[method][2]} | {acc:.4f} ({worst:.4f}) "
                  f"| {sent / 2 ** 20:.2f} | {ratio} | {reached} | {seconds:.1f} |")
        plot(args.plot, results)
        print(f"plot of accuracy against bytes sent: {os.path.abspath(args.plot)}")
    failed = [m for m, (curve, _, _) in results.items() if curve[-1][1] < args.min_accuracy]
    bf.shutdown()
    if failed:
        print(f"below --min-accuracy {args.min_accuracy}: {failed}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
