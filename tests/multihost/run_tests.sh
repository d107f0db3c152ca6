#!/usr/bin/env bash
# Starling across several hosts: network-namespace hosts on this machine (see
# netns_hosts.sh), jobs started as a user would, with starlingrun -H / --hostfile from
# host1, the other hosts reached through an rsh agent in place of ssh.
#
#   run_tests.sh --hosts N --per-host K --suite full|short --starlingrun PATH
#                --program PATH [--collectives PATH] [--neighbor PATH] [--windows PATH]
#                [--exit-program PATH]
#                [--python-dir DIR --python-tests DIR] [--rate RATE]
#
# full: every test program whole, a Python optimizer, a notebook on engines across the
# hosts (starlingrun start -H, notebook_check.py), rank 0 leaving early (C exit(1),
# an uncaught Python exception), a rank and a host killed.
# short: the machine checks, subsets of the programs, a host killed.
# Exits 77 (skipped) where namespaces cannot be made, unless STARLING_REQUIRE_MULTIHOST=1.
# Prints one line per check (kill checks with their measured times); exits 1 if any failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

hosts=2 per_host=2 suite=full rate="" run="" program="" collectives="" neighbor="" windows=""
python_dir="" python_tests="" exit_program=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts) hosts=$2 ;;
    --per-host) per_host=$2 ;;
    --suite) suite=$2 ;;
    --rate) rate=$2 ;;
    --starlingrun) run=$2 ;;
    --program) program=$2 ;;
    --collectives) collectives=$2 ;;
    --neighbor) neighbor=$2 ;;
    --windows) windows=$2 ;;
    --exit-program) exit_program=$2 ;;
    --python-dir) python_dir=$2 ;;
    --python-tests) python_tests=$2 ;;
    *) echo "run_tests.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
[[ -x $run && -x $program ]] || { echo "run_tests.sh: --starlingrun and --program are required" >&2; exit 2; }
# The jobs run from other directories (and on other "hosts"): absolute paths only.
abs() { [[ -z $1 ]] || realpath "$1"; }
run=$(abs "$run") program=$(abs "$program") collectives=$(abs "$collectives")
neighbor=$(abs "$neighbor") windows=$(abs "$windows") exit_program=$(abs "$exit_program") python_dir=$(abs "$python_dir")
python_tests=$(abs "$python_tests")

# shellcheck source-path=SCRIPTDIR source=netns_hosts.sh
source "$here/netns_hosts.sh"
if ! why=$(mh_available); then
  if [[ ${STARLING_REQUIRE_MULTIHOST:-0} == 1 ]]; then
    echo "FAIL - cannot make namespace hosts here: $why (STARLING_REQUIRE_MULTIHOST=1)"
    exit 1
  fi
  echo "SKIP: cannot make namespace hosts here: $why"
  exit 77
fi

# What ctest sets for single-machine runs would pin TCP to loopback or simulate machines.
unset OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include STARLING_NODES_PER_MACHINE \
  BLUEFOG_NODES_PER_MACHINE
export STARLING_TIMEOUT_SECONDS=60  # a lost peer is an error, not a hang

