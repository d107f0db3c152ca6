#!/usr/bin/env python3
"""Runs fault_program under `mpiexec --enable-recovery` and checks what the survivors saw.

With --enable-recovery Open MPI 4.1 neither kills the survivors of a dead rank nor tells
them (measured: their receives from it stay pending forever; mpirun exits 0 once they
are gone), so every survivor's error comes from Starling's own detection. Checks:
- the job ends (every mpiexec runs under timeout: a hang is a failure);
- exactly one VICTIM line and size - 1 SURVIVOR lines with ok=1 (status PEER_FAILED,
  the message names the victim's rank and pid, later calls fail fast, destroy returns);
- every survivor's error came within --bound seconds of the victim's death.
Prints the measured times (kill -> error per survivor).

Usage: run_fault_test.py --mpiexec mpirun --np 3 --program fault_program --scenario collective
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--program", required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--bound", type=float, default=5.0, help="seconds from death to every survivor's error")
    parser.add_argument("--limit", type=int, default=90, help="seconds the whole job may take")
    args = parser.parse_args()

    command = ["timeout", "-k", "5", str(args.limit), args.mpiexec, "--enable-recovery", "-np", str(args.np),
               "--oversubscribe", args.program, args.scenario]
    # A private session directory: mpirun start-up occasionally hung (about 1 in 30)
    # while other jobs on this machine shared the default one.
    session = tempfile.mkdtemp(prefix="starling_faults_")
    env = dict(os.environ, OMPI_MCA_orte_tmpdir_base=session, STARLING_FAULT_SYNC_DIR=session)
    start = time.monotonic()
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    finally:
        shutil.rmtree(session, ignore_errors=True)
    took = time.monotonic() - start
    out, err = run.stdout, run.stderr
    problems = []
    if run.returncode in (124, 137):
        problems.append(f"the job did not end within {args.limit} s (timeout, rc {run.returncode})")

    victims = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in out.splitlines() if line.startswith("VICTIM ")]
    survivors = [line for line in out.splitlines() if line.startswith("SURVIVOR ")]
    if len(victims) != 1:
        problems.append(f"expected one VICTIM line, got {len(victims)}")
    if len(survivors) != args.np - 1:
        problems.append(f"expected {args.np - 1} SURVIVOR lines, got {len(survivors)}")
    delays = []
    for line in survivors:
        fields = dict(re.findall(r"(\w+)=(\S+)", line.split(" message=")[0].split(" last_error=")[0]))
        if fields.get("ok") != "1":
            problems.append(f"survivor failed its checks: {line}")
            continue
        message = line.split(" message=", 1)[1]
        if victims:
            victim = victims[0]
            expected = f"rank {victim['rank']} (pid {victim['pid']} on host "
            if expected not in message:
                problems.append(f"rank {fields['rank']}'s message does not name '{expected}': {message}")
            delay = float(fields["mono"]) - float(victim["mono"])
            delays.append((int(fields["rank"]), delay, float(fields["destroy_s"])))
            if not 0 <= delay < args.bound:
                problems.append(f"rank {fields['rank']} got its error {delay:.3f} s after the death (bound {args.bound} s)")

    print(f"scenario {args.scenario}, {args.np} ranks: job took {took:.2f} s, mpiexec rc {run.returncode}")
    for rank, delay, destroy in sorted(delays):
        print(f"  rank {rank}: death -> error {delay:.3f} s, destroy {destroy:.3f} s")
    if delays:
        print(f"  max death -> error: {max(d for _, d, _ in delays):.3f} s")
    for line in survivors[:1]:
        print("  e.g.", line.split(" message=", 1)[-1][:400])
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        print("---- stdout\n" + out[-4000:] + "\n---- stderr\n" + err[-4000:])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
