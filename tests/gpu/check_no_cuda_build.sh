#!/usr/bin/env bash
# CI check: Starling configured without the CUDA toolkit (STARLING_WITH_CUDA=OFF) builds,
# libstarling.so links neither the CUDA runtime nor NCCL, and a CUDA tensor gets a clean
# UNSUPPORTED naming the missing plugin (gpu.unavailable_default). Builds only what it
# runs, in build-nocuda/. Usage: bash tests/gpu/check_no_cuda_build.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
dir=build-nocuda
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DSTARLING_WITH_CUDA=OFF -DPython3_EXECUTABLE=/usr/bin/python3 \
  -DSTARLING_BUILD_PYTHON=OFF -DSTARLING_BUILD_JAVA=OFF -DSTARLING_BUILD_JULIA=OFF -DSTARLING_BUILD_EXAMPLES=OFF \
  > "$dir-configure.log" 2>&1 || { cat "$dir-configure.log"; exit 1; }
grep -q "libstarling_cuda.so: not built" "$dir-configure.log" || { echo "expected the CUDA plugin to be skipped"; exit 1; }
cmake --build "$dir" -j"$(nproc)" --target starling gpu_unavailable_test
if readelf -d "$dir"/libstarling.so | grep -E "NEEDED.*(cuda|nccl)"; then
  echo "libstarling.so must not link CUDA or NCCL"
  exit 1
fi
(cd "$dir" && ctest --output-on-failure -R '^gpu\.unavailable_(default|no_plugin)')
echo "no-CUDA build: passed in $((SECONDS - start)) s"
