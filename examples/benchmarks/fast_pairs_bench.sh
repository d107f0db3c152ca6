#!/usr/bin/env bash
# Averaging around a slow link on namespace hosts (a benchmark, not a test; root): 4
# hosts, --per-host ranks each (1), every link unlimited except host1 <-> host2, shaped
# to --slow in both directions (htb, by destination address). Runs fast_pairs_bench.py.
#
#   examples/benchmarks/fast_pairs_bench.sh [--build build] [--slow 100mbit] [--bytes 1048576]
#       [--steps 30] [--per-host 1] [--json out.json]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build slow=100mbit nbytes=1048576 steps=30 per_host=1 json=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(realpath "$2") ;;
    --slow) slow=$2 ;;
    --bytes) nbytes=$2 ;;
    --steps) steps=$2 ;;
    --per-host) per_host=$2 ;;
    --json) json=$(realpath -m "$2") ;;
    *) echo "fast_pairs_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
run=$build/impl/launcher/starlingrun
[[ -x $run && -d $build/python/starling ]] || { echo "build first (starlingrun, python/)" >&2; exit 2; }

# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
mh_bench_setup
export PYTHONPATH=$build/python OMP_NUM_THREADS=1

mh_create 4
# host1 -> host2 and host2 -> host1 through a class of their own; the rest unlimited.
for pair in "1 2" "2 1"; do
  read -r from to <<<"$pair"
  ns=$(_mh_ns "host$from")
  tc -n "$ns" qdisc add dev eth0 root handle 1: htb default 10
  tc -n "$ns" class add dev eth0 parent 1: classid 1:10 htb rate 100gbit quantum 200000
  tc -n "$ns" class add dev eth0 parent 1: classid 1:20 htb rate "$slow" quantum 1514
  tc -n "$ns" filter add dev eth0 parent 1: protocol ip u32 match ip dst "10.77.0.$to/32" flowid 1:20
done
args=(--bytes "$nbytes" --steps "$steps")
[[ -n $json ]] && args+=(--json "$json")
mh_exec host1 timeout -k 5 900 "$run" -H "host1:$per_host,host2:$per_host,host3:$per_host,host4:$per_host" --interface eth0 -x OMP_NUM_THREADS \
  --mpi-args "--mca plm_rsh_agent $(mh_agent)" \
  /usr/bin/python3 "$root/examples/benchmarks/fast_pairs_bench.py" "${args[@]}"
