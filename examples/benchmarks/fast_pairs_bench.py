"""Averaging around a slow link (issue 25, straggler-aware topology; a benchmark, not a
test): each rank holds a float64 vector and mixes it with one peer per step, along

  one_peer_exp2   GetDynamicOnePeerSendRecvRanks on the exponential-2 graph
                  (i -> i + 2^k, weights 1/2; doubly stochastic);
  round_robin     the fast-pair schedule with every link allowed (the same pairs);
  fast_pairs      the fast-pair schedule with the slow links left out.

Link times come from the probe (latency + bytes / throughput for this vector, gathered
so that every rank has the same matrix); the threshold is --factor times the median
link. Reports, per schedule, the time per step and the time until every rank is within
--target of the average (relative to where it started). Run by fast_pairs_bench.sh on
namespace hosts with one slow link; any launch works:

    starlingrun -np 4 python3 examples/benchmarks/fast_pairs_bench.py [--bytes 1048576]
"""

import argparse
import json
import time

import numpy as np

import starling
from starling import topology_util as tu


def link_seconds(ctx, nbytes):
    probe = ctx.probe_peers(repetitions=3, bulk_bytes=nbytes)
    row = [0.0 if r == ctx.rank else probe["latency_seconds"][r] + nbytes / probe["bytes_per_second"][r]
           for r in range(ctx.size)]
    return np.asarray(ctx.allgather(np.asarray([row], dtype=np.float64), name="links"))


def run(ctx, schedule, x0, mean, steps, target):
    x = x0.copy()
    start_error = np.linalg.norm(x0 - mean)
    elapsed, reached, per_step = 0.0, None, []
    for step in range(steps):
        send, recv = next(schedule)
        ctx.barrier()
        began = time.perf_counter()
        x = ctx.neighbor_allreduce(x, self_weight=0.5 if recv else 1.0, src_weights={r: 0.5 for r in recv},
                                   dst_weights=send)
        ctx.barrier()  # the step ends when every rank's exchange has
        per_step.append(time.perf_counter() - began)
        elapsed += per_step[-1]
        error = ctx.allreduce(np.asarray([np.linalg.norm(x - mean) / start_error]), op="max")[0]
        if reached is None and error <= target:
            reached = (step + 1, elapsed)
    return {"seconds_per_step": elapsed / steps, "median_step": float(np.median(per_step)),
            "steps_to_target": reached[0] if reached else None, "seconds_to_target": reached[1] if reached else None,
            "final_error": float(error)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=int, default=1 << 20, help="vector size in bytes (float64)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--factor", type=float, default=8.0, help="threshold = factor x the median link time")
    parser.add_argument("--target", type=float, default=1e-3, help="relative distance to the average")
    parser.add_argument("--json", help="rank 0 writes the results here")
    args = parser.parse_args()
    ctx = starling.Context()
    n, rank = ctx.size, ctx.rank
    links = link_seconds(ctx, args.bytes)
    off = links[~np.eye(n, dtype=bool)]
    threshold = args.factor * float(np.median(off))
    x0 = np.random.default_rng(rank).standard_normal(args.bytes // 8)
    mean = ctx.allreduce(x0, op="average")
    schedules = {
        "one_peer_exp2": lambda: tu.GetDynamicOnePeerSendRecvRanks(tu.ExponentialTwoGraph(n), rank),
        "round_robin": lambda: tu.GetFastPairSendRecvRanks(links, rank, 10 * float(links.max()) + 1.0),
        "fast_pairs": lambda: tu.GetFastPairSendRecvRanks(links, rank, threshold),
    }
    results = {"ranks": n, "bytes": args.bytes, "threshold_seconds": threshold,
               "link_ms": np.round(links * 1e3, 3).tolist()}
    for name, make in schedules.items():
        results[name] = run(ctx, make(), x0, mean, args.steps, args.target)
    if rank == 0:
        print(f"link times (ms, {args.bytes} B):\n{np.round(links * 1e3, 2)}\nthreshold {threshold * 1e3:.2f} ms")
        print(f"{'schedule':15} {'s/step':>9} {'median':>9} {'steps to':>9} {'s to':>9} {'final':>9}")
        for name in schedules:
            r = results[name]
            to = f"{r['seconds_to_target']:.3f}" if r["seconds_to_target"] is not None else "-"
            print(f"{name:15} {r['seconds_per_step']:9.4f} {r['median_step']:9.4f} "
                  f"{str(r['steps_to_target'] or '-'):>9} {to:>9} {r['final_error']:9.2e}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    ctx.close()


if __name__ == "__main__":
    main()
