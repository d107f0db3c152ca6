"""starlingrun start/stop and starling.interactive with real ipyparallel engines and a
real Jupyter kernel (nbclient). Run by run.sh, which gives each run its own IPYTHONDIR
and ends whatever a failed test left behind.

Environment: STARLINGRUN (the launcher binary), EXAMPLES (examples/python)."""

import _thread
import json
import os
import signal
import subprocess
import threading
import time

import nbclient
import nbformat
import numpy as np
import pytest

import ipyparallel as ipp
import starling.interactive as si
from IPython.core.interactiveshell import InteractiveShell
from starling.interactive._magics import activate

from consensus_reference import exponential_graph_weights

STARLINGRUN = os.environ["STARLINGRUN"]
IPYTHONDIR = os.environ["IPYTHONDIR"]


def ours():
    """The live processes (pid: command line) started for this test run (they inherit its IPYTHONDIR)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"IPYTHONDIR={IPYTHONDIR}".encode() in f.read().split(b"\0") and int(pid) not in (os.getpid(), os.getppid()):
                    with open(f"/proc/{pid}/stat") as s:
                        if s.read().split(") ")[1].split()[0] != "Z":
                            with open(f"/proc/{pid}/cmdline", "rb") as c:
                                command = c.read().replace(b"\0", b" ").decode(errors="replace")
                            found.append(f"{pid}: {command}")
        except OSError:
            pass
    return found


def launcher(*args, timeout=90):
    return subprocess.run([STARLINGRUN, *args], capture_output=True, text=True, timeout=timeout)


def test_cli_cluster_bluefog_program_interrupt_and_dead_engine():
    started = launcher("start", "-np", "2", "-x", "NOTEBOOK_TEST_VAR=forwarded")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        rc = ipp.Client(profile="bluefog")  # ibfrun's profile: BlueFog notebooks connect unchanged
        assert sorted(rc.ids) == [0, 1]
        dv = rc[:]
        # A BlueFog cell, unchanged; MPI initialised first (mpi4py), init() twice.
        dv.execute("from mpi4py import MPI\nimport bluefog.torch as bf\nimport torch, os\nbf.init()\nbf.init()\n"
                   "me = (bf.rank(), bf.size(), MPI.COMM_WORLD.rank, os.environ.get('NOTEBOOK_TEST_VAR'), os.getpid())\n"
                   "total = bf.allreduce(torch.tensor([bf.rank() + 1.0]), average=False).item()", block=True)
        me = dv.pull("me", block=True)
        assert [m[:4] for m in me] == [(0, 2, 0, "forwarded"), (1, 2, 1, "forwarded")]  # engine id == rank
        assert dv.pull("total", block=True) == [3.0, 3.0]

        # A hung cell: the interrupt reaches both engines, which stay usable.
        hung = dv.execute("import time\ntime.sleep(300)", block=False)
        time.sleep(1.0)
        t0 = time.monotonic()
        si.interrupt(rc)
        with pytest.raises(ipp.error.CompositeError) as raised:
            hung.get(timeout=15)
        assert time.monotonic() - t0 < 10
        assert [e[0] for e in raised.value.elist] == ["KeyboardInterrupt", "KeyboardInterrupt"]
        assert dv.apply_sync(lambda: 6 * 7) == [42, 42]

        # The same through %%px, interrupted as the notebook's stop button does (a
        # KeyboardInterrupt in the kernel's main thread): the magics relay it.
        shell = InteractiveShell.instance()
        activate(rc, "bluefog")
        threading.Timer(1.5, _thread.interrupt_main).start()
        t0 = time.monotonic()
        try:
            shell.run_cell_magic("px", "", "import time\ntime.sleep(300)")
        except ipp.error.CompositeError:
            pass  # ipyparallel < 8.1, through starling's relay; >= 8.1 relays and shows the errors itself
        assert time.monotonic() - t0 < 12
        with pytest.raises(ipp.error.CompositeError) as raised:
            shell.magics_manager.registry["StarlingMagics"].last_result.get(timeout=5)
        assert [e[0] for e in raised.value.elist] == ["KeyboardInterrupt", "KeyboardInterrupt"]
        assert dv.apply_sync(lambda: 6 * 7) == [42, 42]

        # A dead engine: rank 1 killed while rank 0 waits for it in allreduce. The cell
        # fails with Starling's error naming the rank (or, when mpirun ended rank 0
        # first, ipyparallel's: EngineError, or TaskAborted when the hub unregistered
        # the engine before the reply), not an empty result; check() names the ranks.
        pending = rc[0].execute("bf.allreduce(torch.ones(1))", block=False)
        time.sleep(0.5)
        os.kill(me[1][4], signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises((ipp.error.RemoteError, ipp.error.EngineError, ipp.error.TaskAborted)) as raised:
            pending.get(timeout=30)
        died_after = time.monotonic() - t0
        if isinstance(raised.value, ipp.error.RemoteError):
            assert raised.value.ename == "PeerFailedError" and "rank 1 " in raised.value.evalue, raised.value
        deadline = time.monotonic() + 20  # mpirun ends the job (no --fault-tolerant)
        while si.status()["running"] and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(si.ClusterError, match=r"engine\(s\) \[0, 1\] of 2"):
            si.check(rc, "bluefog")
        with pytest.raises(si.ClusterError, match=r"engine\(s\) \[0, 1\] of 2"):
            shell.run_cell_magic("px", "", "print('not run')")  # not a silent empty result
        print(f"dead engine reported after {died_after:.1f} s: {raised.value!r}")
        rc.close()
    finally:
        stopped = launcher("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert launcher("stop").stdout.startswith("starlingrun stop: no cluster")
    assert ours() == []


def test_bad_input():
    no_count = launcher("start", "--profile", "bad")
    assert no_count.returncode == 1 and "the number of ranks is missing" in no_count.stderr
    assert launcher("start", "-np", "2", "python3", "x.py").returncode == 1  # a program
    assert launcher("start", "-np", "zero").returncode == 1
    assert launcher("stop", "extra").returncode == 2
    with pytest.raises(ValueError):
        si.start(n=0)
    assert ours() == []


def test_example_notebook():
    path = os.path.join(os.environ["EXAMPLES"], "interactive.ipynb")
    nb = nbformat.read(path, as_version=4)
    try:
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": os.path.dirname(path)}}).execute()
    finally:
        si.stop()  # the notebook's last cell does this; after a failure, here
    assert ours() == []
    # The documentation shows excerpts of the notebook (docs/snippets/notebook.py).
    sources = {line.rstrip() for c in nb.cells for line in c.source.splitlines()}
    snippet = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "snippets", "notebook.py")
    for line in open(snippet):
        line = line.rstrip()
        assert not line or line.lstrip().startswith("#") or line in sources, f"not in the notebook: {line}"
    result = next(c for c in nb.cells if "result" in c.metadata.get("tags", []))
    assert any(o.get("data", {}).get("image/png") for o in result.outputs), "no plot"
    out = json.loads([o.text for o in result.outputs if o.output_type == "stream"][-1].splitlines()[-1])

    n = 4
    W = exponential_graph_weights(n)
    x0 = np.stack([np.random.default_rng(100 + r).standard_normal(3) for r in range(n)])
    np.testing.assert_allclose(out["x0"], x0, rtol=0, atol=0)
    for k in range(3):  # the first rounds tell the weights apart; later all are near the mean
        np.testing.assert_allclose(np.array(out["rounds"])[:, k], np.linalg.matrix_power(W, k + 1) @ x0,
                                   rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["consensus"], np.linalg.matrix_power(W, 20) @ x0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.mean(out["consensus"], axis=0), x0.mean(axis=0), atol=1e-12)

    data = [np.random.default_rng(200 + r) for r in range(n)]
    data = [(A, A @ [1.0, -2.0, 0.5] + 0.1 * g.standard_normal(16))
            for g in data for A in [g.standard_normal((16, 3))]]
    w, losses = np.zeros((n, 3)), []
    for _ in range(40):
        residuals = [A @ w[r] - b for r, (A, b) in enumerate(data)]
        losses.append(np.mean([0.5 * r @ r for r in residuals]))
        w = W @ np.stack([w[r] - 0.02 * (A.T @ residuals[r]) for r, (A, _) in enumerate(data)])
    np.testing.assert_allclose(out["w"], w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["losses"], losses, rtol=1e-10)
    assert losses[-1] < 0.01 * losses[0]
    np.testing.assert_allclose(w, [[1.0, -2.0, 0.5]] * n, atol=0.1)
