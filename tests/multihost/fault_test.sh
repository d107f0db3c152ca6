#!/usr/bin/env bash
# ctest fault.multihost (labels fault;multihost): on Open MPI 5 with ULFM, across 2
# namespace hosts x 2 ranks (netns_hosts.sh), a rank on host2 dies, then both of host2's
# ranks, then both of host2's ranks stop (SIGSTOP: only Starling's heartbeat can find
# them); each time every survivor on host1 gets PEER_FAILED within --bound seconds,
# repairs, and an allreduce over the survivors is exact (fault_program.py).
# Exits 77 (skipped) where namespaces cannot be made, unless STARLING_REQUIRE_MULTIHOST=1.
#   fault_test.sh --python-dir DIR --mpiexec OMPI5_MPIRUN [--bound SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python_dir="" mpiexec="" bound=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --python-dir) python_dir=$(realpath "$2") ;;
    --mpiexec) mpiexec=$2 ;;
    --bound) bound=$2 ;;
    *) echo "fault_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
prefix=$(cd "$(dirname "$(realpath "$mpiexec")")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=netns_hosts.sh
source "$here/netns_hosts.sh"
# shellcheck source-path=SCRIPTDIR source=fault_jobs.sh
source "$here/fault_jobs.sh"
if ! why=$(mh_available); then
  if [[ ${STARLING_REQUIRE_MULTIHOST:-0} == 1 ]]; then
    echo "FAIL - cannot make namespace hosts here: $why (STARLING_REQUIRE_MULTIHOST=1)"
    exit 1
  fi
  echo "SKIP: cannot make namespace hosts here: $why"
  exit 77
fi
unset OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include STARLING_NODES_PER_MACHINE
results=$(mktemp /tmp/starling-fault-test.XXXXXX)
trap 'mh_destroy; rm -f "$results"' EXIT
mh_create 2
fj_run "2 hosts x 2, kill a rank on host2" 2 2 rank "$python_dir" "$prefix" "$results"
fj_run "2 hosts x 2, kill host2's ranks" 2 2 host "$python_dir" "$prefix" "$results"
fj_run "2 hosts x 2, stop host2's ranks" 2 2 stop "$python_dir" "$prefix" "$results"
/usr/bin/python3 "$here/fault_summary.py" "$results" --bound "$bound"
