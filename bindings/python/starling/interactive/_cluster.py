"""Starting and stopping a cluster of ipyparallel engines that are the ranks of one
Starling job: an ipcontroller, then `starlingrun <flags> -- python -m
starling.interactive._engine PROFILE`, each process in a session of its own so that
stop() (or a failed start) ends it with everything it started. What a running cluster
is made of is kept in <profile dir>/starling/cluster.json, so another process
(`starlingrun stop`) can end it."""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Dict, List, Optional, Sequence, Tuple

DEFAULT_PROFILE = "bluefog"  # what BlueFog's ibfrun uses, so its notebooks connect unchanged
_LOCAL_HOSTS = {"localhost", "127.0.0.1"}
_children: Dict[int, subprocess.Popen] = {}  # started by this process: reaped on stop


class ClusterError(RuntimeError):
    """The cluster could not be started, or lost engines (the message says which and why)."""


def profile_dir(profile: str) -> str:
    from IPython.paths import get_ipython_dir
    return os.path.join(get_ipython_dir(), f"profile_{profile}")


def _state_path(profile: str) -> str:
    return os.path.join(profile_dir(profile), "starling", "cluster.json")


def log_path(profile: str, what: str) -> str:
    return os.path.join(profile_dir(profile), "starling", f"{what}.log")


