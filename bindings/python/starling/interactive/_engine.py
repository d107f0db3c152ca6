"""One rank of a `starlingrun start` job: an ipyparallel engine whose id is its MPI rank.

Run by the launcher as `python -m starling.interactive._engine PROFILE`. The controller's
engine connection file travels base64-encoded in STARLING_IPP_ENGINE (the launcher
forwards every STARLING_* variable to every host), so remote hosts need no copy of the
profile directory. MPI itself is not initialized here: Starling (or mpi4py) does that on
the first use, inside the engine, as in a batch run."""

import atexit
import base64
import importlib.util
import os
import sys
import tempfile

COMPAT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat")


def _rank() -> int:
    for name in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"):
        value = os.environ.get(name)
        if value is not None and value.isdigit():
            return int(value)
    sys.exit("starling.interactive: this engine was not started by starlingrun/mpirun (no MPI rank in "
             "the environment); use `starlingrun start -np N`")


def _connection_file(rank: int) -> str:
    encoded = os.environ.get("STARLING_IPP_ENGINE")
    if not encoded:
        sys.exit("starling.interactive: STARLING_IPP_ENGINE is not set; engines are started by "
                 "`starlingrun start`, not directly")
    data = base64.b64decode(encoded)
    if hasattr(os, "memfd_create"):
        # A file in memory (Linux): it goes with the engine however the engine ends, so a
        # killed engine leaves no copy of the controller's key behind. ipyparallel reads
        # it once, at start.
        fd = os.memfd_create(f"starling-engine-{rank}")
        os.write(fd, data)
        return f"/proc/{os.getpid()}/fd/{fd}"
    fd, path = tempfile.mkstemp(prefix=f"starling-engine-{rank}-", suffix=".json")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    atexit.register(lambda: os.path.exists(path) and os.unlink(path))
    return path


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m starling.interactive._engine PROFILE")
    profile = sys.argv[1]
    rank = _rank()
    if importlib.util.find_spec("bluefog") is None:
        sys.path.append(COMPAT_DIR)  # BlueFog notebooks: import bluefog.torch as bf
    from ipyparallel.engine.app import main as engine_main

    engine_main(argv=[f"--profile={profile}", f"--file={_connection_file(rank)}", f"--IPEngine.id={rank}",
                      "--log-level=WARN"])


if __name__ == "__main__":
    main()
