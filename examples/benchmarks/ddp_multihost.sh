#!/usr/bin/env bash
# DDP step time over Starling against gloo across namespace hosts with limited links (a
# benchmark, not a test): examples/benchmarks/ddp_bench.py on 2 hosts, 1 and 2 ranks per
# host. Root (network namespaces, tests/multihost/netns_hosts.sh). --script runs another
# benchmark of this folder the same way (overlap_bench.py: communication overlapped with
# the backward pass).
#
#   examples/benchmarks/ddp_multihost.sh [--build build] [--rate 1gbit] [--per-host 1,2]
#       [--python /usr/bin/python3] [--script ddp_bench.py] [-- the script's arguments]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build rate=1gbit per_host=1,2 python=/usr/bin/python3 script=ddp_bench.py
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$(realpath "$2"); shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --per-host) per_host=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --script) script=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "ddp_multihost.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
run=$build/impl/launcher/starlingrun
[[ -x $run && -d $build/python/starling ]] || { echo "build first (starlingrun, python/)" >&2; exit 2; }

# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
why=$(mh_available) || { echo "cannot make namespace hosts here: $why" >&2; exit 77; }
unset OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include STARLING_NODES_PER_MACHINE
# gloo picks its interface from GLOO_SOCKET_IFNAME; the hosts' link is eth0.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GLOO_SOCKET_IFNAME=eth0
export PYTHONPATH=$build/python OMP_NUM_THREADS=1
trap mh_destroy EXIT
mh_create 2 "$([[ $rate == none ]] || echo "$rate")"
for k in ${per_host//,/ }; do
  echo "== 2 hosts x $k rank(s), $rate links"
  mh_exec host1 timeout -k 5 900 "$run" -H "host1:$k,host2:$k" --interface eth0 \
    -x OMP_NUM_THREADS -x GLOO_SOCKET_IFNAME -x PYTHONPATH --mpi-args "--mca plm_rsh_agent $(mh_agent)" \
    "$python" "$root/examples/benchmarks/$script" "$@"
done
