"""`starlingrun start ...` and `starlingrun stop ...` (the launcher runs this module):

  starlingrun start [--profile NAME] [--start-timeout S] STARLINGRUN-FLAGS...
  starlingrun stop [--profile NAME]

start returns once every engine has registered (engine id == rank) and leaves the
cluster running; the notebook connects with ipyparallel.Client(profile=NAME)."""

import sys

from ._cluster import DEFAULT_PROFILE, ClusterError, log_path, start, stop

USAGE = """usage: starlingrun start -np N [-H hosts] [--profile NAME] [--start-timeout S] [starlingrun flags...]
       starlingrun stop [--profile NAME]
Starts (stops) ipyparallel engines as the N ranks of one Starling job, for Jupyter
notebooks: ipyparallel.Client(profile=NAME) connects; engine id == rank. NAME defaults
to "bluefog" (BlueFog's ibfrun), --ipython-profile is the same flag. Every other flag is
starlingrun's (see starlingrun --help): -H, --hostfile, --interface, --fault-tolerant,
-x, --mpi-args, --verbose. --start-timeout: seconds for every engine to register
(default 60)."""


def main(argv) -> int:
    if not argv or argv[0] not in ("start", "stop") or "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0 if argv and argv[0] in ("start", "stop") else 2
    command, rest = argv[0], argv[1:]
    profile, timeout, flags = DEFAULT_PROFILE, 60.0, []
    i = 0
    while i < len(rest):
        word = rest[i]
        if word in ("--profile", "--ipython-profile", "--start-timeout"):
            if i + 1 >= len(rest):
                print(f"starlingrun {command}: {word} needs a value", file=sys.stderr)
                return 2
            if word == "--start-timeout":
                try:
                    timeout = float(rest[i + 1])
                except ValueError:
                    print(f"starlingrun start: --start-timeout needs seconds, not {rest[i + 1]!r}", file=sys.stderr)
                    return 2
            else:
                profile = rest[i + 1]
            i += 2
            continue
        flags.append(word)
        i += 1
    try:
        if command == "stop":
            if flags:
                print(f"starlingrun stop: unexpected {' '.join(flags)}", file=sys.stderr)
                return 2
            if not stop(profile):
                print(f"starlingrun stop: no cluster of profile {profile!r} is running")
            return 0
        client = start(flags, profile=profile, timeout=timeout)
        ids = sorted(client.ids)
        client.close()
    except (ClusterError, ImportError) as error:
        print(f"starlingrun {command}: {error}", file=sys.stderr)
        return 1
    print(f"starlingrun start: {len(ids)} engines (ranks {ids[0]}..{ids[-1]}) of profile {profile!r} are running; "
          f"connect with ipyparallel.Client(profile={profile!r}); the ranks' output goes to "
          f"{log_path(profile, 'engines')}; end them with: starlingrun stop --profile {profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
