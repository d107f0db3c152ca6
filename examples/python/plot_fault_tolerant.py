"""Plots fault_tolerant_training.py's results: training loss per rank and epoch, the
failure and the join marked, and the undisturbed run's mean loss for comparison.

    python3 examples/python/plot_fault_tolerant.py --run results/fault_tolerant \\
        --reference results/fault_tolerant_undisturbed --png results/fault_tolerant.png
"""
import argparse
import csv
import json
from collections import defaultdict


def read(prefix):
    with open(f"{prefix}.csv") as f:
        rows = list(csv.DictReader(f))
    with open(f"{prefix}.json") as f:
        return rows, json.load(f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", required=True, help="prefix of the disturbed run's CSV/JSON")
    parser.add_argument("--reference", help="prefix of the undisturbed run's CSV/JSON")
    parser.add_argument("--png", required=True)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, info = read(args.run)
    curves = defaultdict(list)  # by worker: the process, whatever its rank became
    for r in rows:
        curves[r["worker"]].append((int(r["epoch"]) + 1, float(r["loss"])))
    figure, axis = plt.subplots(figsize=(8, 4.8))
    for worker in sorted(curves, key=lambda w: (w.endswith("'"), int(w[1:].rstrip("'")))):
        points = sorted(curves[worker])
        style = dict(linewidth=2.2, color="black") if worker.endswith("'") else dict(linewidth=1.0)
        label = f"replacement of rank {worker[1:-1]}" if worker.endswith("'") else f"rank {worker[1:]}"
        axis.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)
    if args.reference:
        ref_rows, ref_info = read(args.reference)
        by_epoch = defaultdict(list)
        for r in ref_rows:
            by_epoch[int(r["epoch"]) + 1].append(float(r["loss"]))
        epochs = sorted(by_epoch)
        axis.plot(epochs, [sum(by_epoch[e]) / len(by_epoch[e]) for e in epochs], "k:", linewidth=1.5,
                  label=f"undisturbed run, mean (accuracy {100 * ref_info['final_mean_accuracy']:.1f}%)")
    kill, join = info["kill_epoch"] + 1, info["join_epoch"] + 1
    axis.axvline(kill - 0.5, color="red", linestyle="--")
    axis.axvline(join - 0.5, color="green", linestyle="--")
    top = axis.get_ylim()[1]
    axis.text(kill - 0.6, top * 0.92, f"rank {info['kill_rank']} SIGKILLed\ntraining on after "
              f"{info['kill_to_training_continues_s']:.2f} s", color="red", fontsize=8, va="top", ha="right")
    axis.text(join - 0.4, top * 0.92, f"a replacement joins\n(grow {info['grow_s']:.1f} s)", color="green",
              fontsize=8, va="top")
    axis.set_xlabel("epoch")
    axis.set_ylabel("training loss (per rank)")
    axis.set_yscale("log")
    axis.set_title(f"MLP on digits, {info['ranks_at_end']} ranks, starlingrun --fault-tolerant "
                   f"(final accuracy {100 * info['final_mean_accuracy']:.1f}%)", fontsize=10)
    axis.legend(fontsize=7, ncol=3, loc="lower left")
    figure.tight_layout()
    figure.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
