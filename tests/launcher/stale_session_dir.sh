#!/usr/bin/env bash
# ctest launcher.stale_session_dir: a killed Open MPI 5 mpirun leaves <tmpdir>/ompi.<pid>,
# and an mpirun later given that pid refuses to start (impl/launcher/session_dir.h).
# Checks that neither starlingrun nor the tests' mpirun wrapper (tests/mpirun.in) is
# stopped by such a leftover. Skipped (77) unless the mpirun is Open MPI 5 or later.
#   stale_session_dir.sh STARLINGRUN REAL_MPIRUN TESTS_MPIRUN_WRAPPER
set -uo pipefail
run=$1 mpirun=$2 wrapper=$3
major=$("$mpirun" --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9]*\)\..*/\1/p' | head -1)
if [[ ${major:-0} -lt 5 ]]; then echo "SKIP: $mpirun is not Open MPI 5 or later"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work STARLING_MPIRUN=$mpirun
host=$(hostname)
failures=0
check() {  # check NAME STATUS-WANTED STATUS-GOT
  if [[ $2 == "$3" ]]; then echo "ok   - $1"; else echo "FAIL - $1 (status $3)"; failures=$((failures + 1)); fi
}

# Leaves what a killed mpirun of pid $1 leaves (its PMIx rendezvous file), then runs the
# rest of the command line with exec, so that it keeps that pid.
cat > "$work/as_stale.sh" <<'SH'
mkdir -p "$TMPDIR/ompi.$$" && : > "$TMPDIR/ompi.$$/pmix.$HOST.tool.$$" && exec "$@"
SH
export HOST=$host

# 1. Open MPI itself: a leftover under its own pid stops it. Not a failure if a later
# Open MPI copes, only a sign that the workaround may go.
rc=0
timeout -k 5 60 bash "$work/as_stale.sh" "$mpirun" -np 1 true > "$work/out" 2>&1 || rc=$?
if [[ $rc -ne 0 ]] && grep -q "listener thread failed to start" "$work/out"; then
  echo "ok   - Open MPI $major's mpirun refuses to start over a stale session directory (status $rc)"
else
  echo "note - Open MPI $major's mpirun starts despite a stale session directory (status $rc)"
fi

# 2. The tests' wrapper keeps the pid and removes the leftover first.
rc=0
timeout -k 5 60 bash "$work/as_stale.sh" "$wrapper" -np 1 true > "$work/out" 2>&1 || rc=$?
check "the tests' mpirun wrapper starts over a stale session directory of its pid" 0 "$rc"
[[ $rc -eq 0 ]] || cat "$work/out"

# 3. starlingrun: its mpirun gets a pid only at fork, so leftovers are laid for the next
# 400 pids (one Python process lays them all); mpirun's pid is among them.
python3 - "$work" "$host" <<'PY'
import os, sys
work, host = sys.argv[1], sys.argv[2]
last = int(open("/proc/sys/kernel/ns_last_pid").read())
top = int(open("/proc/sys/kernel/pid_max").read())
for i in range(1, 401):
    pid = (last + i) % top
    os.makedirs(f"{work}/ompi.{pid}", exist_ok=True)
    open(f"{work}/ompi.{pid}/pmix.{host}.tool.{pid}", "w").close()
PY
rc=0
timeout -s KILL 60 "$run" -np 1 -- true > "$work/out" 2>&1 || rc=$?
check "starlingrun starts over stale session directories of the next pids" 0 "$rc"
[[ $rc -eq 0 ]] || cat "$work/out"
left=$(find "$work" -maxdepth 1 -name 'ompi.*' | wc -l)
check "starlingrun left the other pids' leftovers alone (399 left)" 399 "$left"

[[ $failures -eq 0 ]] || { echo "$failures check(s) failed"; exit 1; }
echo "all stale session directory checks passed"