def read_state(profile: str) -> Optional[dict]:
    try:
        with open(_state_path(profile)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def log_tail(profile: str, what: str = "engines", lines: int = 15) -> str:
    try:
        with open(log_path(profile, what), errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def parse_flags(flags: Sequence[str]) -> Tuple[Optional[int], List[str]]:
    """The rank count (-np, else the sum of -H's slots) and the hosts named by -H, from
    starlingrun flags; the launcher checks everything else itself."""
    n, hosts = None, []
    for i, word in enumerate(flags):
        value = flags[i + 1] if i + 1 < len(flags) else ""
        if word in ("-np", "-n", "--num-proc"):
            if not value.isdigit() or int(value) < 1:
                raise ClusterError(f"{word} needs a rank count >= 1, not {value!r}")
            n = int(value)
        elif word in ("-H", "--hosts"):
            hosts += [entry.partition(":")[0] for entry in value.split(",")]
            if n is None and all(e.partition(":")[2].isdigit() for e in value.split(",")):
                n = sum(int(e.partition(":")[2]) for e in value.split(","))
        elif word == "--hostfile":
            hosts.append("(hostfile)")
    return n, hosts


def _interface_address(flags: Sequence[str]) -> Optional[str]:
    """The IPv4 address of this machine on starlingrun's --interface (a name or a CIDR
    subnet; the first that matches), where the engines of other hosts reach the
    controller. None without --interface or a match (ipyparallel then uses the host name)."""
    import ipaddress
    import psutil
    wanted = [flags[i + 1] for i, word in enumerate(flags[:-1]) if word == "--interface"]
    if not wanted:
        return None
    addresses = [(name, a.address) for name, entries in psutil.net_if_addrs().items()
                 for a in entries if a.family == socket.AF_INET]
    for item in wanted[-1].split(","):
        for name, address in addresses:
            try:
                if name == item or ("/" in item and ipaddress.ip_address(address) in ipaddress.ip_network(item, strict=False)):
                    return address
            except ValueError:
                pass
    return None


def _alive(pid: int, marker: str) -> bool:
    """pid runs and is ours (its command line has marker): pids are reused."""
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def _end(pid: int, marker: str, sig: int, grace: float) -> None:
    """sig to pid, then SIGKILL to its session after grace seconds if it still runs."""
    if not _alive(pid, marker):
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid, marker):
        time.sleep(0.05)
    if _alive(pid, marker):
        try:
            os.killpg(pid, signal.SIGKILL)  # the session leader's group: it and its children
        except ProcessLookupError:
            pass
    child = _children.pop(pid, None)
    if child is not None:
        child.wait()


def _net_namespace(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""  # gone (no match); where none is readable, every process matches


def _carrying(token: str) -> List[int]:
    """Pids of this machine's processes whose environment has STARLING_IPP_CLUSTER=token:
    everything the cluster started here, the engines' nannies included (ipyparallel
    starts each in a session of its own, out of reach of the launcher's signals).
    Only those in this process's network namespace: where hosts are namespaces (or
    containers) sharing one /proc, another host's engines are not ours to kill; they
    end with their job (mpirun), their nannies with them."""
    mark, found = f"STARLING_IPP_CLUSTER={token}".encode(), []
    here = _net_namespace("self")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read().split(b"\0") and _net_namespace(pid) == here:
                    found.append(int(pid))
        except OSError:
            pass
    return [pid for pid in found if pid != os.getpid()]


def _end_carrying(token: str, grace: float) -> None:
    """SIGTERM to what still carries token, SIGKILL to what is left after grace seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _carrying(token)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = _carrying(token)
        if not pids:
            return


def _launcher_command() -> List[str]:
    """starlingrun: the one inside this package (through starling._launcher, which picks
    the environment's mpirun for a wheel), else STARLING_STARLINGRUN, else PATH's."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.access(os.path.join(here, "starlingrun"), os.X_OK):
        return [sys.executable, "-m", "starling._launcher"]
    named = os.environ.get("STARLING_STARLINGRUN")
    if named:
        return [named]
    return ["starlingrun"]


def _spawn(command: List[str], profile: str, what: str, env: Dict[str, str]) -> subprocess.Popen:
    log = open(log_path(profile, what), "ab")
    with log:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True)
    _children[child.pid] = child
    return child


CONTROLLER = "ipyparallel.controller"
ENGINES = "starling.interactive._engine"


def stop(profile: str = DEFAULT_PROFILE) -> bool:
    """Ends the cluster of this profile (engines first, then the controller) and removes
    its connection files. Returns False when none was running."""
    state = read_state(profile)
    if state is None:
        return False
    # The launcher stops mpirun and every rank (SIGKILL after its own 5 s of grace).
    _end(state["launcher_pid"], ENGINES, signal.SIGTERM, 8.0)
    _end_carrying(state["token"], 3.0)  # the nannies of this host's engines
    _end(state["controller_pid"], CONTROLLER, signal.SIGTERM, 3.0)
    security = os.path.join(profile_dir(profile), "security")
    for name in ("ipcontroller-engine.json", "ipcontroller-client.json"):
        try:
            os.unlink(os.path.join(security, name))
        except FileNotFoundError:
            pass
    os.unlink(_state_path(profile))
    return True


def start(flags: Sequence[str], profile: str = DEFAULT_PROFILE, timeout: float = 60.0,
          python: Optional[str] = None):
    """Starts the cluster and returns a connected ipyparallel Client whose engine ids are
    the ranks 0..n-1. flags: starlingrun's own (-np, -H, --interface, --fault-tolerant, -x,
    ...), as for a batch run. On any failure everything started is stopped again."""
    n, hosts = parse_flags(flags)
    if n is None:
        raise ClusterError("the number of ranks is missing: give -np N (or -H host:slots,...)")
    if "--" in flags or any(not f.startswith("-") and (i == 0 or not flags[i - 1].startswith("-"))
                            for i, f in enumerate(flags)):
        raise ClusterError(f"starlingrun start takes launcher flags only, not a program: {' '.join(flags)}")
    import ipyparallel  # after the checks: a usage error answers at once

    state = read_state(profile)
    if state is not None:
        if _alive(state["launcher_pid"], ENGINES) or _alive(state["controller_pid"], CONTROLLER):
            raise ClusterError(f"a cluster of profile {profile!r} is running already (n={state['n']}); "
                               f"stop it first: starlingrun stop --profile {profile}")
        stop(profile)  # leftovers of one that died
    os.makedirs(os.path.dirname(_state_path(profile)), exist_ok=True)
    security = os.path.join(profile_dir(profile), "security")
    engine_file = os.path.join(security, "ipcontroller-engine.json")
    for name in (engine_file, os.path.join(security, "ipcontroller-client.json")):
        if os.path.exists(name):
            os.unlink(name)
    for what in ("controller", "engines"):
        open(log_path(profile, what), "wb").close()

    python = python or sys.executable
    local = all(h in _LOCAL_HOSTS or h == os.uname().nodename for h in hosts)
    env = dict(os.environ)
    # Engines import the same starling as this process, on every host.
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    # Open MPI 4's 1 s between stopping the engines' signals, which starlingrun removes
    # for batch jobs: when an engine dies, the others then have time to send the notebook
    # Starling's error naming the dead rank before mpirun ends them.
    env.setdefault("OMPI_MCA_odls_base_sigkill_timeout", "1")
    # Heartbeat every second, an engine that misses 10 is dead: found in ~10 s, not 30.
    where = [f"--ip={'127.0.0.1' if local else '*'}"]
    location = None if local else _interface_address(flags)
    if location:
        where.append(f"--location={location}")
    if "IPYTHONDIR" in env:  # the same profile directory on every host (a shared file system)
        flags = list(flags) + ["-x", "IPYTHONDIR"]
    controller = _spawn([python, "-m", CONTROLLER, f"--profile={profile}", *where, "--ping=1000",
                         "--log-level=WARN"], profile, "controller", env)
    token = uuid.uuid4().hex
    env["STARLING_IPP_CLUSTER"] = token  # marks what the cluster starts (forwarded to every host)
    state = {"profile": profile, "token": token, "n": n, "flags": list(flags), "controller_pid": controller.pid, "launcher_pid": 0}
    with open(_state_path(profile), "w") as f:
        json.dump(state, f)
    deadline = time.monotonic() + timeout
    try:
        while not os.path.exists(engine_file):
            if controller.poll() is not None:
                raise ClusterError(f"the ipyparallel controller exited with status {controller.returncode}:\n"
                                   + log_tail(profile, "controller"))
            if time.monotonic() > deadline:
                raise ClusterError(f"the ipyparallel controller did not start within {timeout:g} s:\n"
                                   + log_tail(profile, "controller"))
            time.sleep(0.05)
        time.sleep(0.1)  # written, then closed
        with open(engine_file, "rb") as f:
            env["STARLING_IPP_ENGINE"] = base64.b64encode(f.read()).decode()
        launcher = _spawn(_launcher_command() + list(flags) + ["--", python, "-m", ENGINES, profile],
                          profile, "engines", env)
        state["launcher_pid"] = launcher.pid
        with open(_state_path(profile), "w") as f:
            json.dump(state, f)
        client = ipyparallel.Client(profile=profile, timeout=max(1.0, deadline - time.monotonic()))
        while len(client.ids) < n:
            if launcher.poll() is not None:
                raise ClusterError(f"the engines' job ended (starlingrun exit status {launcher.returncode}) "
                                   f"before {n} engines registered:\n" + log_tail(profile))
            if time.monotonic() > deadline:
                raise ClusterError(f"{len(client.ids)} of {n} engines registered within {timeout:g} s:\n"
                                   + log_tail(profile))
            client.spin()
            time.sleep(0.05)
        if sorted(client.ids) != list(range(n)):
            raise ClusterError(f"engine ids {sorted(client.ids)} are not the ranks 0..{n - 1}:\n" + log_tail(profile))
        return client
    except BaseException:
        stop(profile)
        raise


def check(client, profile: str = DEFAULT_PROFILE) -> None:
    """Raises ClusterError naming the ranks whose engines are gone, with the launcher's
    report (why they died), when the cluster has fewer engines than it started with or
    its job has ended."""
    state = read_state(profile)
    if state is None:
        return
    running = _alive(state["launcher_pid"], ENGINES)
    # A job that ended took every rank with it, whatever the controller has noticed yet.
    missing = sorted(set(range(state["n"])) - set(client.ids)) if running else list(range(state["n"]))
    if missing:
        launcher = "running" if running else "ended"
        raise ClusterError(f"engine(s) {missing} of {state['n']} (rank = engine id) died; the job has {launcher}. "
                           f"starlingrun reported:\n{log_tail(profile)}\n"
                           f"(restart with starling.interactive.stop() and start())")
