#!/usr/bin/env bash
# The Debian packages as a user gets them: CPack builds starling-runtime and starling-dev
# from the build tree, `apt-get install ./...deb` installs them into / (resolving their
# declared dependencies), the consumer project of tests/install builds against the
# installed package through find_package and through pkg-config, and runs at 2 ranks
# under the installed starlingrun and under mpirun. Then both packages are removed again,
# with anything apt installed for them, whatever happened (trap).
#   deb_test.sh <source dir> <cmake build dir> <mpiexec>
# Needs root (it installs into /); skipped otherwise, and when a Starling package is
# already installed (a user's installation is not this test's to replace).
set -euo pipefail
src=$1 build=$2 mpiexec=$3
skip() {  # exit 77 (ctest: skipped), except in CI, where a skipped check is a failure
  echo "deb_test: SKIPPED: $*"
  if [ "${CI:-}" = true ]; then echo "deb_test: CI=true, so this is a failure"; exit 1; fi
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "installing Debian packages into / needs root"
command -v apt-get > /dev/null && command -v dpkg-shlibdeps > /dev/null || skip "needs apt-get and dpkg-dev"
start=$SECONDS

# One run at a time on this machine (several checkouts may test at once).
exec 9> /var/lock/starling-deb-test.lock
flock -w 600 9 || { echo "deb_test: another run held the lock for 10 minutes"; exit 1; }
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2> /dev/null)" = "install ok installed" ]; }
for p in starling-runtime starling-dev; do
  installed "$p" && skip "$p is already installed; remove it first (apt-get remove starling-dev starling-runtime)"
done

work=$(mktemp -d)
cleanup() {
  local rc=$?
  # Remove our packages and exactly what apt installed for them (the NEW packages of
  # its install log: other checkouts may install packages meanwhile, those stay).
  local extra=""
  [ -f "$work/install.log" ] && extra=$(awk '/NEW packages will be installed/ {on = 1; next}
    on && /^  / {print; next} {on = 0}' "$work/install.log" | tr ' ' '\n' | grep -v '^starling-' | grep . || true)
  apt-get -o DPkg::Lock::Timeout=300 purge -y -q starling-dev starling-runtime $extra > "$work/remove.log" 2>&1 \
    || { cat "$work/remove.log"; rc=1; }
  [ -z "$extra" ] || echo "deb_test: also removed what apt installed for the packages: $extra"
  if [ -e /usr/include/starling/starling.h ] || [ -e /usr/bin/starlingrun ]; then
    echo "deb_test: files left behind after removal"; rc=1
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

# 1. Build the packages (into $work: the build tree gets no _CPack_Packages).
(cd "$build" && cpack -G DEB -B "$work/debs" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
runtime=$(ls "$work"/debs/starling-runtime_*.deb)
dev=$(ls "$work"/debs/starling-dev_*.deb)
echo "built $(basename "$runtime") and $(basename "$dev") in $((SECONDS - start)) s"

# 2. What each package holds and declares.
contents() { dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\./|/|'; }
field() { dpkg-deb -f "$1" "$2"; }
expect_file() {  # <deb> <path regex>
  grep -Eq "^$2\$" <<< "$(contents "$1")" || { echo "$(basename "$1") lacks $2"; contents "$1"; exit 1; }
}
expect_file "$runtime" '/usr/lib[^ ]*/libstarling\.so\.0\.[0-9.]+'
expect_file "$runtime" '/usr/lib[^ ]*/libstarling\.so\.0'
expect_file "$runtime" '/usr/bin/starlingrun'
[ -f "$build/libstarling_cuda.so" ] && expect_file "$runtime" '/usr/lib[^ ]*/libstarling_cuda\.so'
expect_file "$dev" '/usr/include/starling/starling\.h'
expect_file "$dev" '/usr/lib[^ ]*/libstarling\.so'
expect_file "$dev" '/usr/lib[^ ]*/cmake/Starling/StarlingConfig\.cmake'
expect_file "$dev" '/usr/lib[^ ]*/pkgconfig/starling\.pc'
if grep -Eq 'include/|\.pc$|cmake/|libstarling\.so$' <<< "$(contents "$runtime")"; then
  echo "the runtime package holds development files"; contents "$runtime"; exit 1
fi
grep -q libopenmpi3 <<< "$(field "$runtime" Depends)" || { echo "runtime Depends lacks libopenmpi3: $(field "$runtime" Depends)"; exit 1; }
grep -q openmpi-bin <<< "$(field "$runtime" Depends)" || { echo "runtime Depends lacks openmpi-bin"; exit 1; }
grep -q "starling-runtime (= $(field "$runtime" Version))" <<< "$(field "$dev" Depends)" \
  || { echo "dev does not depend on this runtime: $(field "$dev" Depends)"; exit 1; }
grep -q libdlpack-dev <<< "$(field "$dev" Depends)" || { echo "dev Depends lacks libdlpack-dev"; exit 1; }
echo "runtime Depends: $(field "$runtime" Depends)"
echo "dev Depends: $(field "$dev" Depends)"

# 3. Install both as a user would; apt resolves the dependencies.
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends \
  "$runtime" "$dev" > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
installed starling-runtime && installed starling-dev || { echo "the packages did not install"; exit 1; }

# 4. The consumer against the installed package: nothing points at the build tree, and
# the checks make sure it was /usr's copy that was found (not one in /usr/local).
unset LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH
cd "$work"
cmake -S "$src/tests/install/consumer" -B "$work/cmake" > "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; exit 1; }
grep -Eq '^Starling_DIR:PATH=/usr/lib[^ ]*/cmake/Starling$' "$work/cmake/CMakeCache.txt" \
  || { echo "find_package found $(grep Starling_DIR "$work/cmake/CMakeCache.txt")"; exit 1; }
cmake --build "$work/cmake" >> "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; exit 1; }
pcdir=$(pkg-config --variable=pcfiledir starling)
case $pcdir in /usr/lib*/pkgconfig) ;; *) echo "pkg-config found starling in $pcdir"; exit 1 ;; esac
cc -std=c99 "$src/tests/install/consumer/main.c" -o "$work/pc_consumer" $(pkg-config --cflags --libs starling)
# (/usr)?: Debian 12 merges /lib into /usr/lib, and ld.so may name either.
# (ldd's output is captured first: with pipefail, grep -q closing the pipe early would
# make ldd die of SIGPIPE and fail the check at random.)
for exe in "$work/cmake/consumer" "$work/pc_consumer"; do
  libs=$(ldd "$exe")
  grep -Eq 'libstarling\.so\.0 => (/usr)?/lib[^ ]*/libstarling\.so\.0 ' <<< "$libs" \
    || { echo "$exe does not load /usr's libstarling:"; echo "$libs"; exit 1; }
done

# 5. Run them at 2 ranks: the CMake-built one under the installed launcher, the
# pkg-config one under mpirun.
[ "$(command -v starlingrun)" = /usr/bin/starlingrun ] || { echo "starlingrun is $(command -v starlingrun)"; exit 1; }
starlingrun --version
timeout -k 5 120 starlingrun -np 2 --timeout 100 -- "$work/cmake/consumer"
timeout -k 5 120 "$mpiexec" -n 2 "$work/pc_consumer"
echo "deb test passed in $((SECONDS - start)) s"
