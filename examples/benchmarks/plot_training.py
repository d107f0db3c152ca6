#!/usr/bin/env python3
"""Test accuracy against wall-clock training time, from train_mlp.py --curve rows.

    plot_training.py training.csv --plot training.png [--title TEXT]

One line per (mode, ranks); prints, per line, the time to reach 90% and 95% accuracy.
"""
import argparse
import csv
from collections import defaultdict

NAMES = {"allreduce": "gradient allreduce", "dynamic": "decentralized, one peer", "static": "decentralized, exp2"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--plot", required=True)
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    curves = defaultdict(dict)  # (mode, ranks) -> epoch -> (seconds, accuracy); later rows win
    with open(args.csv, newline="") as f:
        for mode, ranks, epoch, seconds, acc in csv.reader(f):
            curves[(mode, int(ranks))][int(epoch)] = (float(seconds), float(acc))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (mode, ranks), points in sorted(curves.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        xs = [points[e][0] for e in sorted(points)]
        ys = [points[e][1] for e in sorted(points)]
        style = "-" if mode == "allreduce" else "--"
        ax.plot(xs, ys, style, marker=".", label=f"{NAMES.get(mode, mode)}, {ranks} ranks")
        reach = []
        for goal in (0.90, 0.95):
            t = next((x for x, y in zip(xs, ys) if y >= goal), None)
            reach.append(f"{goal:.0%} at {t:.1f} s" if t is not None else f"{goal:.0%} not reached")
        print(f"{NAMES.get(mode, mode)}, {ranks} ranks: final {ys[-1]:.3f} after {xs[-1]:.1f} s; " + ", ".join(reach))
    ax.set_xlabel("training wall-clock time (s, slowest rank)")
    ax.set_ylabel("test accuracy (mean over ranks)")
    ax.set_ylim(0.5, 1.0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(args.title)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=80)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
