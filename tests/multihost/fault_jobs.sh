# shellcheck shell=bash
# Jobs in which ranks die, on Open MPI 5 with ULFM, across the namespace hosts of
# netns_hosts.sh (source that first) or on this machine alone; sourced by
# fault_test.sh (ctest fault.multihost) and examples/benchmarks/fault_timings.sh.
#
#   fj_run LABEL HOSTS PER_HOST KILL PYTHON_DIR PREFIX OUT
#     One job of fault_program.py over HOSTS hosts x PER_HOST ranks (HOSTS 1: this
#     machine, loopback; else host1..HOSTS of mh_create, launched from host1). KILL:
#       rank    the lowest rank on the last host SIGKILLs itself
#       host    every rank of the last host is SIGKILLed (its Open MPI daemon lives)
#       daemon  the last host dies whole: its ranks and its daemon (prted)
#       stop    every rank of the last host is SIGSTOPped (a hung machine: nothing
#               reports it, the heartbeat must find it); once every survivor printed
#               DETECTED (or after 5 s) they are SIGKILLed, so that the repair completes
#     Appends to OUT a line "RUN label=... np=... mode=KILL rc=... kill_mono=...
#     end_mono=..." and the job's output (fault_summary.py reads it).
# The launcher reaches the hosts through the rsh agent with `--prtemca plm_ssh_agent`:
# PRRTE (Open MPI 5's launcher) ignores 4.1's plm_rsh_agent and falls back to ssh.

fj_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# CLOCK_MONOTONIC now, then signal SIG to the given PIDs (one clock for every namespace).
_fj_signal_now() {  # _fj_signal_now SIG PID...
  /usr/bin/python3 -c 'import os,sys,time; t=time.monotonic(); [os.kill(int(p),int(sys.argv[1])) for p in sys.argv[2:]]; print(f"{t:.6f}")' "$@"
}

# The TCP BTL without its put, as starlingrun --fault-tolerant runs it: with it, a rank
# that dies mid-message can leave a request on its endpoint that crashes a survivor
# (docs/reliability.md, "Nor the TCP BTL's put").
FJ_TCP_FLAGS=send,inplace,need-ack,need-csum

fj_run() {
  local label=$1 hosts=$2 per=$3 kill=$4 python_dir=$5 prefix=$6 out=$7
  local np=$((hosts * per)) mode=external kill_host="host$hosts" spec="" k log
  [[ $kill == rank ]] && mode=rank
  log=$(mktemp /tmp/starling-fault-job.XXXXXX)
  local args=(-x PYTHONPATH="$python_dir" /usr/bin/python3 "$fj_here/fault_program.py" --mode "$mode")
  if ((hosts == 1)); then
    kill_host=$(hostname)
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout -k 5 60 "$prefix/bin/mpirun" --with-ft ulfm -np "$np" --mca btl tcp,self \
      --mca btl_tcp_flags "$FJ_TCP_FLAGS" --mca btl_tcp_if_include lo --prtemca rmaps_default_mapping_policy :oversubscribe \
      "${args[@]}" --kill-host "$kill_host" >"$log" 2>&1 &
  else
    for ((k = 1; k <= hosts; k++)); do spec+="${spec:+,}host$k:$per"; done
    mh_exec host1 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout -k 5 60 "$prefix/bin/mpirun" --prefix "$prefix" --with-ft ulfm \
      --prtemca plm_ssh_agent "$(mh_agent)" -H "$spec" -np "$np" --map-by node \
      --mca btl tcp,self --mca btl_tcp_flags "$FJ_TCP_FLAGS" --mca btl_tcp_if_include eth0 \
      --prtemca oob_tcp_if_include eth0 \
      "${args[@]}" --kill-host "$kill_host" >"$log" 2>&1 &
  fi
  local job=$! kill_mono="" pid victims=()
  if [[ $mode == external ]]; then
    for ((k = 0; k < 600; k++)); do grep -q '^READY' "$log" && break; sleep 0.05; done
    for pid in $(mh_pids "$kill_host"); do  # the ranks only, or everything (daemon too)
      if [[ $kill == daemon ]] || grep -q fault_program "/proc/$pid/cmdline" 2>/dev/null; then victims+=("$pid"); fi
    done
    if [[ $kill == stop ]]; then
      kill_mono=$(_fj_signal_now 19 "${victims[@]}")
      local survivors=$((np - ${#victims[@]}))
      for ((k = 0; k < 100; k++)); do (($(grep -c '^DETECTED' "$log") >= survivors)) && break; sleep 0.05; done
      _fj_signal_now 9 "${victims[@]}" >/dev/null
    else
      kill_mono=$(_fj_signal_now 9 "${victims[@]}")
    fi
    if [[ $kill == daemon ]]; then mh_kill_host "$kill_host"; fi  # anything forked meanwhile
  fi
  local rc=0 ended
  wait "$job" || rc=$?
  ended=$(/usr/bin/python3 -c 'import time; print(f"{time.monotonic():.6f}")')
  { echo "RUN label=$label np=$np mode=$kill rc=$rc kill_mono=${kill_mono:-none} end_mono=$ended"; cat "$log"; } >>"$out"
  rm -f "$log"
}
