#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted $VARS are expanded by the ranks, on purpose
# End-to-end tests of starlingrun on this machine (real mpirun, real processes).
# Usage: tests/launcher/run_tests.sh path/to/starlingrun [path/to/starling_fault_program]
# Every starlingrun call runs under timeout(1), so a hang fails the test instead of
# blocking it. Prints one line per check; exits 1 if any check failed.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 3 || ! -x "$1" ]]; then
  echo "usage: $0 path/to/starlingrun [path/to/starling_fault_program [path/to/starling_ulfm_program]]" >&2
  exit 2
fi
RUN=$1
FAULT_PROGRAM=${2:-}
ULFM_PROGRAM=${3:-}  # tests/fault/ulfm_program (builds against Open MPI 5 only)
# The Open MPI major version of the mpirun starlingrun will run (STARLING_MPIRUN or PATH).
MPI_MAJOR=$("${STARLING_MPIRUN:-mpirun}" --version 2>/dev/null | sed -n 's/.*(Open MPI) \([0-9]*\)\..*/\1/p' | head -1)
LIMIT=60                  # seconds any single starlingrun call may take
MARK="30.$$"              # a sleep argument no other process on the machine uses
WORK=$(mktemp -d)
trap 'pkill -KILL -f -x "sleep $MARK" 2>/dev/null || true; rm -rf "$WORK"' EXIT

