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
"""

import os
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


class BuildWithCMake(build_py):
    """Builds the package with CMake instead of copying sources."""

    def run(self):
        if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
            sys.exit("setup.py: build from the Starling source tree (bindings/python inside it)")
        build_dir = os.environ.get("STARLING_CMAKE_BUILD_DIR") or os.path.join(self.build_temp_dir(), "cmake")
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                                   f"-DPython3_EXECUTABLE={sys.executable}", "-DSTARLING_BUILD_PYTHON=ON",
                                   "-DSTARLING_BUILD_TESTS=OFF", "-DSTARLING_BUILD_EXAMPLES=OFF",
                                   "-DSTARLING_BUILD_JAVA=OFF", "-DSTARLING_BUILD_JULIA=OFF"])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "starling_python",
                               "-j", str(os.cpu_count() or 1)])
        with tempfile.TemporaryDirectory() as prefix:
            subprocess.check_call(["cmake", "--install", build_dir, "--component", "python", "--prefix", prefix])
            target = os.path.join(self.build_lib, "starling")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(os.path.join(prefix, "starling"), target, symlinks=False)

    def build_temp_dir(self):
        return self.get_finalized_command("build").build_temp


class BinaryDistribution(Distribution):
    """The package carries a compiled module: wheels are platform-specific."""

    def has_ext_modules(self):
        return True


setup(
    name="starling",
    version=version(),
    description="Decentralized collective communication for distributed training (BlueFog-compatible)",
    long_description=open(os.path.join(HERE, "README.md")).read() if os.path.exists(os.path.join(HERE, "README.md"))
    else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.8",
    packages=["starling", "starling.torch", "starling.torch.distributed"],
    package_dir={"": "."},
    install_requires=["numpy"],
    extras_require={"torch": ["torch", "networkx"]},
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
    zip_safe=False,
)
