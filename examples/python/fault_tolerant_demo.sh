#!/usr/bin/env bash
# The demo of "Surviving failures" (a demo, not a test): fault_tolerant_training.py at 8
# ranks under `starlingrun --fault-tolerant` on Open MPI 5 (build-ompi5): rank 5 is
# SIGKILLed at epoch 10, the survivors repair and go on, a replacement joins at epoch
# 15; then the same training undisturbed, and the plot.
#   examples/python/fault_tolerant_demo.sh [--build build-ompi5] [--np 8] [--epochs 30] [--out DIR]
# Writes DIR/fault_tolerant.{csv,json,png} and DIR/fault_tolerant_undisturbed.{csv,json}.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build-ompi5 np=8 epochs=30 out=$root/examples/python/results
prefix=${STARLING_OMPI5_PREFIX:-/opt/starling-ompi5}
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(realpath "$2") ;;
    --np) np=$2 ;;
    --epochs) epochs=$2 ;;
    --out) out=$2 ;;
    *) echo "fault_tolerant_demo.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
[[ -x $build/impl/launcher/starlingrun && -d $build/python/starling ]] || {
  echo "build first: bash tests/ompi5/run.sh (or cmake --build $build --target starlingrun starling_python)" >&2; exit 2; }
mkdir -p "$out"
export PATH=$prefix/bin:$PATH PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { timeout -k 10 900 "$build/impl/launcher/starlingrun" -np "$np" --fault-tolerant \
          /usr/bin/python3 "$root/examples/python/fault_tolerant_training.py" --epochs "$epochs" "$@"; }
start=$(date +%s)
run --out "$out/fault_tolerant"
echo "disturbed run: $(( $(date +%s) - start )) s"
start=$(date +%s)
run --undisturbed --out "$out/fault_tolerant_undisturbed"
echo "undisturbed run: $(( $(date +%s) - start )) s"
/usr/bin/python3 "$root/examples/python/plot_fault_tolerant.py" --run "$out/fault_tolerant" \
  --reference "$out/fault_tolerant_undisturbed" --png "$out/fault_tolerant.png"
echo "wrote $out/fault_tolerant.png"
