#!/usr/bin/env python3
"""Table and plot of scaling_bench's CSV (written by multihost_bench.sh).

    plot_scaling.py scaling.csv [--table scaling.md] [--plot scaling.png]

One table and one panel per (link rate, model size): time per step (ms) against the
number of ranks, one line per method. A later row for the same point replaces an
earlier one. Table cells are "ms per step (cpu share)".
"""
import argparse
import csv
import sys

METHODS = [
    ("allreduce", "allreduce (Starling)"),
    ("mpi_allreduce", "MPI_Allreduce"),
    ("exp2", "neighbor_allreduce, exp2"),
    ("one_peer", "neighbor_allreduce, one-peer exp2"),
    ("hierarchical", "hierarchical (2 ranks/host)"),
    ("win_push", "window push, one peer"),
]


def rate_order(label):
    """1gbit < 10gbit < none (unlimited); anything else after, by name."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if label.endswith(unit) and label[: -len(unit)].isdigit():
            return (0, int(label[: -len(unit)]) * scale, label)
    return (1, 0, label)


def load(path):
    points = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) != 7:
                continue
            label, ranks, _machines, mib, method, ms, cpu = row
            points[(label, float(mib), method, int(ranks))] = (float(ms), float(cpu))
    return points


def table(points):
    lines = []
    for label, mib in sorted({(k[0], k[1]) for k in points}, key=lambda x: (rate_order(x[0]), x[1])):
        ranks = sorted({k[3] for k in points if k[:2] == (label, mib)})
        link = "Unlimited links (the cores' floor)" if label == "none" else f"{label} links"
        lines.append(f"**{link}, {mib:g} MiB per rank** (ms per step; cpu share in brackets)")
        lines.append("")
        last_n = max(ranks)
        ratio_head = [f"{last_n} / 2 ranks"] if 2 in ranks and last_n > 2 else []
        head = ["method"] + [f"{n} ranks" for n in ranks] + ratio_head
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|---" * len(head) + "|")
        for method, name in METHODS:
            cells = []
            for n in ranks:
                p = points.get((label, mib, method, n))
                cells.append(f"{p[0]:.1f} ({p[1]:.2f})" if p else "-")
            if not any(c != "-" for c in cells):
                continue
            if ratio_head:
                # Against the smallest run of this method (hierarchical starts at 4).
                first = next((points[(label, mib, method, n)] for n in ranks
                              if (label, mib, method, n) in points), None)
                last = points.get((label, mib, method, last_n))
                cells.append(f"{last[0] / first[0]:.2f}" if first and last else "-")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(points, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # One row per model size, one column per link rate.
    labels = sorted({k[0] for k in points}, key=rate_order)
    sizes = sorted({k[1] for k in points})
    fig, axes = plt.subplots(len(sizes), len(labels), figsize=(5 * len(labels), 4 * len(sizes)), squeeze=False)
    for (row, mib), (col, label) in ((r, c) for r in enumerate(sizes) for c in enumerate(labels)):
        ax = axes[row][col]
        for method, name in METHODS:
            xs = sorted(k[3] for k in points if k[:3] == (label, mib, method))
            if xs:
                ax.plot(xs, [points[(label, mib, method, n)][0] for n in xs], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks([2, 4, 8, 16])
        ax.set_xticklabels(["2", "4", "8", "16"])
        ax.set_xlabel("ranks (one per host; hierarchical: two)")
        ax.set_ylabel("time per step (ms)")
        link = "unlimited links" if label == "none" else f"{label} per host link"
        ax.set_title(f"{link}, {mib:g} MiB per rank")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--table")
    parser.add_argument("--plot")
    args = parser.parse_args()
    points = load(args.csv)
    if not points:
        sys.exit(f"plot_scaling.py: no rows in {args.csv}")
    text = table(points)
    print(text)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n")
    if args.plot:
        plot(points, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
