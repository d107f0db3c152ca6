#!/usr/bin/env bash
# Configures and builds Starling into ./build (Release), after installing the Debian
# packages it needs. Used by demo.sh and test.sh; safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/install-deps.sh
source packaging/cmake-generator.sh
cmake -S . -B build $(cmake_generator build) -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=/usr/bin/python3 > build-configure.log 2>&1 \
  || { cat build-configure.log; exit 1; }
cmake --build build -j"$(nproc)"
