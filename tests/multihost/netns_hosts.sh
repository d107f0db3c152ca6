# shellcheck shell=bash disable=SC2016  # single quotes keep $ for the inner shell
# Several "hosts" on this machine, made of Linux network namespaces (sourced by
# run_tests.sh and by the benchmark scripts in examples/benchmarks/; needs root).
#
#   mh_create N [RATE]   hosts host1..hostN: namespace ${MH_PREFIX}-hK with eth0 =
#                        10.77.0.K/24, joined by a bridge in namespace ${MH_PREFIX}-sw;
#                        RATE (e.g. 1gbit, tc's syntax) caps each host's link in both
#                        directions with tbf (queue: MH_TBF_LATENCY, default 100ms).
#                        Nothing touches the machine's own namespace.
#   mh_exec HOST CMD...  runs CMD on HOST: in its namespace, in a UTS namespace of its
#                        own whose host name is HOST (so Open MPI and Starling see one
#                        machine per host).
#   mh_agent             path of the rsh agent (plm_rsh_agent) that reaches the hosts as
#                        ssh reaches real ones: a fresh login-like environment, the
#                        command run by /bin/sh.
#   mh_pids HOST         the processes in HOST's namespace.
#   mh_kill_host HOST    SIGKILLs every process in HOST's namespace (the host "dies").
#   mh_destroy           kills every process left in the namespaces (by PID), deletes
#                        them; safe to call twice and from a trap.
#   mh_bench_setup       the preamble of the benchmark scripts (examples/benchmarks/):
#                        exits 77 saying why where hosts cannot be made, clears settings
#                        that name this machine's interfaces or machine size, lets Open
#                        MPI run as root, and destroys the hosts when the script exits.
# Names carry the caller's PID and a random part, so parallel runs never collide.
# Latency: netem (tc's delay) does not exist in this kernel, so only the rate is limited.

MH_PREFIX=${MH_PREFIX:-starling-$$-$RANDOM}
MH_HOSTS=()
MH_DIR=""

# Exit status 0 when namespaces can be made here; otherwise prints why on stdout.
mh_available() {
  if [[ $(id -u) != 0 ]]; then echo "not root: network namespaces need root"; return 1; fi
  local tool
  for tool in ip tc unshare hostname; do
    command -v "$tool" >/dev/null || { echo "'$tool' is not installed"; return 1; }
  done
  local probe="${MH_PREFIX}-probe" why
  if ! why=$(ip netns add "$probe" 2>&1); then echo "ip netns add failed: $why"; return 1; fi
  if ! why=$(ip -n "$probe" link add eth0 type veth peer name p0 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "no veth pairs: $why"
    return 1
  fi
  if ! why=$(ip netns exec "$probe" unshare -u true 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "unshare -u failed: $why"
    return 1
  fi
  ip netns del "$probe"
}

_mh_ns() { echo "${MH_PREFIX}-h${1#host}"; }  # host3 -> <prefix>-h3

mh_create() {
  local n=$1 rate=${2:-} k sw="${MH_PREFIX}-sw"
  MH_DIR=$(mktemp -d "/tmp/starling-multihost.XXXXXX")
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((k = 1; k <= n; k++)); do
    local host="host$k" ns
    ns=$(_mh_ns "$host")
    ip netns add "$ns"
    MH_HOSTS+=("$host")
    # The pair is made inside the host's namespace and its far end moved to the switch.
    ip -n "$ns" link add eth0 type veth peer name "port$k" netns "$sw"
    ip -n "$ns" addr add "10.77.0.$k/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$sw" link set "port$k" master br0 up
    if [[ -n $rate ]]; then
      # Up (host -> bridge) and down (bridge -> host). The burst is about 2 ms at the
      # rate (at least 64 KiB, so a full-size TSO segment always fits).
      local bits burst
      bits=$(_mh_bits "$rate")
      burst=$((bits / 8 / 500))
      ((burst < 65536)) && burst=65536
      tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency "${MH_TBF_LATENCY:-100ms}"
      tc -n "$sw" qdisc add dev "port$k" root tbf rate "$rate" burst "$burst" latency "${MH_TBF_LATENCY:-100ms}"
    fi
    # `ip netns exec` mounts /etc/netns/<ns>/hosts over /etc/hosts: every host knows
    # every other by name.
    mkdir -p "/etc/netns/$ns"
  done
  local hosts_file="$MH_DIR/hosts"
  echo "127.0.0.1 localhost" >"$hosts_file"
  for ((k = 1; k <= n; k++)); do echo "10.77.0.$k host$k" >>"$hosts_file"; done
  for ((k = 1; k <= n; k++)); do cp "$hosts_file" "/etc/netns/$(_mh_ns "host$k")/hosts"; done
  _mh_write_agent
}

# tc rate -> bits per second (kbit, mbit, gbit; plain numbers are bits).
_mh_bits() {
  local r=${1,,}
  case $r in
    *gbit) echo $((${r%gbit} * 1000000000)) ;;
    *mbit) echo $((${r%mbit} * 1000000)) ;;
    *kbit) echo $((${r%kbit} * 1000)) ;;
    *) echo "$r" ;;
  esac
}

_mh_write_agent() {
  local agent="$MH_DIR/rsh_agent" host hosts_case=""
  for host in "${MH_HOSTS[@]}"; do
    hosts_case+="  $host|10.77.0.${host#host}) ns=$(_mh_ns "$host"); host=$host ;;"$'\n'
  done
  # Like ssh, the far side gets a login-like environment (not ours) and runs the words
  # it is given as one shell command.
  cat >"$agent" <<AGENT
#!/bin/bash
# plm_rsh_agent for the namespace hosts: rsh_agent [options] HOST COMMAND...
while [[ \$# -gt 0 && \$1 == -* ]]; do shift; done
host=\$1; shift
case \$host in
${hosts_case}  *) echo "rsh_agent: no host named \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare -u env -i HOME=/root LOGNAME=root USER=root SHELL=/bin/sh \\
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
  /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$*"' "\$host" "\$*"
AGENT
  chmod +x "$agent"
}

mh_agent() { echo "$MH_DIR/rsh_agent"; }

mh_exec() {
  local host=$1 ns
  shift
  ns=$(_mh_ns "$host")
  ip netns exec "$ns" unshare -u /bin/sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

mh_pids() { ip netns pids "$(_mh_ns "$1")" 2>/dev/null; }

mh_kill_host() {
  local pid
  # Twice: a process may fork while the first round runs.
  for _ in 1 2; do
    for pid in $(mh_pids "$1"); do kill -KILL "$pid" 2>/dev/null || true; done
  done
}

mh_destroy() {
  local host ns
  for host in "${MH_HOSTS[@]}"; do mh_kill_host "$host"; done
  for host in "${MH_HOSTS[@]}"; do
    ns=$(_mh_ns "$host")
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  ip netns del "${MH_PREFIX}-sw" 2>/dev/null || true
  [[ -n $MH_DIR ]] && rm -rf "$MH_DIR"
  MH_HOSTS=()
  MH_DIR=""
}

mh_bench_setup() {
  local why
  why=$(mh_available) || { echo "cannot make namespace hosts here: $why" >&2; exit 77; }
  unset OMPI_MCA_btl_tcp_if_include OMPI_MCA_oob_tcp_if_include STARLING_NODES_PER_MACHINE \
    BLUEFOG_NODES_PER_MACHINE
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 STARLING_TIMEOUT_SECONDS=300
  trap mh_destroy EXIT
}
