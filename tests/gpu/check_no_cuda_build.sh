#!/usr/bin/env bash
# CI check: Starling configured without the CUDA toolkit (STARLING_WITH_CUDA=OFF) builds,
# libstarling.so links neither the CUDA runtime nor NCCL, and a CUDA tensor gets a clean
# UNSUPPORTED naming the missing plugin (gpu.unavailable_default). Builds only what it
# runs. Usage: bash tests/gpu/check_no_cuda_build.sh [DIR]
#   DIR: a build directory already configured with STARLING_WITH_CUDA=OFF (CI uses
#   build-ompi5, which is: one build less); without it, configures build-nocuda/.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
dir=${1:-}
if [ -z "$dir" ]; then
  dir=build-nocuda
  source packaging/cmake-generator.sh
  # shellcheck disable=SC2046
  cmake -S . -B "$dir" $(cmake_generator "$dir") -DCMAKE_BUILD_TYPE=Release -DSTARLING_WITH_CUDA=OFF -DPython3_EXECUTABLE=/usr/bin/python3 \
    -DSTARLING_BUILD_PYTHON=OFF -DSTARLING_BUILD_JAVA=OFF -DSTARLING_BUILD_JULIA=OFF -DSTARLING_BUILD_EXAMPLES=OFF \
    > "$dir-configure.log" 2>&1 || { cat "$dir-configure.log"; exit 1; }
fi
grep -q "^STARLING_WITH_CUDA:[A-Z]*=OFF$" "$dir/CMakeCache.txt" || { echo "$dir is not configured with STARLING_WITH_CUDA=OFF"; exit 1; }
cmake --build "$dir" -j"$(nproc)" --target starling gpu_unavailable_test
[ ! -e "$dir/libstarling_cuda.so" ] || { echo "expected the CUDA plugin not to be built in $dir"; exit 1; }
if readelf -d "$dir"/libstarling.so | grep -E "NEEDED.*(cuda|nccl)"; then
  echo "libstarling.so must not link CUDA or NCCL"
  exit 1
fi
(cd "$dir" && ctest --output-on-failure -R '^gpu\.unavailable_(default|no_plugin)')
echo "no-CUDA build: passed in $((SECONDS - start)) s"
