#!/usr/bin/env python3
"""Runs a growing job (grow_program, or a Python script) under `mpirun --with-ft ulfm`.

Checks: the job ends (under timeout) with status 0, exactly one MEMBER line per member
of the grown context with ok=1, exactly --joined of them from processes that joined
(joined=1), and their ranks are 0..size-1 once each; with --left, that many LEFT lines
(ranks that left in a shrink). Prints the time the grow took.

A job that fails with one of the launcher's own errors (LAUNCHER_DEFECTS: Open MPI 5.0's
PRRTE loses a spawned job under load, before or after Starling's code runs; the library
of the previous release fails the same way, 2 runs in 20 beside two busy loops) is run
once more, saying so; the second run must pass on its own.

Usage: run_grow_test.py --mpiexec mpirun --np 3 --program grow_program --scenario replace
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import time

from hang_stacks import run_with_stacks
from ulfm_launch import ULFM_MPIRUN_ARGS

# Errors printed by Open MPI 5.0's launcher (PRRTE, its libevent), not by Starling.
LAUNCHER_DEFECTS = ("LAUNCHER JOB OBJECT NOT FOUND", "] Epoll MOD(")


def attempt(command, env, args):
    """One run: (the completed process, seconds, MEMBER lines parsed, problems found)."""
    start = time.monotonic()
    program = shlex.split(args.program)
    script = next((p for p in program if p.endswith(".py")), program[0])  # the ranks' processes
    returncode, out, err = run_with_stacks(command, args.limit, script, env=env)
    run = subprocess.CompletedProcess(command, returncode, out, err)
    took = time.monotonic() - start
    members = [dict(re.findall(r"(\w+)=(\S+)", line.split(" reason=")[0])) | {"line": line}
               for line in run.stdout.splitlines() if line.startswith("MEMBER ")]
    problems = []
    if run.returncode != 0:
        problems.append(f"mpirun exited with {run.returncode} (124: the job did not end within {args.limit} s)")
    problems += [f"member failed: {m['line']}" for m in members if m.get("ok") != "1"]
    if len(members) != args.members:
        problems.append(f"expected {args.members} MEMBER lines, got {len(members)}")
    ranks = sorted(int(m.get("rank", -1)) for m in members)
    if ranks != list(range(args.members)):
        problems.append(f"the members' ranks are {ranks}, expected 0..{args.members - 1}")
    joined = sum(m.get("joined") == "1" for m in members)
    if joined != args.joined:
        problems.append(f"{joined} member(s) joined, expected {args.joined}")
    left = [line for line in run.stdout.splitlines() if line.startswith("LEFT ")]
    if len(left) != args.left:
        problems.append(f"{len(left)} rank(s) left, expected {args.left}")
    return run, took, members, problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--program", required=True, help="the program, with arguments (split as a shell would)")
    parser.add_argument("--scenario", required=True, help="the program's last argument ('': none)")
    parser.add_argument("--members", type=int, required=True, help="size of the grown context")
    parser.add_argument("--joined", type=int, default=1)
    parser.add_argument("--left", type=int, default=0, help="ranks that leave in a shrink")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--export", action="append", default=[], metavar="NAME=VALUE",
                        help="passed to the first ranks with -x only (not in the launcher's environment); "
                             "every member, newcomers too, must see it (grow_program --expect-env)")
    args = parser.parse_args()

    exports = [w for spec in args.export for w in ("-x", spec)]
    command = [args.mpiexec, *ULFM_MPIRUN_ARGS, *exports, "-np", str(args.np), *shlex.split(args.program),
               *([args.scenario] if args.scenario else []), *(f"--expect-env={spec}" for spec in args.export)]
    env = dict(os.environ, PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe")
    run, took, members, problems = attempt(command, env, args)
    if problems and any(defect in run.stderr for defect in LAUNCHER_DEFECTS):
        print("the launcher failed the job (" + next(d for d in LAUNCHER_DEFECTS if d in run.stderr).strip("] (") +
              "; an Open MPI 5.0 launcher defect seen under load), running it once more; the first run:\n  " +
              "\n  ".join(problems))
        run, took, members, problems = attempt(command, env, args)
    grows = [float(m["grow_s"]) for m in members if m.get("joined") == "0" and "grow_s" in m]
    print(f"scenario {args.scenario}, {args.np} ranks -> {args.members}: job took {took:.2f} s, "
          f"mpirun rc {run.returncode}" + (f", grow took {max(grows):.3f} s" if grows else ""))
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        print("---- stdout\n" + run.stdout[-4000:] + "\n---- stderr\n" + run.stderr[-30000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
