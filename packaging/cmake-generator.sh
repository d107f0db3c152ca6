# Sourced by the build scripts. `cmake_generator DIR` prints the -G argument for a new
# build directory DIR: Ninja where installed (packaging/install-deps.sh installs it). It
# compiles a target's sources while the libraries the target links are still being
# built, where Make waits: the ASan build took 248 s against 354 s with Make on 2 cores.
# A directory already configured keeps its generator (cmake refuses to switch).
#
# STARLING_UNITY: the CMake arguments of a unity build (CMAKE_UNITY_BUILD: each target
# compiles its sources in batches of 8, parsing the shared headers once per batch; the
# ASan build then took 182 s). The CI-only builds (sanitizers, Open MPI 5, the PyPI
# stack, fuzzing) use it; ./build does not, so a missing #include still fails there.
cmake_generator() {
  [ -f "$1/CMakeCache.txt" ] && return 0
  command -v ninja > /dev/null && echo "-G Ninja"
  return 0
}
STARLING_UNITY="-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8"
