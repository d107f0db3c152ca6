"""Interactive Starling: ipyparallel engines that are the ranks of one Starling job, for
Jupyter notebooks (BlueFog's `ibfrun`).

In a notebook::

    import starling.interactive as si
    rc = si.start(n=4)          # 4 engines, engine id == rank; %px / %%px are ready
    %%px
    import starling.torch as bf # or: import bluefog.torch as bf
    bf.init()
    ...
    si.stop()

From a shell: ``starlingrun start -np 4 [-H hosts] [--profile NAME]``, then
``ipyparallel.Client(profile=NAME)`` in the notebook, and ``starlingrun stop``. The
default profile is "bluefog", so notebooks written for ``ibfrun start`` connect
unchanged. Needs ipyparallel (7.1 or later)."""

from typing import Optional, Sequence

from ._cluster import DEFAULT_PROFILE, ClusterError, check, log_tail, read_state
from ._cluster import start as _start
from ._cluster import stop as _stop

__all__ = ["start", "stop", "interrupt", "status", "check", "ClusterError", "DEFAULT_PROFILE"]


def start(n: Optional[int] = None, *, hosts: Optional[str] = None, profile: str = DEFAULT_PROFILE,
          args: Sequence[str] = (), timeout: float = 60.0, activate: bool = True):
    """Starts n engines as the ranks of one job and returns a connected
    ipyparallel.Client (engine id == rank). hosts: starlingrun's -H ("h1:2,h2:2");
    args: any other starlingrun flags, as for a batch run (["--fault-tolerant"],
    ["--interface", "eth0"], ["-x", "OMP_NUM_THREADS=1"]). timeout: seconds for every
    engine to register; on failure (or timeout) whatever was started is stopped and
    ClusterError says why. activate: register %px / %%px for all engines (with
    interrupt relay and a dead-engine check) when inside IPython."""
    flags = list(args)
    if n is not None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be an int >= 1, not {n!r}")
        flags = ["-np", str(n)] + flags
    if hosts is not None:
        flags = ["-H", hosts] + flags
    client = _start(flags, profile=profile, timeout=timeout)
    if activate:
        from ._magics import activate as _activate
        _activate(client, profile)
    return client


def stop(profile: str = DEFAULT_PROFILE) -> bool:
    """Stops the engines (every rank, on every host) and the controller of profile.
    False when no cluster of that profile was running."""
    return _stop(profile)


def interrupt(client, targets=None) -> None:
    """Sends SIGINT to the engines (all, or the ranks in targets), on whatever host each
    runs, through its ipyparallel nanny: code running Python stops with KeyboardInterrupt."""
    import signal
    client.send_signal(signal.SIGINT, targets=targets, block=True)


def status(profile: str = DEFAULT_PROFILE) -> dict:
    """What is known about the profile's cluster: {"running", "n", "flags",
    "engines_log"} (the launcher's output: which rank died and how)."""
    from ._cluster import ENGINES, _alive
    state = read_state(profile)
    if state is None:
        return {"running": False, "n": 0, "flags": [], "engines_log": ""}
    return {"running": _alive(state["launcher_pid"], ENGINES), "n": state["n"], "flags": state["flags"],
            "engines_log": log_tail(profile)}
