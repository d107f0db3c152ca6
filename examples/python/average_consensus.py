"""Decentralized average consensus with NumPy through the framework-neutral API.

Every rank starts from its own random vector; repeated neighbor averaging drives all of
them to the exact average of the starting vectors, without any global operation. The
program prints, per iteration, the largest distance of a rank to the true average and
the distance the mixing matrix predicts (its second-largest singular value to the power
of the iteration count, times the starting distance).

    starlingrun -np 4 python3 examples/python/average_consensus.py [--topology exp2|ring|mesh|star|dynamic]
        [--iterations 30] [--length 1000]
"""

import argparse
import math

import numpy as np

import starling

GRAPHS = {
    "exp2": starling.Topology.exponential_two,
    "ring": starling.Topology.ring,
    "mesh": starling.Topology.mesh_grid_2d,
    "star": starling.Topology.star,
    "dynamic": starling.Topology.exponential_two,  # one peer per step, cycling through it
}


def main():
    parser = argparse.ArgumentParser(description="average consensus over a static or dynamic topology")
    parser.add_argument("--topology", choices=sorted(GRAPHS), default="exp2")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--length", type=int, default=1000)
    parser.add_argument("--tolerance", type=float, default=0.0, help="exit 1 if the final distance exceeds this")
    args = parser.parse_args()

    with starling.Context() as ctx:
        rank, size = ctx.rank, ctx.size
        topology = GRAPHS[args.topology](size)
        ctx.set_topology(topology, weighted=True)
        x = np.random.RandomState(17 + rank).uniform(0, 10, args.length)
        target = ctx.allreduce(x, "average")

        def distance():
            return float(ctx.allreduce(np.array([np.linalg.norm(x - target)]), "max")[0])

        # Predicted contraction per step: the second-largest singular value of W (static).
        w = topology.to_matrix()
        rate = float(np.linalg.svd(w - 1.0 / size)[1][0]) if args.topology != "dynamic" else math.nan
        start = distance()
        schedule = starling.Schedule.dynamic_one_peer(topology, rank) if args.topology == "dynamic" else None
        if rank == 0:
            print(f"{args.topology} topology, {size} ranks, {args.length} values per rank; "
                  f"predicted contraction per step: {rate:.4f}" if schedule is None else
                  f"dynamic one-peer topology, {size} ranks: each step averages with one peer")
            print(f"{'step':>5} {'max distance to the average':>28} {'predicted':>12}")
        for step in range(1, args.iterations + 1):
            if schedule is None:
                ctx.neighbor_allreduce(x, out=x)  # in place, the topology's weights
            else:
                send, recv = next(schedule)
                share = 1.0 / (len(recv) + 1)
                ctx.neighbor_allreduce(x, self_weight=share, src_weights={r: share for r in recv}, dst_weights=send,
                                       out=x)
            d = distance()
            if rank == 0:
                predicted = start * rate ** step if schedule is None else math.nan
                print(f"{step:>5} {d:>28.3e} {predicted:>12.3e}")
        final = distance()
    if args.tolerance and final > args.tolerance:
        raise SystemExit(f"rank {rank}: distance {final:.3e} above the tolerance {args.tolerance}")


if __name__ == "__main__":
    main()
