#!/usr/bin/env bash
# The second MPI: builds Starling against Open MPI 5 with ULFM (the PyPI wheel that
# packaging/install-deps.sh installs into /opt/starling-ompi5, or STARLING_OMPI5_PREFIX)
# in build-ompi5 (no CUDA, no Julia), then runs there the MPI tests (label mpi, at 1,
# 2 and 6 ranks),
# the fault-tolerance tests (label fault: a rank is killed during every kind of
# operation; the survivors repair and compute exact results, from C, Python and Java)
# and the launcher's tests; then, as the build has no CUDA, tests/gpu/check_no_cuda_build.sh.
# Debian's Open MPI 4.1 stays the default build (./build). Exit 77 (skip) when Open MPI
# 5 is not installed, unless CI=true, where that is a failure.
#   tests/ompi5/run.sh [--labels REGEX]   (default: ^mpi$|^fault$|^launcher$)
#   tests/ompi5/run.sh --build-only       (configure and build; CI runs it in the background)
set -euo pipefail
cd "$(dirname "$0")/../.."
labels='^mpi$|^fault$|^launcher$'
build_only=0
case ${1:-} in
  --labels) labels=$2 ;;
  --build-only) build_only=1 ;;
esac
prefix=${STARLING_OMPI5_PREFIX:-/opt/starling-ompi5}
if [ ! -x "$prefix/bin/mpicxx" ]; then
  echo "ompi5: no Open MPI 5 in $prefix (packaging/install-deps.sh installs it)"
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
"$prefix/bin/mpirun" --version | sed -n 1p  # sed reads it all: no SIGPIPE under pipefail
source packaging/cmake-generator.sh
# shellcheck disable=SC2046,SC2086
cmake -S . -B build-ompi5 $(cmake_generator build-ompi5) $STARLING_UNITY -DCMAKE_BUILD_TYPE=Release -DSTARLING_WITH_CUDA=OFF \
  -DSTARLING_BUILD_JAVA=ON -DSTARLING_BUILD_JULIA=OFF -DSTARLING_BUILD_EXAMPLES=OFF \
  -DPython3_EXECUTABLE=/usr/bin/python3 \
  -DMPI_C_COMPILER="$prefix/bin/mpicc" -DMPI_CXX_COMPILER="$prefix/bin/mpicxx" \
  -DMPIEXEC_EXECUTABLE="$prefix/bin/mpirun" > build-ompi5-configure.log
if ! grep -q "ULFM fault tolerance: yes" build-ompi5-configure.log; then
  cat build-ompi5-configure.log
  echo "ompi5: ULFM not detected in $prefix"
  exit 1
fi
# Only what the tests below run (not the unit, GPU-emulator and example programs): CI time.
# starling_mpi_programs: every gtest program of tests/mpi (new ones join by themselves).
# starling_java_tests (fault.java) where a JDK and JUnit were found.
java=()
grep -q "^STARLING_JUNIT4_JAR:FILEPATH=/" build-ompi5/CMakeCache.txt && java=(starling_java_tests)
cmake --build build-ompi5 -j2 --target starling starlingrun starling_python starling_fault_program \
  starling_ulfm_program starling_grow_program starling_marathon_program starling_init_then_exit \
  starling_exit_after_repair starling_exit_program starling_mpi_programs "${java[@]}"
[ "$build_only" = 1 ] && exit 0
cd build-ompi5
# starlingrun runs the `mpirun` first on PATH: Open MPI 5's, for the launcher tests.
# The MPI tests at 1 and 2 ranks (and the 6-rank hierarchical runs) only (CI time: 76 s
# less): their 3- and 4-rank runs are stage 1's, on Open MPI 4.1; on this MPI, the fault
# tests run at 3 to 6 ranks.
PATH="$prefix/bin:$PATH" ctest -L "$labels" -E '^mpi\..*\.np[34]$' --output-on-failure --timeout 300
# The same build has no CUDA: it also serves the no-CUDA check (CI time: one build less).
cd ..
bash tests/gpu/check_no_cuda_build.sh build-ompi5
