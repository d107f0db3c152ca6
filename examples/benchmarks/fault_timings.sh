#!/usr/bin/env bash
# Detection and repair times of dead ranks on Open MPI 5 with ULFM, across
# network-namespace hosts (tests/multihost/netns_hosts.sh; needs root), compared with
# one host. Each job (tests/multihost/fault_jobs.sh): ranks allreduce in a loop; one
# rank SIGKILLs itself, or every rank of one host is SIGKILLed (or SIGSTOPped: a hung
# host, which only Starling's heartbeat finds) from outside; the survivors time the
# PEER_FAILED error and the repair, and check that an allreduce over them is exact. Last, a host dies whole (its ranks and its Open MPI daemon, prted):
# Open MPI 5.0.11's launcher (PRRTE 3.0) cannot lose a daemon and ends the job
# (open-mpi/ompi#12227; PRRTE pull request #2443 adds it later); that job reports how
# the job ended. Prints one line per job and a table (medians over the repetitions).
#
#   fault_timings.sh [--reps N] [--python-dir DIR] [--prefix OMPI5_PREFIX] [--out FILE]
#
# Defaults: 3 repetitions, build-ompi5/python (tests/ompi5/run.sh builds it),
# /opt/starling-ompi5. --out: also write the table and lines there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=3 python_dir=$root/build-ompi5/python prefix=${STARLING_OMPI5_PREFIX:-/opt/starling-ompi5} out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --reps) reps=$2 ;;
    --python-dir) python_dir=$(realpath "$2") ;;
    --prefix) prefix=$2 ;;
    --out) out=$2 ;;
    *) echo "fault_timings.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
[[ -x $prefix/bin/mpirun ]] || { echo "no Open MPI 5 in $prefix (packaging/install-deps.sh)" >&2; exit 1; }
[[ -f $python_dir/starling/__init__.py ]] || { echo "no Starling Python package in $python_dir" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/netns_hosts.sh
source "$root/tests/multihost/netns_hosts.sh"
# shellcheck source-path=SCRIPTDIR source=../../tests/multihost/fault_jobs.sh
source "$root/tests/multihost/fault_jobs.sh"
if ! why=$(mh_available); then echo "cannot make namespace hosts: $why" >&2; exit 1; fi
trap mh_destroy EXIT
unset OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include STARLING_NODES_PER_MACHINE
results=$(mktemp /tmp/starling-fault-timings.XXXXXX)

for ((rep = 1; rep <= reps; rep++)); do
  fj_run "1 host x 4, kill a rank" 1 4 rank "$python_dir" "$prefix" "$results"
  mh_create 2
  fj_run "2 hosts x 2, kill a rank (host2)" 2 2 rank "$python_dir" "$prefix" "$results"
  fj_run "2 hosts x 2, kill host2's ranks" 2 2 host "$python_dir" "$prefix" "$results"
  fj_run "2 hosts x 2, stop host2's ranks" 2 2 stop "$python_dir" "$prefix" "$results"
  mh_destroy
  mh_create 4
  fj_run "4 hosts x 1, kill a rank (host4)" 4 1 rank "$python_dir" "$prefix" "$results"
  fj_run "4 hosts x 2, kill a rank (host4)" 4 2 rank "$python_dir" "$prefix" "$results"
  fj_run "4 hosts x 2, kill host4's ranks" 4 2 host "$python_dir" "$prefix" "$results"
  fj_run "4 hosts x 2, stop host4's ranks" 4 2 stop "$python_dir" "$prefix" "$results"
  mh_destroy
done
mh_create 2
fj_run "2 hosts x 2, kill host2 (ranks and prted)" 2 2 daemon "$python_dir" "$prefix" "$results"
mh_destroy

{
  "$prefix/bin/mpirun" --version | sed -n 1p
  echo "$reps repetitions, $(nproc) cores, $(date -u +%Y-%m-%d)"
  /usr/bin/python3 "$root/tests/multihost/fault_summary.py" "$results"
} | tee ${out:+"$out"}
rm -f "$results"
