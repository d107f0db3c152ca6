"""Decentralized training of a small MLP on scikit-learn's digits, three ways:

  allreduce  every step averages the gradients of all ranks (the classic baseline);
  static     each rank averages its parameters with its neighbors in the exponential-2
             graph while it computes (adapt-with-combine over neighbor_allreduce);
  dynamic    each rank averages with ONE peer per step, cycling through the graph
             (one message per step, whatever the number of ranks).

Each rank trains on its own shard of the data. After every epoch the program records,
per rank, the training loss and the consensus distance (how far the rank's parameters
are from the average of all ranks), advances a progress bar by one epoch (rank 0,
showing both), and finally plots
both per rank in a PNG and prints each mode's test accuracy.

    starlingrun -np 4 python3 examples/python/train_mlp.py [--epochs 30] [--plot train_mlp.png]
    mpirun -np 4 python3 examples/python/train_mlp.py

--hidden widens the hidden layer (a bigger model to communicate); --curve FILE appends,
per mode and epoch, the training time so far (slowest rank; evaluation excluded) and
the mean test accuracy of the ranks' models, as CSV (examples/benchmarks/
multihost_training.sh plots accuracy against wall-clock time from it).

It is a BlueFog program: `import starling.torch as bf` is the only Starling import.
"""

import argparse
import os
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

import starling.torch as bf


def load_data(rank, size, limit=None):
    """Standardized digits, 80/20 train/test split (the same on every rank); each rank
    trains on every size-th training sample."""
    X, y = load_digits(return_X_y=True)
    order = np.random.RandomState(0).permutation(len(X))
    X, y = X[order].astype(np.float32) / 16.0, y[order]
    if limit:
        X, y = X[:limit], y[:limit]
    split = int(0.8 * len(X))
    train_x, train_y = torch.from_numpy(X[:split]), torch.from_numpy(y[:split])
    test_x, test_y = torch.from_numpy(X[split:]), torch.from_numpy(y[split:])
    return train_x[rank::size], train_y[rank::size], test_x, test_y


def make_model(hidden=64):
    return torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def make_optimizer(mode, model, lr):
    base = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    if mode == "allreduce":
        return bf.DistributedGradientAllreduceOptimizer(base, model)
    return bf.DistributedAdaptWithCombineOptimizer(base, model, bf.CommunicationType.neighbor_allreduce)


def consensus_distance(model):
    """||this rank's parameters - the average over ranks||."""
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    return float((flat - bf.allreduce(flat, name="consensus")).norm())


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        result = float((model(x).argmax(dim=1) == y).float().mean())
    model.train()
    return result


def train(mode, data, epochs, batch_size, lr, progress, hidden=64):
    train_x, train_y, test_x, test_y = data
    torch.manual_seed(1234 + bf.rank())
    model = make_model(hidden)
    bf.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = make_optimizer(mode, model, lr)
    schedule = bf.GetDynamicOnePeerSendRecvRanks(bf.load_topology(), bf.rank())
    losses, distances, seconds, accuracies = [], [], [], []
    elapsed = 0.0  # training only: the per-epoch measurements below are not counted
    batches = max(1, len(train_x) // batch_size)
    bar = progress(total=epochs, desc=f"{mode:>9}", unit="epoch") if progress else None
    for epoch in range(epochs):
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(epoch * 7919 + bf.rank()))
        total = 0.0
        start = time.perf_counter()
        for b in range(batches):
            index = order[b * batch_size:(b + 1) * batch_size]
            if mode == "dynamic" and bf.size() > 1:
                send, recv = next(schedule)
                optimizer.dst_weights = send
                optimizer.self_weight = 1.0 / (len(recv) + 1)
                optimizer.src_weights = {r: 1.0 / (len(recv) + 1) for r in recv}
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(train_x[index]), train_y[index])
            loss.backward()
            optimizer.step()
            total += loss.item()  # not float(loss): PyTorch 2.9 warns for a tensor that requires grad
        elapsed += time.perf_counter() - start
        seconds.append(elapsed)
        accuracies.append(accuracy(model, test_x, test_y))
        losses.append(total / batches)
        distances.append(consensus_distance(model))
        if bar:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", consensus=f"{distances[-1]:.2e}", refresh=False)
            bar.update(1)
    if bar:
        bar.close()
    return losses, distances, seconds, accuracies


def plot(path, histories):
    """One column per mode: loss (top) and consensus distance (bottom), a line per rank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(histories)
    figure, axes = plt.subplots(2, len(modes), figsize=(4.5 * len(modes), 6.5), squeeze=False, sharex=True,
                                sharey="row")
    for column, mode in enumerate(modes):
        losses, distances = histories[mode]
        epochs = np.arange(1, losses.shape[1] + 1)
        for rank in range(losses.shape[0]):
            axes[0, column].plot(epochs, losses[rank], label=f"rank {rank}")
            axes[1, column].plot(epochs, distances[rank], label=f"rank {rank}")
        axes[0, column].set_title(mode)
        axes[0, column].set_ylabel("training loss")
        axes[1, column].set_ylabel("distance to the average model")
        axes[1, column].set_xlabel("epoch")
    axes[0, 0].legend(fontsize="small")
    figure.suptitle(f"MLP on digits, {losses.shape[0]} ranks")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description="Decentralized MLP training on digits (allreduce vs neighbors)")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--modes", default="allreduce,static,dynamic")
    parser.add_argument("--limit", type=int, default=0, help="use only this many samples (smoke tests)")
    parser.add_argument("--plot", default="train_mlp.png", help="where to write the PNG (rank 0)")
    parser.add_argument("--hidden", type=int, default=64, help="width of the hidden layer")
    parser.add_argument("--curve", help="append mode,ranks,epoch,seconds,accuracy rows here (rank 0)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()

    bf.init()  # the exponential-2 graph
    progress = None
    if bf.rank() == 0 and not args.no_progress:
        from tqdm import tqdm as progress
    data = load_data(bf.rank(), bf.size(), args.limit or None)
    histories, accuracies = {}, {}
    for mode in args.modes.split(","):
        losses, distances, seconds, accs = train(mode, data, args.epochs, args.batch_size, args.lr, progress,
                                                 args.hidden)
        # Every rank's curves, gathered for rank 0's plot and curve file.
        curves = bf.allgather(torch.tensor([losses + distances + seconds + accs], dtype=torch.float64),
                              name=f"curves.{mode}").numpy()
        e = args.epochs
        histories[mode] = (curves[:, :e], curves[:, e:2 * e])
        accuracies[mode] = curves[:, -1].mean()
        if bf.rank() == 0 and args.curve:
            with open(args.curve, "a") as f:
                for epoch in range(e):
                    f.write(f"{mode},{bf.size()},{epoch + 1},{curves[:, 2 * e + epoch].max():.4f},"
                            f"{curves[:, 3 * e + epoch].mean():.4f}\n")
    if bf.rank() == 0:
        for mode, acc in accuracies.items():
            losses, distances = histories[mode]
            print(f"{mode:>9}: test accuracy {acc:.4f} (mean over ranks), final loss {losses[:, -1].mean():.4f}, "
                  f"consensus distance {distances[:, -1].max():.2e}")
        plot(args.plot, histories)
        print(f"plot of loss and consensus distance per rank: {os.path.abspath(args.plot)}")
    bf.shutdown()


if __name__ == "__main__":
    main()
