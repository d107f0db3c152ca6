#!/usr/bin/env bash
# The failure marathon (issue 29): a job on Open MPI 5 with ULFM computes with exact
# integer checks (tests/fault/marathon_program.cc) while a driver SIGKILLs a random rank
# (never rank 0) every --interval seconds; the survivors repair and grow a replacement
# back at the dead rank's place, --cycles times. At the end: exact results on every
# member, RSS of the long-lived ranks, no process, shared-memory file or temporary
# file left, mpirun's status; detection, recovery and grow times (median, worst).
# No same-host probe (STARLING_PEER_CHECK_SECONDS=0): detection comes from MPI alone.
#
#   failure_marathon.sh [--np 6] [--cycles 200] [--interval 2] [--hosts 1|2]
#                       [--build build-ompi5] [--prefix OMPI5_PREFIX]
#
# --hosts 2: across two network-namespace hosts (tests/multihost/netns_hosts.sh; needs
# root), --np/2 ranks each, launched from host1; ranks are killed, never daemons (a
# daemon's death ends the job under Open MPI 5.0's launcher).
# Needs build-ompi5 with the test programs (bash tests/ompi5/run.sh builds it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
np=6 cycles=200 interval=2 hosts=1 build=$root/build-ompi5 prefix=${STARLING_OMPI5_PREFIX:-/opt/starling-ompi5}
while [[ $# -gt 0 ]]; do
  case $1 in
    --np) np=$2 ;;
    --cycles) cycles=$2 ;;
    --interval) interval=$2 ;;
    --hosts) hosts=$2 ;;
    --build) build=$(realpath "$2") ;;
    --prefix) prefix=$2 ;;
    *) echo "failure_marathon.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
program=$build/tests/fault/starling_marathon_program
[[ -x $prefix/bin/mpirun ]] || { echo "no Open MPI 5 in $prefix (packaging/install-deps.sh)" >&2; exit 1; }
[[ -x $program ]] || { echo "no $program (bash tests/ompi5/run.sh builds it)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 STARLING_PEER_CHECK_SECONDS=0
# Seconds the whole job may take: generous, the marathon is slow on a loaded machine.
limit=$((cycles * 30 + 120))
driver=(/usr/bin/python3 "$root/tests/fault/run_marathon.py" --mpiexec "$prefix/bin/mpirun" --np "$np"
        --program "$program" --cycles "$cycles" --interval "$interval" --limit "$limit")
if ((hosts == 1)); then
  "${driver[@]}" --mpirun-args "--mca btl_tcp_if_include lo"
  exit
fi
# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
why=$(mh_available) || { echo "cannot make namespace hosts here: $why" >&2; exit 1; }
trap mh_destroy EXIT
mh_create "$hosts"
spec=""
for ((k = 1; k <= hosts; k++)); do spec+="${spec:+,}host$k:$((np / hosts))"; done
"${driver[@]}" --launch "ip netns exec $(_mh_ns host1) unshare -u /bin/sh -c 'hostname host1 && exec \"\$@\"' host1" \
  --mpirun-args "--prefix $prefix --prtemca plm_ssh_agent $(mh_agent) -H $spec --map-by node --mca btl tcp,self --mca btl_tcp_if_include eth0 --prtemca oob_tcp_if_include eth0"
