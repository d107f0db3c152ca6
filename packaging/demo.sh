#!/usr/bin/env bash
# The demo, on 4 local ranks through starlingrun: decentralized average consensus,
# printing the measured convergence next to the rate the mixing matrix predicts, then
# decentralized training from PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/build.sh
./build/impl/launcher/starlingrun -np 4 --timeout 120 -- ./build/examples/c/average_consensus exp2 12 1000
./build/impl/launcher/starlingrun -np 4 --timeout 120 -- ./build/examples/c/average_consensus dynamic 4 1000
# Decentralized training from PyTorch: gradient allreduce against neighbor averaging over
# the static exponential-2 graph and over a dynamic one-peer topology; it prints each
# mode's test accuracy and where the plot of loss and consensus distance per rank is.
PYTHONPATH="$PWD/build/python" ./build/impl/launcher/starlingrun -np 4 --timeout 300 -x PYTHONPATH -- \
  /usr/bin/python3 examples/python/train_mlp.py --plot build/train_mlp.png
