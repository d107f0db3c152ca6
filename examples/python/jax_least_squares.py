#!/usr/bin/env python3
"""Decentralized least squares in JAX: gradients from jax.grad, averaging by Starling.

Each rank holds its own rows (A_r, b_r) of one least-squares problem. With gradient
tracking (DIGing), every rank keeps a model x_r and an estimate y_r of the global
gradient, and only ever talks to its neighbors:

    x_r <- neighbor_average(x) - lr * y_r
    y_r <- neighbor_average(y) + grad_r(x_r new) - grad_r(x_r old)

All x_r converge to the exact global solution (no central server, no allreduce in
the loop). Starling takes and returns jax.Arrays: results come back as the caller's
array type. The check at the end compares every rank's model with the solution of the
stacked problem, computed by each rank from every rank's (reproducible) data.

    starlingrun -np 4 python3 jax_least_squares.py [--iterations 300] [--tolerance 1e-4]
"""

import argparse
import os
import sys

import numpy as np

try:
    import jax
    import jax.numpy as jnp
except ImportError:
    # 77 is "skipped" for the smoke test, unless JAX is required (CI installs it).
    required = os.environ.get("STARLING_REQUIRE_JAX") == "1"
    print(f"jax_least_squares: {'failed' if required else 'skipped'}: JAX is not installed "
          "(pip install 'jax[cpu]'; packaging/install-deps.sh installs it)")
    sys.exit(1 if required else 77)

import starling

ROWS, DIM = 16, 4


def problem(rank):
    """Rank r's rows: the same on every rank that asks, so each can build the reference."""
    rng = np.random.default_rng(1000 + rank)
    a = rng.normal(size=(ROWS, DIM))
    b = a @ np.arange(1.0, DIM + 1) + 0.1 * rng.normal(size=ROWS)
    return jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()

    ctx = starling.Context()
    a, b = problem(ctx.rank)
    grad = jax.jit(jax.grad(lambda x: 0.5 * jnp.mean((a @ x - b) ** 2)))

    x = jnp.zeros(DIM, jnp.float32)
    g = grad(x)
    y = g
    for _ in range(args.iterations):
        # Two nonblocking neighbor averages in flight together (fused into one message
        # per neighbor when they match), then the local JAX step.
        rx, ry = ctx.neighbor_allreduce_nonblocking(x), ctx.neighbor_allreduce_nonblocking(y)
        x = rx.wait() - args.lr * y
        g_new = grad(x)
        y = ry.wait() + g_new - g
        g = g_new
    if not isinstance(x, jax.Array):  # results come back as the caller's array type
        sys.exit(f"expected a jax.Array, got {type(x)}")

    # Reference: the stacked problem of every rank, solved directly.
    everyone = [problem(r) for r in range(ctx.size)]
    stacked_a = np.concatenate([np.asarray(p[0], np.float64) for p in everyone])
    stacked_b = np.concatenate([np.asarray(p[1], np.float64) for p in everyone])
    solution = np.linalg.lstsq(stacked_a, stacked_b, rcond=None)[0]
    error = float(np.max(np.abs(np.asarray(x, np.float64) - solution)))
    worst = float(ctx.allreduce(jnp.asarray([error], jnp.float32), "max")[0])
    if ctx.rank == 0:
        print(f"jax_least_squares: {ctx.size} ranks, {args.iterations} iterations, "
              f"largest distance of a rank's model to the global solution {worst:.2e} "
              f"(tolerance {args.tolerance:g})")
    ctx.close()
    sys.exit(0 if worst <= args.tolerance else 1)


if __name__ == "__main__":
    main()
