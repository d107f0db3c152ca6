#!/usr/bin/env python3
"""Runs a job in which rank 0 leaves early (an uncaught exception, exit(1), a return
without destroy, a shutdown while the others compute) and checks that it ends:

- under `timeout` (a hang fails), with a non-zero status, within --bound seconds of
  rank 0's "T_LEAVE <monotonic>" line (one host: the clock is shared);
- with --first REGEX: the first error line the user sees (stdout and stderr merged,
  as a terminal shows them) matches it (rank 0's own traceback, not a peer's error);
- with --peer REGEX: some other rank's error matches it (names rank 0 and why);
- with --peers K: K "PEER ... mono=<monotonic>" lines, each within --peers-bound
  (default --bound) of T_LEAVE: every other rank's own call failed in time, not only
  the job's end.

Prints the measured time from rank 0's departure to the job's end.
Usage: run_exit_test.py --bound 2 [--first RE] [--peer RE] -- mpirun -np 4 program args
"""
import argparse
import re
import subprocess
import sys
import time

ERROR_LINE = re.compile(r"^(Traceback|\w*Error|PEER |Exception in thread)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bound", type=float, default=2.0)
    parser.add_argument("--limit", type=int, default=60, help="seconds before timeout kills the job")
    parser.add_argument("--first", help="regex the first error line must match")
    parser.add_argument("--peer", help="regex some peer's error must match")
    parser.add_argument("--peers", type=int, help="how many ranks must report a failed call in time")
    parser.add_argument("--peers-bound", type=float, help="seconds after T_LEAVE (default: --bound)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run = subprocess.Popen(["timeout", "-k", "5", str(args.limit), *command], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    out, _ = run.communicate()
    end = time.monotonic()
    problems = []
    leave = [float(m) for m in re.findall(r"T_LEAVE ([0-9]+\.[0-9]+)", out)]
    took = end - leave[0] if leave else None
    if run.returncode in (124, 137):
        problems.append(f"the job hung: killed by timeout after {args.limit} s")
    elif run.returncode == 0:
        problems.append("the job exited 0")
    if not leave:
        problems.append("rank 0 printed no T_LEAVE line")
    elif took > args.bound:
        problems.append(f"the job ended {took:.2f} s after rank 0 left (bound {args.bound} s)")
    # Rank 0's stdout and the ranks' stderr reach mpirun on separate channels, so the
    # T_LEAVE line can land inside another line (seen: 'Exception in thread "main" ' then
    # T_LEAVE, then the exception class). It is one write ending in a newline: cut it out.
    shown_out = re.sub(r"T_LEAVE [0-9]+\.[0-9]+\n?", "", out)
    errors = [line for line in shown_out.splitlines() if ERROR_LINE.match(line)]
    if args.first:
        # A traceback's first line says nothing of whose it is: take the exception line.
        exceptions = [line for line in shown_out.splitlines()
                      if re.match(r"^(\w+\.)*\w*(Error|Exception)\b|^PEER ", line)]
        if not exceptions or not re.search(args.first, exceptions[0]):
            problems.append(f"the first error shown is {exceptions[0] if exceptions else None!r}, "
                            f"expected /{args.first}/")
    if args.peers is not None and leave:
        failed_at = [float(m) - leave[0] for m in re.findall(r"^PEER .*?mono=([0-9]+\.[0-9]+)", out, re.M)]
        peers_bound = args.bound if args.peers_bound is None else args.peers_bound
        late = [f"{t:.2f} s" for t in failed_at if t > peers_bound]
        if len(failed_at) != args.peers or late:
            problems.append(f"{len(failed_at)} ranks reported a failed call (expected {args.peers}); "
                            f"late (over {peers_bound} s): {late}")
    if args.peer and not re.search(args.peer, out):
        problems.append(f"no peer error matches /{args.peer}/")
    shown = f"{took:.3f} s" if took is not None else "?"
    print(f"rc {run.returncode}; rank 0 left -> job ended: {shown}; {len(errors)} error lines")
    for line in out.splitlines():
        if args.peer and re.search(args.peer, line):
            print("  peer:", line[:300])
            break
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems) + "\n---- output\n" + out[-6000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
