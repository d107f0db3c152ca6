"""A cost model of Starling's averaging methods on many machines.

It predicts the time of one averaging step (one call per training step, S bytes per
rank) for the message pattern Starling actually uses for each method, on H hosts of
r ranks each (ranks numbered host by host, as mpirun places them):

  allreduce      Starling's ring: 2 (n - 1) rounds, each rank sends S / n to its right
                 neighbour; the reduce-scatter half also reduces what arrives.
  mpi_allreduce  the same ring (Open MPI's choice for these sizes; see docs/performance.md for
                 how well that fits).
  neighbor_exp2  one round: each rank sends S to each of its ceil(log2 n) out-neighbours
                 (i + 2^k), then combines what it received.
  one_peer_exp2  one round per step, to i + 2^(t mod log2 n): averaged over the
                 schedule's period.
  hierarchical   ring allreduce inside each host, the host leaders exchange with their
                 machine neighbours (exp2 over hosts), a chain broadcast inside each host.
  hierarchical_one_peer  the same with the dynamic one-peer schedule over hosts.
  window_push    one put per step to the one-peer exp2 peer, plus the target's
                 acknowledgement (one more link latency), plus the update's combine.

A round costs: the link latency if any message leaves a host, plus the longer of
(a) the busiest host link (bytes out or in over the link rate, times 1 / eta for the
rate the link really delivers) and (b) the CPU: per-message overheads, same-host copies
and reductions; where all ranks share a few cores (the namespace hosts of the
benchmark all run on one machine) the CPU work of every rank, plus the kernel's TCP
copies, is divided among those cores. Communication and computation overlap (the ring
reduces one chunk while the next arrives); rounds do not.

    python3 cost_model.py predict [--ranks-per-host 8] [--mib 100] [--params params.json]
    python3 cost_model.py calibrate scaling.csv [--cores 2] [--out params.json]

scaling.csv is what examples/benchmarks/multihost_bench.sh writes (scaling_bench's rows:
label, ranks, machines, MiB, method, ms per step, cpu share), where the label is the
link rate given to tc ("1gbit", "10gbit"; "none" for unlimited links). The namespace
hosts add no latency (netem is absent), so the link latency there is 0 and alpha
holds all per-message time.
"""

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import asdict, dataclass

METHODS = ["allreduce", "mpi_allreduce", "neighbor_exp2", "one_peer_exp2", "hierarchical", "hierarchical_one_peer",
           "window_push"]


@dataclass(frozen=True)
class Platform:
    link_bytes_per_s: float         # per host and direction
    latency_s: float                # one-way link latency
    alpha_s: float = 20e-6          # CPU time to send or receive one message between hosts
    alpha_local_s: float = 2e-6     # the same for a same-host message
    local_bytes_per_s: float = 5e9  # same-host copy rate per rank
    combine_bytes_per_s: float = 4e9  # reduction: bytes read per second per rank
    eta: float = 0.9                # fraction of the link rate that TCP delivers
    tcp_s_per_byte: float = 0.0     # kernel CPU time per byte sent between hosts (shared cores only)
    shared_cores: int = 0           # cores shared by all ranks (0: every rank has its own)


@dataclass
class Cost:
    """Seconds of one step, split by what bounded each round."""

    latency: float = 0.0
    link: float = 0.0
    cpu: float = 0.0

    @property
    def total(self):
        return self.latency + self.link + self.cpu

    def add(self, other, times=1.0):
        self.latency += other.latency * times
        self.link += other.link * times
        self.cpu += other.cpu * times

    def limit(self):
        parts = {"latency": self.latency, "link bandwidth": self.link, "CPU": self.cpu}
        return max(parts, key=parts.get)


