#!/usr/bin/env bash
# The scaling benchmark (a benchmark, not a test): scaling_bench on network-namespace
# hosts (tests/multihost/netns_hosts.sh) whose links are limited with tc tbf, at 2, 4, 8
# and 16 ranks, then a table and a plot (plot_scaling.py). Needs root.
#
#   examples/benchmarks/multihost_bench.sh [--build build] [--rates 1gbit,10gbit]
#       [--ranks 2,4,8,16] [--mib 4,16] [--steps 9] [--out scaling]
#
# Layouts: one rank per host (every rank has a link of its own, as one GPU per machine)
# for allreduce, MPI_Allreduce, exp2, one-peer exp2 and window push; two ranks per host
# (half as many hosts) for hierarchical_neighbor_allreduce, which needs machines of
# several ranks. A rate "none" leaves the links unlimited: the time then is what the
# cores (shared by all ranks) need, the floor under the limited runs. The hosts share
# this machine's cores, which Open MPI cannot see: its idle ranks are told to yield
# (Starling's see it, by the kernel they share).
# Writes OUT.csv (appending), OUT.md (the table) and OUT.png.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build rates=1gbit,10gbit ranks=2,4,8,16 mib=4,16 steps=9 out=scaling
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(realpath "$2") ;;
    --rates) rates=$2 ;;
    --ranks) ranks=$2 ;;
    --mib) mib=$2 ;;
    --steps) steps=$2 ;;
    --out) out=$2 ;;
    *) echo "multihost_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
out=$(realpath -m "$out")
run=$build/impl/launcher/starlingrun bench=$build/examples/benchmarks/scaling_bench
[[ -x $run && -x $bench ]] || { echo "build first: $run, $bench" >&2; exit 2; }

# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
mh_bench_setup

# one HOSTS PER_HOST RATE METHODS: one job, its rows appended to OUT.csv.
one() {
  local hosts=$1 per=$2 rate=$3 methods=$4 list="" k
  mh_create "$hosts" "$([[ $rate == none ]] || echo "$rate")"
  for ((k = 1; k <= hosts; k++)); do list+="${list:+,}host$k:$per"; done
  mh_exec host1 timeout -k 5 1800 "$run" -H "$list" --interface eth0 \
    --mpi-args "--mca plm_rsh_agent $(mh_agent) --mca mpi_yield_when_idle 1" \
    "$bench" --mib "$mib" --steps "$steps" --methods "$methods" --label "$rate" --csv "$out.csv"
  mh_destroy
}

for rate in ${rates//,/ }; do
  for n in ${ranks//,/ }; do
    one "$n" 1 "$rate" allreduce,mpi_allreduce,exp2,one_peer,win_push
    ((n >= 4)) && one $((n / 2)) 2 "$rate" hierarchical
  done
done
/usr/bin/python3 "$root/examples/benchmarks/plot_scaling.py" "$out.csv" --table "$out.md" --plot "$out.png"
