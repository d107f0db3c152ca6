#!/usr/bin/env python3
"""An alpha-beta cost model of one averaging step, per method, as Starling runs it.

    cost_model.py fit results/multihost_scaling.csv     calibrate, print every point's error
    cost_model.py predict results/multihost_scaling.csv [--mib 16] [--ranks 64,...,4096]
                                                        [--alpha-us 50]

Per method, what one rank does in a step (S bytes of model, n ranks, m machines of L):
  allreduce      ring reduce-scatter + allgather: 2(n-1) dependent messages of S/n
  mpi_allreduce  modelled as the same ring (Open MPI's large-message choice)
  exp2           ceil(log2 n) messages of S, all at once, sharing the rank's link
  one_peer       1 message of S
  hierarchical   local average (shared memory), then the machine's first rank sends
                 ceil(log2 m) messages of S over the link, then a local broadcast
  win_push       1 message of S and its acknowledgement (2 dependent latencies)
Time of a step = latency * dependent messages + link bytes / (eta * link rate)
               + gamma * bytes the rank's cores touch * ranks per core.
alpha (s), eta (link efficiency) and gamma (s per byte) are fitted once for all methods
and links (least squares on log time); the last term is the cores' share, which on the
measurement machine (ranks time-sharing 2 cores) is large, and in predictions (a core
per rank, one rank per host) counts once.
"""
import argparse
import csv
import math
import sys
from dataclasses import dataclass

METHODS = ["allreduce", "mpi_allreduce", "exp2", "one_peer", "hierarchical", "win_push"]


@dataclass
class Traffic:
    latencies: int      # dependent message latencies in a step
    link_bytes: float   # bytes leaving (and entering) one host's link in a step
    touched_bytes: float  # bytes a rank reads or writes to combine what it receives


def exp2_degree(n):
    """Out-neighbors of the exponential-2 graph: 2^k < n."""
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0


def traffic(method, n, size_bytes, per_host=1):
    """Messages and bytes of one step for one rank (hierarchical: for its machine)."""
    s = float(size_bytes)
    if n <= 1:
        return Traffic(0, 0.0, 0.0)
    if method in ("allreduce", "mpi_allreduce"):
        steps = 2 * (n - 1)
        return Traffic(steps, steps * s / n, 3 * s)  # reduce reads 2 and writes 1 per chunk
    if method == "exp2":
        k = exp2_degree(n)
        return Traffic(1, k * s, (k + 1) * s)
    if method == "one_peer":
        return Traffic(1, s, 2 * s)
    if method == "win_push":
        return Traffic(2, s, 2 * s)
    if method == "hierarchical":
        machines = n // per_host
        k = exp2_degree(machines)
        # Local average and broadcast over shared memory: touched, not on the link.
        return Traffic(3, k * s, (k + 3) * s)
    raise ValueError(f"unknown method {method!r}")


@dataclass
class Params:
    alpha: float  # seconds per dependent message
    eta: float    # fraction of the link rate a stream achieves
    gamma: float  # seconds per byte touched by one core


def step_time(params, method, n, size_bytes, link_bits, per_host=1, ranks_per_core=1.0):
    t = traffic(method, n, size_bytes, per_host)
    link = t.link_bytes * 8 / (params.eta * link_bits) if link_bits else 0.0
    return params.alpha * t.latencies + link + params.gamma * t.touched_bytes * ranks_per_core


def rate_bits(label):
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6)):
        if label.endswith(unit):
            return float(label[: -len(unit)]) * scale
    return 0.0  # unlimited: no link term


def load(path):
    """Rows of scaling_bench: (label, ranks, machines, mib, method, seconds)."""
    rows = []
    with open(path, newline="") as f:
        for label, ranks, machines, mib, method, ms, _cpu in csv.reader(f):
            rows.append((label, int(ranks), int(machines), float(mib), method, float(ms) / 1e3))
    return rows


def predict_row(params, row, cores):
    label, n, machines, mib, method, _ = row
    per_host = n // machines
    return step_time(params, method, n, mib * 2**20, rate_bits(label), per_host, max(1.0, n / cores))


def fit(rows, cores=2):
    """Least squares on log(time): one alpha, eta and gamma for every row."""
    import numpy as np
    from scipy.optimize import least_squares

    def residuals(x):
        p = Params(*np.exp(x))
        return [math.log(predict_row(p, r, cores) / r[5]) for r in rows]

    start = np.log([1e-3, 0.5, 1e-9])
    result = least_squares(residuals, start)
    return Params(*np.exp(result.x))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["fit", "predict"])
    parser.add_argument("csv")
    parser.add_argument("--cores", type=int, default=2, help="cores of the measurement machine")
    parser.add_argument("--mib", type=float, default=16)
    parser.add_argument("--ranks", default="64,256,1024,4096")
    parser.add_argument("--alpha-us", type=float,
                        help="predict with this latency per message instead of the fitted one")
    args = parser.parse_args()
    rows = load(args.csv)
    if not rows:
        sys.exit("no rows")
    p = fit(rows, args.cores)
    print(f"alpha {p.alpha * 1e3:.3f} ms per dependent message, link efficiency {p.eta:.2f}, "
          f"gamma {p.gamma * 1e9:.3f} ns per byte touched")
    if args.mode == "fit":
        errors = []
        print("| link | MiB | method | ranks | measured ms | model ms | error |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            model = predict_row(p, r, args.cores)
            err = (model - r[5]) / r[5]
            errors.append(abs(err))
            print(f"| {r[0]} | {r[3]:g} | {r[4]} | {r[1]} | {r[5] * 1e3:.1f} | {model * 1e3:.1f} | {err:+.0%} |")
        within = sum(e <= 0.25 for e in errors)
        print(f"median |error| {sorted(errors)[len(errors) // 2]:.0%}; within 25%: {within} of {len(errors)}")
        return
    ranks = [int(n) for n in args.ranks.split(",")]
    size = args.mib * 2**20
    if args.alpha_us is not None:
        p = Params(args.alpha_us * 1e-6, p.eta, p.gamma)
        print(f"predicting with alpha {args.alpha_us:g} us")
    for gbit in (1, 10, 100):
        print(f"\n{gbit} Gbit/s per host, {args.mib:g} MiB per rank, a core per rank (ms per step)\n")
        print("| method | " + " | ".join(f"{n} ranks" for n in ranks) + " |")
        print("|---" * (len(ranks) + 1) + "|")
        for method in ("allreduce", "exp2", "one_peer", "hierarchical"):
            per_host = 8 if method == "hierarchical" else 1
            cells = [f"{step_time(p, method, n, size, gbit * 1e9, per_host) * 1e3:.1f}" for n in ranks]
            name = "hierarchical (8 ranks/host)" if method == "hierarchical" else method
            print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