def _round(platform, n, r, sends, compute_bytes=0.0, senders=None, extra_latency=0, copies=1):
    """Cost of one round in which every rank i in `senders` (default: all) sends
    sends(i) = [(destination, bytes), ...] and then reduces compute_bytes. `copies`
    identical rounds run at once elsewhere (other hosts' local rings): they matter only
    where all ranks share the same cores."""
    senders = range(n) if senders is None else senders
    host = lambda rank: rank // r
    egress = [0.0] * ((n + r - 1) // r)
    ingress = [0.0] * len(egress)
    per_rank_cpu = 0.0
    inter_total = 0.0
    crosses = False
    for i in senders:
        cpu = compute_bytes / platform.combine_bytes_per_s
        for dst, size in sends(i):
            if host(dst) != host(i):
                crosses = True
                egress[host(i)] += size
                ingress[host(dst)] += size
                inter_total += size
                cpu += platform.alpha_s
            else:
                cpu += platform.alpha_local_s + size / platform.local_bytes_per_s
        per_rank_cpu = max(per_rank_cpu, cpu)
    cost = Cost()
    link = max(max(egress), max(ingress)) / (platform.link_bytes_per_s * platform.eta)
    cpu = per_rank_cpu
    if platform.shared_cores:
        busy = len(senders) * copies
        cpu = max(cpu, (busy * per_rank_cpu + platform.tcp_s_per_byte * inter_total * copies) / platform.shared_cores)
    cost.latency = platform.latency_s * (1 + extra_latency) if crosses else 0.0
    if link >= cpu:
        cost.link = link
    else:
        cost.cpu = cpu
    return cost


def _exp2_offsets(n):
    offsets, d = [], 1
    while d < n:
        offsets.append(d)
        d *= 2
    return offsets


def _ring_allreduce(platform, n, r, size, copies=1):
    cost = Cost()
    if n == 1:
        return cost
    block = size / n
    right = lambda i: [((i + 1) % n, block)]
    cost.add(_round(platform, n, r, right, compute_bytes=2 * block, copies=copies), n - 1)  # reduce-scatter
    cost.add(_round(platform, n, r, right, copies=copies), n - 1)                           # allgather
    return cost


def _neighbor(platform, n, r, size, offsets, extra_latency=0):
    sends = lambda i: [((i + d) % n, size) for d in offsets]
    return _round(platform, n, r, sends, compute_bytes=(len(offsets) + 1) * size, extra_latency=extra_latency)


def _one_peer(platform, n, r, size, extra_latency=0):
    offsets = _exp2_offsets(n)
    cost = Cost()
    for d in offsets or [0]:
        cost.add(_neighbor(platform, n, r, size, [d] if d else [], extra_latency), 1.0 / max(1, len(offsets)))
    return cost


def _hierarchical(platform, n, r, size, one_peer):
    hosts = n // r
    cost = Cost()
    # Sum inside each host: every host runs the same ring at once.
    cost.add(_ring_allreduce(platform, r, r, size, copies=hosts))
    leaders = [h * r for h in range(hosts)]
    offsets = _exp2_offsets(hosts)
    schedule = ([[d] for d in offsets] if one_peer else [offsets]) or [[]]
    for step in schedule:
        sends = lambda i, step=step: [(((i // r + d) % hosts) * r, size) for d in step]
        cost.add(_round(platform, n, r, sends, compute_bytes=(len(step) + 1) * size, senders=leaders),
                 1.0 / len(schedule))
    # Chain broadcast inside each host: each rank copies the tensor once, as it streams.
    chain = size / platform.local_bytes_per_s + (r - 1) * platform.alpha_local_s
    if platform.shared_cores:
        chain = max(chain, n * size / platform.local_bytes_per_s / platform.shared_cores)
    cost.add(Cost(cpu=chain))
    return cost


def predict(method, platform, n, r, size):
    """Cost of one step of `method` with n ranks, r per host, `size` bytes per rank."""
    if n % r:
        raise ValueError(f"{n} ranks do not fill hosts of {r}")
    if method in ("allreduce", "mpi_allreduce"):
        return _ring_allreduce(platform, n, r, size)
    if method == "neighbor_exp2":
        return _neighbor(platform, n, r, size, _exp2_offsets(n))
    if method == "one_peer_exp2":
        return _one_peer(platform, n, r, size)
    if method in ("hierarchical", "hierarchical_one_peer"):
        if r == 1:
            raise ValueError("hierarchical methods need several ranks per host")
        return _hierarchical(platform, n, r, size, one_peer=method == "hierarchical_one_peer")
    if method == "window_push":
        return _one_peer(platform, n, r, size, extra_latency=1)
    raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")


# --- calibration ---------------------------------------------------------------------

FITTED = ["alpha_s", "alpha_local_s", "local_bytes_per_s", "combine_bytes_per_s", "eta", "tcp_s_per_byte"]
BOUNDS = {"alpha_s": (1e-7, 1e-2), "alpha_local_s": (1e-8, 1e-3), "local_bytes_per_s": (1e8, 1e11),
          "combine_bytes_per_s": (1e8, 1e11), "eta": (0.3, 1.0), "tcp_s_per_byte": (1e-12, 1e-8)}


# scaling_bench's method names -> the model's.
BENCH_METHODS = {"allreduce": "allreduce", "mpi_allreduce": "mpi_allreduce", "exp2": "neighbor_exp2",
                 "one_peer": "one_peer_exp2", "hierarchical": "hierarchical", "win_push": "window_push"}
UNLIMITED_GBIT = 1e6  # "none": links far faster than anything else here


def link_gbit(label):
    """tc's rate syntax ("1gbit", "500mbit") in Gbit/s; "none" is unlimited."""
    if label == "none":
        return UNLIMITED_GBIT
    for unit, scale in (("gbit", 1.0), ("mbit", 1e-3), ("kbit", 1e-6)):
        if label.endswith(unit):
            return float(label[:-len(unit)]) * scale
    raise ValueError(f"link rate {label!r}: expected tc's syntax (1gbit, 500mbit) or none")


def read_measurements(path, cores):
    """scaling_bench's CSV rows (the last row for a point wins, as in plot_scaling.py)."""
    points = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) != 7:
                continue
            label, ranks, machines, mib, method, ms, _cpu = row
            if method not in BENCH_METHODS:
                raise ValueError(f"{path}: unknown method {method!r}")
            points[(label, int(ranks), int(machines), float(mib), method)] = {
                "method": BENCH_METHODS[method], "ranks": int(ranks), "ranks_per_host": int(ranks) // int(machines),
                "bytes": float(mib) * 2**20, "link_gbit": link_gbit(label), "latency_us": 0.0,
                "seconds": float(ms) * 1e-3, "cores": cores}
    if not points:
        raise ValueError(f"{path}: no scaling_bench rows (label,ranks,machines,mib,method,ms,cpu)")
    return list(points.values())


def platform_for(row, params):
    return Platform(link_bytes_per_s=row["link_gbit"] * 1e9 / 8, latency_s=row["latency_us"] * 1e-6,
                    shared_cores=row["cores"], **params)


def relative_errors(rows, params):
    return [predict(row["method"], platform_for(row, params), row["ranks"], row["ranks_per_host"],
                    row["bytes"]).total / row["seconds"] - 1.0 for row in rows]


def calibrate(rows, start=None):
    """Fits the platform's CPU and efficiency parameters (the link rate and latency are
    what the benchmark configured) to minimize the squared log error."""
    from scipy.optimize import least_squares  # only calibration needs SciPy

    base = asdict(Platform(link_bytes_per_s=1.0, latency_s=0.0))
    start = dict(start or {name: base[name] for name in FITTED})
    low = [math.log(BOUNDS[name][0]) for name in FITTED]
    high = [math.log(BOUNDS[name][1]) for name in FITTED]
    x0 = [min(max(math.log(max(start[name], BOUNDS[name][0])), lo + 1e-9), hi - 1e-9)
          for name, lo, hi in zip(FITTED, low, high)]

    def residuals(x):
        params = {name: math.exp(v) for name, v in zip(FITTED, x)}
        return [math.log1p(e) for e in relative_errors(rows, params)]

    fit = least_squares(residuals, x0, bounds=(low, high))
    return {name: math.exp(v) for name, v in zip(FITTED, fit.x)}


# --- command line --------------------------------------------------------------------

def human_seconds(s):
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="time per step at 64-4096 ranks for 1, 10, 100 Gbit/s links")
    p.add_argument("--params", help="parameters from `calibrate` (JSON)")
    p.add_argument("--ranks-per-host", type=int, default=8)
    p.add_argument("--mib", type=float, default=100.0, help="tensor size per rank in MiB")
    p.add_argument("--latency-us", type=float, default=10.0)
    p.add_argument("--alpha-us", type=float, help="per-message CPU time (overrides --params)")
    p.add_argument("--eta", type=float, help="fraction of the link rate delivered (overrides --params)")
    c = sub.add_parser("calibrate", help="fit the model to measured.csv and print the error at every point")
    c.add_argument("csv")
    c.add_argument("--cores", type=int, default=os.cpu_count(),
                   help="cores the benchmark's ranks shared (default: this machine's)")
    c.add_argument("--methods", default=",".join(m for m in METHODS if m != "mpi_allreduce"),
                   help="methods to fit and validate (default: all but mpi_allreduce, whose algorithm "
                        "Open MPI picks by rules of its own)")
    c.add_argument("--unlimited", action="store_true",
                   help="also fit the rows with unlimited links (the shared cores' floor)")
    c.add_argument("--out", help="write the fitted parameters here (JSON)")
    args = parser.parse_args(argv)

    if args.command == "calibrate":
        wanted = set(args.methods.split(","))
        rows = [row for row in read_measurements(args.csv, args.cores) if row["method"] in wanted
                and (args.unlimited or row["link_gbit"] < UNLIMITED_GBIT)]
        if not rows:
            raise SystemExit("cost_model: no rows left to fit (see --methods, --unlimited)")
        params = calibrate(rows)
        errors = relative_errors(rows, params)
        print("fitted: " + ", ".join(f"{k}={v:.3g}" for k, v in params.items()))
        print(f"{'method':<15}{'ranks':>6}{'r/host':>7}{'MiB':>6}{'link':>8}{'measured':>12}{'model':>12}{'error':>8}")
        for row, e in zip(rows, errors):
            link = "none" if row["link_gbit"] >= UNLIMITED_GBIT else f"{row['link_gbit']:g}G"
            print(f"{row['method']:<15}{row['ranks']:>6}{row['ranks_per_host']:>7}{row['bytes'] / 2**20:>6.0f}"
                  f"{link:>8}{human_seconds(row['seconds']):>12}"
                  f"{human_seconds(row['seconds'] * (1 + e)):>12}{e * 100:>7.0f}%")
        worst = max(abs(e) for e in errors)
        print(f"largest error {worst * 100:.0f}% over {len(rows)} points (target 25%)")
        if args.out:
            with open(args.out, "w") as f:
                json.dump(params, f, indent=1)
        return 0

    params = {}
    if args.params:
        with open(args.params) as f:
            # The kernel's TCP cost matters only where all ranks share a few cores.
            params = {k: v for k, v in json.load(f).items() if k != "tcp_s_per_byte"}
    if args.alpha_us is not None:
        params["alpha_s"] = args.alpha_us * 1e-6
    if args.eta is not None:
        params["eta"] = args.eta
    size = args.mib * 2**20
    r = args.ranks_per_host
    methods = [m for m in METHODS if m != "mpi_allreduce" and not (m.startswith("hierarchical") and r == 1)]
    print(f"time per step, {args.mib:g} MiB per rank, {r} ranks per host, {args.latency_us:g} us link latency"
          + (f", {', '.join(f'{k}={v:.3g}' for k, v in params.items())}" if params else ""))
    for gbit in (1, 10, 100):
        platform = Platform(link_bytes_per_s=gbit * 1e9 / 8, latency_s=args.latency_us * 1e-6, **params)
        print(f"\n{gbit} Gbit/s per host\n")
        print("| ranks | " + " | ".join(methods) + " |")
        print("|---" * (len(methods) + 1) + "|")
        for n in (64, 256, 1024, 4096):
            cells = []
            for m in methods:
                cost = predict(m, platform, n, r, size)
                cells.append(f"{human_seconds(cost.total)} ({cost.limit()})")
            print(f"| {n} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
