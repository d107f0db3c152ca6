"""A notebook against a `starlingrun start -H ...` cluster across namespace hosts (run by
run_tests.sh on host1, where the cluster was started):

  notebook_check.py PROFILE HOSTS PER_HOST

A real Jupyter kernel (nbclient) connects with ipyparallel.Client(profile=PROFILE), as a
user's notebook does, runs %%px cells on every engine (allreduce, average consensus with
neighbor_allreduce) and interrupts a hung cell on every engine. The values are checked
here against NumPy, and each engine's rank, host and machine info against the layout
(ranks 0..K-1 on host1, K..2K-1 on host2, ...). Exits 1 naming what differs."""

import json
import os
import sys

import nbclient
import nbformat
import numpy as np
from nbformat.v4 import new_code_cell, new_notebook

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "notebooks"))
from consensus_reference import exponential_graph_weights  # noqa: E402  (the shared NumPy reference)

ROUNDS = 5
FORWARDED = "NOTEBOOK_CHECK=forwarded"  # run_tests.sh passes it with -x


def notebook(profile: str) -> nbformat.NotebookNode:
    cells = [
        f"""import json, socket, time
import numpy as np
import ipyparallel as ipp
import starling.interactive as si
rc = ipp.Client(profile={profile!r})   # also makes %px / %%px run on every engine
dv = rc[sorted(rc.ids)]""",
        f"""%%px
import os, socket
import numpy as np
import starling
ctx = starling.Context()
x0 = np.random.default_rng(100 + ctx.rank).standard_normal(5)
total = ctx.allreduce(x0)
mean = ctx.allreduce(x0, op="average")
x, rounds = x0, []
for _ in range({ROUNDS}):
    x = ctx.neighbor_allreduce(x)   # exponential-2 graph, uniform weights
    rounds.append(x)
me = {{"rank": ctx.rank, "size": ctx.size, "local_rank": ctx.local_rank, "local_size": ctx.local_size,
      "machine_rank": ctx.machine_rank, "machine_size": ctx.machine_size, "host": socket.gethostname(),
      "var": os.environ.get("NOTEBOOK_CHECK")}}""",
        # A hung cell on every engine, the remote host's too: SIGINT through the nannies.
        """hung = dv.execute("import time; time.sleep(300)", block=False)
time.sleep(1.0)
t0 = time.monotonic()
si.interrupt(rc)
try:
    hung.get(timeout=15)
    interrupted = []
except ipp.error.CompositeError as e:
    interrupted = sorted((info["engine_id"], name) for name, _, _, info in e.elist)
interrupt_s = time.monotonic() - t0
after = dv.apply_sync(lambda: 6 * 7)""",
        """print(json.dumps({"ids": sorted(rc.ids), "kernel_host": socket.gethostname(),
                  "me": dv.pull("me", block=True), "x0": np.stack(dv.pull("x0", block=True)).tolist(),
                  "total": np.stack(dv.pull("total", block=True)).tolist(),
                  "mean": np.stack(dv.pull("mean", block=True)).tolist(),
                  "rounds": np.stack(dv.pull("rounds", block=True)).tolist(),
                  "interrupted": interrupted, "interrupt_s": interrupt_s, "after": after}))
rc.close()""",
    ]
    return new_notebook(cells=[new_code_cell(c) for c in cells])


def main() -> int:
    profile, hosts, per_host = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    n = hosts * per_host
    nb = notebook(profile)
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    out = json.loads(nb.cells[-1].outputs[-1]["text"].splitlines()[-1])

    problems = []

    def expect(what, got, want):
        if got != want:
            problems.append(f"{what}: got {got!r}, expected {want!r}")

    expect("engine ids", out["ids"], list(range(n)))
    expect("kernel's host", out["kernel_host"], "host1")
    for engine, me in enumerate(out["me"]):
        expect(f"engine {engine}", me, {
            "rank": engine, "size": n, "local_rank": engine % per_host, "local_size": per_host,
            "machine_rank": engine // per_host, "machine_size": hosts, "host": f"host{engine // per_host + 1}",
            "var": FORWARDED.partition("=")[2]})
    expect("interrupted engines", out["interrupted"], [[e, "KeyboardInterrupt"] for e in range(n)])
    expect("engines after the interrupt", out["after"], [42] * n)
    if out["interrupt_s"] > 10:
        problems.append(f"the interrupt took {out['interrupt_s']:.1f} s")

    # The same computations in float64 NumPy, from the seeds alone.
    x0 = np.stack([np.random.default_rng(100 + r).standard_normal(5) for r in range(n)])
    W = exponential_graph_weights(n)
    checks = [("x0", np.array(out["x0"]), x0),
              ("allreduce sum", np.array(out["total"]), np.tile(x0.sum(axis=0), (n, 1))),
              ("allreduce average", np.array(out["mean"]), np.tile(x0.mean(axis=0), (n, 1)))]
    for k in range(ROUNDS):
        checks.append((f"consensus round {k + 1}", np.array(out["rounds"])[:, k],
                       np.linalg.matrix_power(W, k + 1) @ x0))
    for what, got, want in checks:
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-12, atol=1e-12):
            problems.append(f"{what}: got {got.tolist()}, NumPy says {want.tolist()}")
    # Averaging preserves the mean: the last round still has x0's.
    if not np.allclose(np.array(out["rounds"])[:, -1].mean(axis=0), x0.mean(axis=0), rtol=0, atol=1e-12):
        problems.append("the consensus lost the mean")

    for problem in problems:
        print(f"notebook_check: {problem}")
    if not problems:
        hosts_of = sorted({me["host"] for me in out["me"]})
        print(f"notebook_check: engines 0..{n - 1} = ranks, {per_host} per host on {', '.join(hosts_of)}; "
              f"allreduce and {ROUNDS} consensus rounds match NumPy; "
              f"a hung cell interrupted on every engine in {out['interrupt_s']:.2f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
