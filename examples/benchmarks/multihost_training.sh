#!/usr/bin/env bash
# Decentralized SGD against gradient allreduce on namespace hosts with limited links
# (a benchmark, not a test): examples/python/train_mlp.py (digits, an MLP with a wide
# hidden layer so that there is a model worth sending) at 8 and 16 ranks, one rank per
# host, then test accuracy against wall-clock training time (plot_training.py). Root.
#
#   examples/benchmarks/multihost_training.sh [--build build] [--rate 1gbit]
#       [--ranks 8,16] [--hidden 16384] [--epochs 20] [--out training]
# Writes OUT.csv (appending) and OUT.png.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build rate=1gbit ranks=8,16 hidden=16384 epochs=20 out=training
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(realpath "$2") ;;
    --rate) rate=$2 ;;
    --ranks) ranks=$2 ;;
    --hidden) hidden=$2 ;;
    --epochs) epochs=$2 ;;
    --out) out=$2 ;;
    *) echo "multihost_training.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
out=$(realpath -m "$out")
run=$build/impl/launcher/starlingrun
[[ -x $run && -d $build/python/starling ]] || { echo "build first (starlingrun, python/)" >&2; exit 2; }

# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
mh_bench_setup
export PYTHONPATH=$build/python OMP_NUM_THREADS=1

for n in ${ranks//,/ }; do
  mh_create "$n" "$([[ $rate == none ]] || echo "$rate")"
  list=""
  for ((k = 1; k <= n; k++)); do list+="${list:+,}host$k:1"; done
  mh_exec host1 timeout -k 5 1800 "$run" -H "$list" --interface eth0 -x OMP_NUM_THREADS \
    --mpi-args "--mca plm_rsh_agent $(mh_agent)" \
    /usr/bin/python3 "$root/examples/python/train_mlp.py" --modes allreduce,dynamic --hidden "$hidden" \
    --epochs "$epochs" --no-progress --plot "$out.ranks$n.png" --curve "$out.csv"
  mh_destroy
done
/usr/bin/python3 "$root/examples/benchmarks/plot_training.py" "$out.csv" --plot "$out.png" --title \
  "MLP (hidden $hidden) on digits, $rate per host link"
