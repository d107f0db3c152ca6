#!/usr/bin/env bash
# Any Python benchmark on namespace hosts with limited links (a benchmark, not a test;
# root): --hosts hosts with --per-host ranks each, every host's link capped at --rate in
# both directions (tbf; none: unlimited), launched with starlingrun from host1 in the
# current directory. Output paths the program is given are best absolute.
#
#   examples/benchmarks/on_hosts.sh [--build build] [--hosts 4] [--per-host 1]
#       [--rate 100mbit] [--timeout 3600] -- PROGRAM.py [ARGS...]
# e.g. the straggler benchmark over 100 Mbit/s links (docs/performance.md, Stragglers):
#   examples/benchmarks/on_hosts.sh --rate 100mbit -- examples/benchmarks/straggler_bench.py \
#       --epochs 25 --hidden 128 --device-ms 20 --out $PWD/straggler_hosts
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build hosts=4 per_host=1 rate=100mbit limit=3600
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --build) build=$(realpath "$2") ;;
    --hosts) hosts=$2 ;;
    --per-host) per_host=$2 ;;
    --rate) rate=$2 ;;
    --timeout) limit=$2 ;;
    *) echo "on_hosts.sh: unknown argument '$1' (the program comes after --)" >&2; exit 2 ;;
  esac
  shift 2
done
[[ ${1:-} == -- && $# -ge 2 ]] || { echo "on_hosts.sh: no program (after --)" >&2; exit 2; }
shift
program=$(realpath "$1")
shift
[[ $hosts =~ ^[1-9][0-9]*$ && $per_host =~ ^[1-9][0-9]*$ ]] \
  || { echo "on_hosts.sh: --hosts and --per-host must be positive integers" >&2; exit 2; }
run=$build/impl/launcher/starlingrun
[[ -x $run && -d $build/python/starling ]] || { echo "build first (starlingrun, python/)" >&2; exit 2; }

# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
mh_bench_setup
export PYTHONPATH=$build/python OMP_NUM_THREADS=1

mh_create "$hosts" "$([[ $rate == none ]] || echo "$rate")"
list=""
for ((k = 1; k <= hosts; k++)); do list+="${list:+,}host$k:$per_host"; done
echo "on_hosts: $hosts hosts x $per_host ranks, links $rate: $(basename "$program") $*"
mh_exec host1 timeout -k 5 "$limit" "$run" -H "$list" --interface eth0 -x OMP_NUM_THREADS \
  --mpi-args "--mca plm_rsh_agent $(mh_agent)" /usr/bin/python3 "$program" "$@"