failures=0
pass() { echo "ok   - $1"; }
fail() {  # also shows the end of the last call's stderr
  echo "FAIL - $1"
  tail -n 5 "$WORK/err" 2>/dev/null | sed 's/^/       /'
  failures=$((failures + 1))
}
check() {  # check NAME CONDITION...: passes when the condition command succeeds
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# Runs starlingrun under timeout; sets rc, out (stdout) and err (stderr).
run() {
  rc=0
  timeout -s KILL "$LIMIT" "$RUN" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  out=$(cat "$WORK/out")
  err=$(cat "$WORK/err")
}

# True once no process runs "sleep $MARK" (waits up to 3 s for the last ones to exit).
no_leftovers() {
  for _ in $(seq 30); do
    pgrep -f -x "sleep $MARK" >/dev/null || return 0
    sleep 0.1
  done
  echo "     leftover processes:" >&2
  pgrep -a -f -x "sleep $MARK" >&2 || true
  return 1
}

# Waits until N processes run "sleep $MARK" (the ranks have started).
wait_for_ranks() {
  for _ in $(seq 200); do
    [[ $(pgrep -c -f -x "sleep $MARK" || true) -ge $1 ]] && return 0
    sleep 0.1
  done
  return 1
}

# ---- help, version, config ------------------------------------------------------
run --help
check "--help exits 0" test "$rc" -eq 0
missing=""
for option in -np " -n " --num-proc -H --hosts --hostfile --timeout --print-config --verbose --fault-tolerant \
              --mpi-args "-x NAME" -h --help --version STARLING_LOG_LEVEL Examples; do
  [[ $out == *"$option"* ]] || missing+=" '$option'"
done
check "--help mentions every option${missing:+ (missing:$missing)}" test -z "$missing"

# start/stop (notebooks) hand the command line to Python: one that cannot run is named.
STARLING_PYTHON=/nonexistent/python3 run stop --profile none
no_python() { [[ $rc -eq 127 && $err == *"cannot run '/nonexistent/python3'"*STARLING_PYTHON* ]]; }
check "starlingrun stop without its Python: exit 127 naming STARLING_PYTHON" no_python

run --version
version_ok() { [[ $rc -eq 0 && $out =~ [0-9]+\.[0-9]+\.[0-9]+ ]]; }
check "--version exits 0 and prints M.m.p ($out)" version_ok

run --print-config
config_ok() { [[ $rc -eq 0 && -n $out ]]; }
check "--print-config exits 0 and prints the table" config_ok

# ---- exit status ----------------------------------------------------------------
run -np 2 -- sh -c 'exit 3'
check "a rank's exit status 3 comes back (got $rc)" test "$rc" -eq 3

run -np 2 -- true
check "-np 2 true exits 0 (got $rc)" test "$rc" -eq 0

run --verbose -np 4 -- true
check "-np 4 true exits 0 on $(nproc) cores (got $rc)" test "$rc" -eq 0
if [[ $(nproc) -lt 4 ]]; then
  # Open MPI 4.1: --oversubscribe; Open MPI 5 (PRRTE): --map-by :OVERSUBSCRIBE.
  check "oversubscription is allowed for 4 ranks on $(nproc) cores" grep -q -E -- "--oversubscribe|:OVERSUBSCRIBE" "$WORK/err"
fi

run -np 2 -- sh -c 'kill -KILL $$'
check "a rank killed by a signal fails the job (got $rc)" test "$rc" -ne 0

# ---- a Starling rank dies ---------------------------------------------------------
# tests/mpi/fault_program: the last of 3 ranks is SIGKILLed from a thread while its main
# thread is inside a collective, or exits (0 or 3) without destroying its context;
# starlingrun must exit non-zero within FAULT_BOUND s of the death (the victim prints
# its CLOCK_REALTIME just before), leaving no rank behind.
FAULT_BOUND=10
fault_survivors_gone() {
  for _ in $(seq 50); do
    pgrep -f "^$FAULT_PROGRAM " >/dev/null || return 0
    sleep 0.1
  done
  pgrep -a -f "^$FAULT_PROGRAM " >&2 || true
  return 1
}
# Without --fault-tolerant a dead rank ends the job (Open MPI 5 too).
if [[ -n $FAULT_PROGRAM ]]; then
  for scenario in collective exit0 exit3; do
    run -np 3 -- "$FAULT_PROGRAM" "$scenario"
    ended=$(date +%s.%N)
    died=$(sed -n 's/^VICTIM .* real=\([0-9.]*\).*/\1/p' "$WORK/out")
    if [[ -z $died ]]; then
      fail "fault $scenario: the victim never reported (rc $rc)"
      continue
    fi
    took=$(awk -v a="$ended" -v b="$died" 'BEGIN { printf "%.2f", a - b }')
    # exit3: the other ranks, told that it left, fail and exit 1 within milliseconds, so
    # which non-zero status Open MPI reports first (3 or 1) is a race.
    expected_rc="non-zero"
    rc_ok() { test "$rc" -ne 0; }
    check "a rank that dies ($scenario) fails the job: rc $rc (expected $expected_rc)" rc_ok
    check "starlingrun exits ${took} s after the death ($scenario, bound ${FAULT_BOUND} s)" \
      awk -v t="$took" -v b="$FAULT_BOUND" 'BEGIN { exit !(t >= 0 && t < b) }'
    check "no rank of the $scenario job is left behind" fault_survivors_gone
  done
fi

# ---- --fault-tolerant ---------------------------------------------------------------
if [[ $MPI_MAJOR -ge 5 ]]; then
  if [[ -n $ULFM_PROGRAM ]]; then
    # Rank 1 is SIGKILLed mid-allreduce; the survivors repair, go on for 1 s and finish.
    run --fault-tolerant -np 3 -- "$ULFM_PROGRAM" allreduce 1
    check "--fault-tolerant: the job survives a dead rank and exits 0 (got $rc)" test "$rc" -eq 0
    check "--fault-tolerant: both survivors finished" test "$(grep -c '^SURVIVOR .* ok=1' "$WORK/out")" -eq 2
    check "--fault-tolerant: the launcher reports that rank 1 died" grep -q "starlingrun: rank 1 (pid [0-9]*) died" "$WORK/err"
    check "--fault-tolerant: and that the survivors finished" grep -q "rank(s) died; the survivors finished" "$WORK/err"
    # No failure, but rank 0 exits 1.5 s after the others: nobody died.
    run --fault-tolerant -np 3 -- "$ULFM_PROGRAM" finish 1.5
    check "--fault-tolerant: a job whose ranks finish at different times exits 0 (got $rc)" test "$rc" -eq 0
    check "--fault-tolerant: all three ranks finished" test "$(grep -c '^FINISHED' "$WORK/out")" -eq 3
    check "--fault-tolerant: no rank reported dead when ranks finish at different times" \
      bash -c "! grep -q 'died' '$WORK/err'"
  fi
else
  run --fault-tolerant -np 3 -- true
  refused() { [[ $rc -eq 2 && $err == *"needs Open MPI 5 with ULFM"* ]]; }
  check "--fault-tolerant is refused on Open MPI ${MPI_MAJOR:-?} with a clear message (got $rc)" refused
fi

# ---- mpirun that hangs in its own teardown ------------------------------------------
# Open MPI 4.1's mpirun deadlocks now and then after every rank has ended
# (impl/launcher/teardown_watch.h). A stand-in mpirun starts three "ranks" (the first
# dies of SIGTERM, as mpirun's kill leaves the others, the next exits 3), leaves them as
# zombies and hangs: starlingrun stops it and exits with the failed rank's 3.
cat > "$WORK/hung_mpirun.py" <<'PY'
import subprocess, sys, time
if "--version" in sys.argv:
    print("mpirun (Open MPI) 4.1.4")
    sys.exit(0)
ranks = [subprocess.Popen(["sh", "-c", 'kill -TERM $$']), subprocess.Popen(["sh", "-c", "exit 3"]),
         subprocess.Popen(["sh", "-c", "exit 0"])]
time.sleep(float(__import__("os").environ.get("HANG", "300")))  # never reaps its ranks
sys.exit(0)
PY
printf '#!/bin/sh\nexec python3 %s "$@"\n' "$WORK/hung_mpirun.py" > "$WORK/hung_mpirun"
chmod +x "$WORK/hung_mpirun"
start=$(date +%s.%N)
rc=0
STARLING_MPIRUN=$WORK/hung_mpirun timeout -s KILL "$LIMIT" "$RUN" -np 2 -- true >"$WORK/out" 2>"$WORK/err" || rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
check "a hung mpirun is stopped: exit status 3 from the failed rank (got $rc)" test "$rc" -eq 3
check "a hung mpirun is stopped 5-8 s after its ranks ended (took $took s)" \
  awk -v t="$took" 'BEGIN { exit !(t >= 5 && t < 8) }'
check "starlingrun says why it stopped mpirun" grep -q "mpirun has not exited" "$WORK/err"
# A slow but healthy teardown (2 s) is left alone.
rc=0
HANG=2 STARLING_MPIRUN=$WORK/hung_mpirun timeout -s KILL "$LIMIT" "$RUN" -np 2 -- true >"$WORK/out" 2>"$WORK/err" || rc=$?
check "a teardown of 2 s is not cut short: mpirun's status 0 (got $rc)" test "$rc" -eq 0
check "and nothing is said about it" bash -c "! grep -q 'mpirun has not exited' '$WORK/err'"

# ---- mpirun that crashes -------------------------------------------------------------
# (Open MPI 4.1's mpirun dies of SIGSEGV in its teardown now and then.) Its status, and
# a line that says what happened: a shell says nothing of a grandchild's crash.
printf '#!/bin/sh\ncase "$*" in *--version*) echo "mpirun (Open MPI) 4.1.4"; exit 0;; esac\nkill -SEGV $$\n' \
  > "$WORK/crashing_mpirun"
chmod +x "$WORK/crashing_mpirun"
rc=0
STARLING_MPIRUN=$WORK/crashing_mpirun timeout -s KILL "$LIMIT" "$RUN" -np 2 -- true >"$WORK/out" 2>"$WORK/err" || rc=$?
check "a crashed mpirun: exit status 139 (got $rc)" test "$rc" -eq 139
check "and starlingrun says so" grep -q "mpirun died of signal 11 (Segmentation fault)" "$WORK/err"

# ---- environment ----------------------------------------------------------------
rc=0
STARLING_FOO="hello $$" timeout -s KILL "$LIMIT" "$RUN" -np 2 -- sh -c 'echo "foo=$STARLING_FOO"' \
  >"$WORK/out" 2>"$WORK/err" || rc=$?
check "STARLING_FOO reaches both ranks" test "$rc" -eq 0 -a "$(grep -c -x "foo=hello $$" "$WORK/out")" -eq 2

run -np 2 -x "EXTRA_VAR=a b" -- sh -c 'echo "extra=$EXTRA_VAR level=$STARLING_LOG_LEVEL"'
check "-x NAME=VALUE and the default STARLING_LOG_LEVEL=warn reach both ranks" \
  test "$rc" -eq 0 -a "$(grep -c -x "extra=a b level=warn" "$WORK/out")" -eq 2

# ---- hosts ----------------------------------------------------------------------
run -np 2 -H localhost:2 -- true
check "-H localhost:2 runs (got $rc)" test "$rc" -eq 0
printf 'localhost slots=2\n' >"$WORK/hosts"
run -np 2 --hostfile "$WORK/hosts" -- true
check "--hostfile runs (got $rc)" test "$rc" -eq 0

# ---- timeout --------------------------------------------------------------------
start=$SECONDS
run --timeout 2 -np 2 -- sleep "$MARK"
elapsed=$((SECONDS - start))
check "--timeout 2 exits 124 (got $rc)" test "$rc" -eq 124
check "--timeout 2 returns within 10 s (took ${elapsed} s)" test "$elapsed" -le 10
check "--timeout says why on stderr" grep -q "timeout" "$WORK/err"
check "--timeout leaves no rank behind" no_leftovers

# ---- Ctrl-C ---------------------------------------------------------------------
rc=0
timeout -s KILL "$LIMIT" "$RUN" -np 2 -- sleep "$MARK" >"$WORK/out" 2>"$WORK/err" &
watchdog=$!
if wait_for_ranks 2; then
  kill -INT "$(pgrep -P "$watchdog")"  # the starlingrun under timeout
  start=$SECONDS
  wait "$watchdog" || rc=$?
  check "SIGINT makes starlingrun exit 130 (got $rc)" test "$rc" -eq 130
  check "SIGINT stops the job within 10 s" test $((SECONDS - start)) -le 10
  check "SIGINT leaves no rank behind" no_leftovers
else
  fail "ranks of the SIGINT test did not start: $(cat "$WORK/err")"
  wait "$watchdog" || true
fi

# ---- bad usage --------------------------------------------------------------------
usage_error() { [[ $rc -eq 2 && $err == *"see starlingrun --help"* ]]; }
bad_usage() {  # bad_usage DESCRIPTION ARGS...: exit 2 and a message pointing to --help
  local what=$1
  shift
  run "$@"
  check "bad usage ($what) exits 2 with a hint (got $rc: ${err%%$'\n'*})" usage_error
}
bad_usage "no -np" -- true
bad_usage "-np 0" -np 0 true
bad_usage "-np abc" -np abc true
bad_usage "unknown option" -np 2 --no-such-option true
bad_usage "no program" -np 2
bad_usage "-H and --hostfile" -np 2 -H localhost:2 --hostfile "$WORK/hosts" true
bad_usage "missing hostfile" -np 2 --hostfile "$WORK/no-such-file" true
bad_usage "bad -H" -np 2 -H localhost true
bad_usage "bad --timeout" --timeout soon -np 2 true
bad_usage "nothing at all"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all launcher checks passed"
