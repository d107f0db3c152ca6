#!/usr/bin/env bash
# Builds Starling and runs the whole test suite (unit, MPI at 1-4 ranks, launcher,
# examples, bindings). Every MPI job runs under timeout(1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
