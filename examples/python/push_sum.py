"""Asynchronous push-sum average consensus over one-sided windows (BlueFog API).

Each rank holds a vector x and a weight p = 1 (the window's associated p). In every
iteration it pushes a share of (x, p) into its out-neighbors' window buffers
(win_accumulate), keeps one share, and folds in whatever has arrived
(win_update_then_collect). Nobody waits for anybody inside the loop, and ranks run at
different speeds on purpose; since no mass is ever lost, x / p converges to the exact
average of the starting vectors on every rank, even on a directed graph whose mixing
matrix is not doubly stochastic.

    starlingrun -np 4 python3 examples/python/push_sum.py [--iterations 200] [--length 64]
"""

import argparse
import random
import time

import torch

import starling.torch as bf


def main():
    parser = argparse.ArgumentParser(description="asynchronous push-sum over windows")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--tolerance", type=float, default=1e-6)
    args = parser.parse_args()

    bf.init(lambda size: bf.ExponentialTwoGraph(size))  # directed: i -> i + 2^k
    rank, size = bf.rank(), bf.size()
    x = torch.rand(args.length, dtype=torch.float64, generator=torch.Generator().manual_seed(99 + rank)) * 10
    average = bf.allreduce(x, name="true average")

    bf.turn_on_win_ops_with_associated_p()
    bf.win_create(x, "x", zero_init=True)
    out = bf.out_neighbor_ranks()
    share = 1.0 / (len(out) + 1)
    jitter = random.Random(rank)
    for _ in range(args.iterations):
        # Push shares to the out-neighbors; afterwards x and p are multiplied by `share`.
        bf.win_accumulate(x, "x", self_weight=share, dst_weights={r: share for r in out}, require_mutex=True)
        bf.win_update_then_collect("x")
        time.sleep(jitter.uniform(0, 2e-4) * (rank + 1))  # ranks at different speeds
    bf.barrier()  # every push has landed: collect the last ones
    bf.win_update_then_collect("x")
    estimate = x / bf.win_associated_p("x")
    error = float((estimate - average).abs().max())
    worst = bf.allreduce(torch.tensor([error]), average=False, name="worst").item() if size > 1 else error
    print(f"rank {rank}: p = {bf.win_associated_p('x'):.3g}, max |x/p - average| = {error:.3e}")
    bf.win_free("x")
    bf.turn_off_win_ops_with_associated_p()
    bf.shutdown()
    if error > args.tolerance:
        raise SystemExit(f"rank {rank}: error {error:.3e} above the tolerance {args.tolerance}")
    if rank == 0:
        print(f"push-sum converged on {size} ranks (sum of the ranks' errors {worst:.3e})")


if __name__ == "__main__":
    main()