WORK=$(mktemp -d /tmp/starling-multihost-test.XXXXXX)
bg_pids=()
cleanup() {
  local pid
  for pid in "${bg_pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  mh_destroy
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mh_create "$hosts" "$rate"
host_list="" total=$((hosts * per_host))
for ((k = 1; k <= hosts; k++)); do
  host_list+="${host_list:+,}host$k:$per_host"
  echo "host$k slots=$per_host" >>"$WORK/hostfile"
done
# What a user of these hosts passes: the interface that joins them, and (instead of
# ssh) the agent; and one setting for this machine, below. (Earlier notes saw remote daemons crash without
# "--mca rtc ^hwloc"; 52 launches here, plain mpirun and starlingrun, 2 and 4 hosts,
# were all clean without it, so the test keeps to what users get.)
# The namespace hosts share this machine's cores, which Open MPI cannot see: each host's
# ranks fit its slots, so they would busy-poll, and with more ranks than cores every
# message waited for a time slice (8 ms per 4-byte neighbor_allreduce at 2x2, against
# 0.1 ms when idle ranks yield, as Open MPI has them do when it sees oversubscription).
common=(--interface eth0 --mpi-args "--mca plm_rsh_agent $(mh_agent) --mca mpi_yield_when_idle 1")
echo "# $hosts hosts x $per_host ranks ($host_list)${rate:+, links limited to $rate}"

LIMIT=120  # seconds any one job may take
failures=0
pass() { echo "ok   - $1"; }
fail() {
  echo "FAIL - $1"
  tail -n 15 "$WORK/out" 2>/dev/null | sed 's/^/       /'
  failures=$((failures + 1))
}

# job NAME STARLINGRUN-ARGS...: runs starlingrun on host1; passes when it exits 0.
job() {
  local name=$1 rc=0 start end
  shift
  start=$(date +%s.%N)
  mh_exec host1 timeout -k 5 "$LIMIT" "$run" "${common[@]}" "$@" >"$WORK/out" 2>&1 || rc=$?
  end=$(date +%s.%N)
  if [[ $rc == 0 ]]; then
    pass "$name ($(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s)"
  else
    fail "$name (exit $rc)"
  fi
  return 0
}

# gtest NAME PROGRAM [FILTER]: a gtest program of tests/mpi on every host.
gtest() {
  local name=$1 prog=$2 filter=${3:-*}
  [[ -x $prog ]] || { echo "skip - $name: program not built"; return 0; }
  job "$name" -H "$host_list" "$prog" "--gtest_filter=$filter"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# True once no process is left in any host's namespace (waits up to $1 seconds).
hosts_empty() {
  local deadline=$(($(date +%s) + $1)) host busy
  while :; do
    busy=""
    for host in "${MH_HOSTS[@]}"; do [[ -n $(mh_pids "$host") ]] && busy+=" $host"; done
    [[ -z $busy ]] && return 0
    if (($(date +%s) >= deadline)); then
      echo "     processes left on$busy:" >&2
      for host in $busy; do for p in $(mh_pids "$host"); do ps -o pid=,args= -p "$p" >&2 || true; done; done
      return 1
    fi
    sleep 0.05
  done
}

# --- Machines detected from the hosts, hierarchical operations ----------------------
STARLING_LOG_LEVEL=debug job "machines: $hosts machines of $per_host ranks detected; local_allreduce, set_machine_topology, hierarchical_neighbor_allreduce (static, dynamic) (-H)" \
  -H "$host_list" -x STARLING_LOG_LEVEL "$program" machines "$hosts" "$per_host"
# How often a phrase occurs in the last job's output. Ranks' lines (here stdout and the
# debug log) can interleave in mpirun's output: count phrases, not lines.
occurrences() { { grep -o -- "$1" "$WORK/out" || true; } | wc -l; }
ok_lines=$(occurrences 'OK rank=[0-9]* host=')
[[ $ok_lines == "$total" ]] || fail "machines: expected $total OK lines, got $ok_lines"
# The hosts share this machine's CPUs (one kernel): every rank must count all $total ranks
# on them, and yield in its waits where they outnumber the CPUs (spinning, each host's
# ranks starved the other's: a blocking 1 MiB allreduce at 2x2 took 33 ms, now 9).
sharing=$(occurrences "; $total rank(s) share this machine's")
[[ $sharing == "$total" ]] || fail "machines: $sharing of $total ranks counted the $total ranks sharing this machine's CPUs"
if ((total > $(nproc))); then
  [[ $(occurrences "rank(s) share this machine's [0-9]* CPU(s): waits yield") == "$total" ]] ||
    fail "machines: $total ranks on $(nproc) CPUs, but not every rank's waits yield"
fi
# --hostfile, and -np taken from its slots.
job "--hostfile without -np starts $total ranks on the hosts" \
  --hostfile "$WORK/hostfile" "$program" machines "$hosts" "$per_host"

# --- The test programs of tests/mpi across the hosts -------------------------------
if [[ $suite == full ]]; then
  gtest "every classic collective (mpi_collectives_test)" "$collectives"
  gtest "neighbor_allreduce static and dynamic, neighbor_allgather, hierarchical (mpi_neighbor_test)" "$neighbor"
  gtest "windows: put, accumulate, get, mutex (mpi_window_test)" "$windows"
else
  gtest "allreduce, broadcast (every root), allgather, barrier (mpi_collectives_test subset)" "$collectives" \
    '*BitIdentical*:*BroadcastEveryRoot*:*AllgatherVarying*:*Barrier*'
  gtest "neighbor_allreduce static and dynamic (mpi_neighbor_test subset)" "$neighbor" \
    '*StaticTopologies*:*DynamicOnePeer*:*Hierarchical*'
  gtest "windows: put, accumulate, get, mutex (mpi_window_test subset)" "$windows" \
    '*PutLands*:*WeightsSelfWeightGet*:*ConcurrentAccumulates*'
fi

# --- A Python optimizer -------------------------------------------------------------
if [[ $suite == full && -n $python_dir && -d $python_dir/starling ]]; then
  # The ranks start in mpirun's directory (pytest finds conftest.py there) and get
  # PYTHONPATH from starlingrun.
  pushd "$python_tests" >/dev/null
  PYTHONPATH=$python_dir PYTHONDONTWRITEBYTECODE=1 \
    job "Python optimizers against single-process references (test_optimizers.py)" \
    -H "$host_list" /usr/bin/python3 -m pytest -q --color=no -p no:cacheprovider -rs test_optimizers.py
  popd >/dev/null
  # Every rank ran the tests and none skipped. Ranks' lines can interleave in mpirun's
  # output, so count the summaries wherever they appear, not only at line starts.
  [[ $(grep -oE '(^|[^0-9])[0-9]+ passed in [0-9.]+s' "$WORK/out" | wc -l) == "$total" ]] ||
    fail "test_optimizers.py: expected '<N> passed' from each of $total ranks"
  echo "     each rank: $(grep -m1 -E '^[0-9]+ passed in ' "$WORK/out" || true)"
fi

# --- A Jupyter notebook on engines across the hosts (starlingrun start -H) -----------
# As a user does: `starlingrun start` on host1, then a notebook there (a real kernel,
# through nbclient) that connects with ipyparallel; notebook_check.py runs %%px cells on
# every engine and checks them against NumPy, ranks and hosts. `starlingrun stop` must
# then leave nothing on any host, whatever the notebook did.
notebook_test() {
  local py=/usr/bin/python3 profile=multihost rc=0 t0 t1 t2 t3 left
  local need="ipyparallel, nbclient, nbformat, ipykernel"
  if ! "$py" -c "import ipyparallel, nbclient, nbformat, ipykernel" >"$WORK/out" 2>&1; then
    if [[ ${CI:-} == true ]]; then
      fail "notebook across hosts: $py lacks one of $need (CI=true)"
    else
      echo "skip - notebook across hosts: $py lacks one of $need (packaging/install-deps.sh installs them)"
    fi
    return 0
  fi
  # Its own IPython directory: its profile and processes are told apart from any other.
  local ipython="$WORK/ipython"
  local nb_env=(env IPYTHONDIR="$ipython" JUPYTER_RUNTIME_DIR="$ipython/runtime" PYTHONPATH="$python_dir"
    STARLING_PYTHON="$py" PYTHONDONTWRITEBYTECODE=1 PYDEVD_DISABLE_FILE_VALIDATION=1)
  t0=$(now)
  mh_exec host1 "${nb_env[@]}" timeout -k 5 90 "$run" start -np "$total" -H "$host_list" --profile "$profile" \
    "${common[@]}" -x NOTEBOOK_CHECK=forwarded >"$WORK/out" 2>&1 || rc=$?
  t1=$(now)
  if [[ $rc != 0 ]]; then
    fail "notebook: starlingrun start -np $total -H $host_list (exit $rc)"
  else
    mh_exec host1 "${nb_env[@]}" timeout -k 5 120 "$py" "$here/notebook_check.py" "$profile" "$hosts" "$per_host" \
      >"$WORK/out" 2>&1 || rc=$?
    [[ $rc == 0 ]] || fail "notebook: %%px cells across the hosts (notebook_check.py exit $rc)"
  fi
  t2=$(now)
  # Always, so that a failure above leaves nothing either.
  local stop_rc=0
  mh_exec host1 "${nb_env[@]}" timeout -k 5 60 "$run" stop --profile "$profile" >"$WORK/stop" 2>&1 || stop_rc=$?
  t3=$(now)
  if [[ $stop_rc != 0 ]] || { [[ $rc == 0 ]] && [[ -s $WORK/stop ]]; }; then
    cp "$WORK/stop" "$WORK/out"
    fail "notebook: starlingrun stop (exit $stop_rc)"
  fi
  # Nothing of the cluster on any host (engines, nannies, controller, kernel, mpirun),
  # nor anywhere else with its IPython directory.
  local environ pid host on_hosts=" "
  left=""
  hosts_empty 5 2>"$WORK/left" || left=yes
  for host in "${MH_HOSTS[@]}"; do on_hosts+="$(mh_pids "$host" | tr '\n' ' ')"; done
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    if [[ $on_hosts != *" $pid "* ]] && grep -qzxF "IPYTHONDIR=$ipython" "$environ" 2>/dev/null; then
      left=yes
      echo "     left outside the hosts: $(ps -o pid=,args= -p "$pid" || true)" >>"$WORK/left"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if [[ -n $left ]]; then
    cp "$WORK/left" "$WORK/out"
    fail "notebook: processes left after starlingrun stop"
    for host in "${MH_HOSTS[@]}"; do mh_kill_host "$host"; done  # the kill checks need empty hosts
  elif [[ $rc == 0 ]]; then
    pass "notebook: starlingrun start -H (ranks on $hosts hosts) $(elapsed "$t0" "$t1") s, %%px cells checked against NumPy $(elapsed "$t1" "$t2") s, stop $(elapsed "$t2" "$t3") s, nothing left on any host"
    echo "     $(grep -m1 '^notebook_check: engines' "$WORK/out" || true)"
  fi
}
if [[ $suite == full && -n $python_dir && -d $python_dir/starling ]]; then notebook_test; fi

# --- A rank leaves early (rank 0, on host1) -----------------------------------------
# As on one host (tests/exit, docs/reliability.md): the job ends non-zero within the
# bound of rank 0's leaving, the ranks on the other hosts fail naming rank 0 and why,
# rank 0's own error is the first one shown, and nothing is left on any host. Rank 0
# prints time.monotonic() (CLOCK_MONOTONIC), which the namespace hosts share.
# exit_test NAME REASON FIRST PROGRAM ARGS...: REASON follows "rank 0 (pid ... on host
# host1)" in the peers' errors; FIRST ("" : none) the first error shown.
exit_test() {
  local name=$1 reason=$2 first=$3 rc=0
  shift 3
  # The goal, 2 s: measured 0.2-0.3 s (3.1-4.2 s when ORTE slept before its kills).
  mh_exec host1 env PYTHONPATH="$python_dir" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 \
    "$here/../exit/run_exit_test.py" --bound 2 --limit "$LIMIT" ${first:+--first "$first"} \
    --peer "rank 0 \\(pid [0-9]+ on host host1[^)]*\\) $reason" \
    -- "$run" "${common[@]}" -H "$host_list" "$@" >"$WORK/out" 2>&1 || rc=$?
  if [[ $rc != 0 ]]; then
    fail "$name: $(grep -m1 -A1 '^FAILED' "$WORK/out" | tail -n 1 | sed 's/^ *//')"
  elif ! hosts_empty 5; then
    fail "$name: the job ended but processes were left"
  else
    pass "$name: $(head -n 1 "$WORK/out")"
  fi
}
if [[ $suite == full ]]; then
  if [[ -x $exit_program ]]; then
    exit_test "rank 0 calls exit(1) (C, -H)" "exited \\(status 1\\) without destroying" "" \
      "$exit_program" exit1 2
  fi
  if [[ -n $python_dir && -d $python_dir/starling ]]; then
    exit_test "rank 0 raises at step 3, a window alive (Python, -H)" \
      "is exiting: uncaught RuntimeError: user bug on rank 0" "RuntimeError: user bug on rank 0" \
      /usr/bin/python3 "$here/../exit/exit_program.py" raise 3 window
  fi
fi

# --- A rank or a host dies mid-run ---------------------------------------------------
# The job (allreduce in a loop) must end with a non-zero exit, and every process of it
# on every host must be gone, within BOUND seconds of the kill.
BOUND=15

# kill_test WHAT: WHAT = rank (the last rank, on the last host), or a host name.
kill_test() {
  local what=$1 pid rc=0 t0 t1 victim took
  : >"$WORK/out"
  mh_exec host1 timeout -k 5 "$LIMIT" "$run" "${common[@]}" -H "$host_list" \
    "$program" loop 90 >"$WORK/out" 2>&1 &
  pid=$!
  bg_pids+=("$pid")
  for _ in $(seq 600); do
    [[ $(grep -c '^READY ' "$WORK/out" || true) == "$total" ]] && break
    sleep 0.05
  done
  if [[ $(grep -c '^READY ' "$WORK/out" || true) != "$total" ]]; then
    fail "kill $what: the job did not start in 30 s"
    kill -KILL "$pid" 2>/dev/null || true
    return 0
  fi
  sleep 0.5  # well into the loop
  t0=$(now)
  if [[ $what == rank ]]; then
    victim=$(sed -n "s/^READY rank=$((total - 1)) host=[^ ]* pid=\([0-9]*\)$/\1/p" "$WORK/out")
    kill -KILL "$victim"
    what="rank $((total - 1)) (on host$hosts)"
  else
    mh_kill_host "$what"
  fi
  wait "$pid" || rc=$?
  t1=$(now)
  if [[ $what == host1 ]]; then
    # starlingrun and mpirun died with host1: the other hosts must stop on their own.
    hosts_empty "$BOUND" && t1=$(now)
    took=$(elapsed "$t0" "$t1")
    if hosts_empty 0; then
      pass "host1 (where starlingrun runs) killed: every other host's daemon and ranks gone ${took} s later (bound ${BOUND} s)"
    else
      fail "host1 killed: ranks of other hosts still running ${BOUND} s later"
    fi
    return 0
  fi
  took=$(elapsed "$t0" "$t1")
  # (Under the bound, a 124 or 137 cannot come from timeout(1)'s own limit.)
  if [[ $rc == 0 ]]; then
    fail "$what killed: starlingrun exit $rc after ${took} s (expected the job's failure)"
  elif ! awk -v t="$took" -v b="$BOUND" 'BEGIN { exit !(t < b) }'; then
    fail "$what killed: starlingrun exited $rc only ${took} s later (bound ${BOUND} s)"
  elif ! hosts_empty 5; then
    fail "$what killed: starlingrun exited $rc after ${took} s but processes were left"
  else
    pass "$what killed: starlingrun exited $rc after ${took} s, nothing left on any host (bound ${BOUND} s)"
  fi
}

if [[ $suite == full ]]; then
  kill_test rank
  kill_test "host$hosts"
  kill_test host1
else
  kill_test "host$((hosts > 2 ? 3 : hosts))"
fi

if ((failures > 0)); then
  echo "# $failures check(s) failed"
  exit 1
fi
echo "# all checks passed"
