#!/usr/bin/env bash
# The demo: decentralized average consensus on 4 local ranks through starlingrun,
# printing the measured convergence next to the rate the mixing matrix predicts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/build.sh
./build/impl/launcher/starlingrun -np 4 --timeout 120 -- ./build/examples/c/average_consensus exp2 12 1000
./build/impl/launcher/starlingrun -np 4 --timeout 120 -- ./build/examples/c/average_consensus dynamic 4 1000
