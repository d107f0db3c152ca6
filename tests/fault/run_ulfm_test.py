#!/usr/bin/env python3
"""Runs ulfm_program under `mpirun --with-ft ulfm` (Open MPI 5) and checks the survivors.

Checks: the job ends (under timeout) with mpirun's status 0; exactly the expected VICTIM
lines; one SURVIVOR line with ok=1 per survivor (the program asserts PEER_FAILED naming
the victim, the renumbering and exact results after the repair); every survivor's error
came within --bound seconds of the victim's death. Prints the measured times: death ->
error (detection) and death -> first successful operation after the repair (recovery).
--repeat N runs the job N times in a row; every run must pass (detection that is only
usually bounded is not bounded).

Usage: run_ulfm_test.py --mpiexec mpirun --np 3 --program ulfm_program --scenario allreduce
"""
import argparse
import os
import re
import shlex
import sys
import time

from hang_stacks import run_with_stacks
from ulfm_launch import ULFM_MPIRUN_ARGS


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--program", required=True, help="the program, with arguments (split as a shell would)")
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--bound", type=float, default=2.0, help="seconds from death to every survivor's error")
    parser.add_argument("--limit", type=int, default=60, help="seconds the whole job may take")
    parser.add_argument("--repeat", type=int, default=1, help="runs in a row, each of which must pass")
    parser.add_argument("--linger", type=float, default=None,
                        help="seconds survivors wait before destroying their context (the program's second argument)")
    args = parser.parse_args()
    failed_runs, detections, recoveries = 0, [], []
    for run in range(args.repeat):
        if args.repeat > 1:
            print(f"run {run + 1} of {args.repeat}:")
        ok, detect, recover = run_once(args)
        failed_runs += not ok
        detections += detect
        recoveries += recover
    if args.repeat > 1:
        detections.sort()
        print(f"{args.repeat} runs, {failed_runs} failed; death -> PEER_FAILED over all survivors: "
              + (f"median {detections[len(detections) // 2]:.3f} s, max {detections[-1]:.3f} s"
                 if detections else "none measured"))
    return 1 if failed_runs else 0


def run_once(args):

    victims_expected = 2 if args.scenario == "repair" else 1
    program = shlex.split(args.program)
    command = [args.mpiexec, *ULFM_MPIRUN_ARGS, "-np", str(args.np),
               *program, args.scenario, *([] if args.linger is None else [str(args.linger)])]
    env = dict(os.environ, PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe")
    start = time.monotonic()
    script = next((p for p in program if p.endswith(".py")), program[0])  # the ranks' processes
    returncode, out, err = run_with_stacks(command, args.limit, script, env=env)
    took = time.monotonic() - start
    problems = []
    if returncode != 0:
        problems.append(f"mpirun exited with {returncode} (124: the job did not end within {args.limit} s)")
    victims = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in out.splitlines() if line.startswith("VICTIM ")]
    for victim in victims:  # a stopped victim ("stopped") outlives a job that failed
        try:
            with open(f"/proc/{victim['pid']}/cmdline", "rb") as f:
                if os.path.basename(script).encode() in f.read():
                    os.kill(int(victim["pid"]), 9)
        except (OSError, KeyError, ValueError):
            pass
    survivors = [line for line in out.splitlines() if line.startswith("SURVIVOR ")]
    if len(victims) != victims_expected:
        problems.append(f"expected {victims_expected} VICTIM line(s), got {len(victims)}")
    if len(survivors) != args.np - victims_expected:
        problems.append(f"expected {args.np - victims_expected} SURVIVOR lines, got {len(survivors)}")
    detections, recoveries = [], []
    death = min((float(v["mono"]) for v in victims), default=None)
    for line in survivors:
        fields = dict(re.findall(r"(\w+)=(\S+)", line.split(" message=")[0].split(" reason=")[0]))
        if fields.get("ok") != "1":
            problems.append(f"survivor failed its checks: {line}")
            continue
        if death is None:
            continue
        if "pushsum_p_total" in fields:
            print(f"  rank {fields['rank']}: push-sum agrees on {fields['pushsum_value']} (survivors' p total "
                  f"{fields['pushsum_p_total']}; the old world's average was {fields['old_average']})")
        elif "pushsum_value" in fields:
            print(f"  rank {fields['rank']}: push-sum agrees on {fields['pushsum_value']}, win_put on "
                  f"{fields['winput_value']} (the survivors' initial average {fields['survivors_average']}, "
                  f"the old world's {fields['old_average']})")
        detect = float(fields["detect_mono"]) - death
        recover = float(fields["repaired_mono"]) - death
        detections.append(detect)
        recoveries.append(recover)
        if not 0 <= detect < args.bound:
            problems.append(f"rank {fields['rank']} got its error {detect:.3f} s after the death (bound {args.bound} s)")
    print(f"scenario {args.scenario}, {args.np} ranks: job took {took:.2f} s, mpirun rc {returncode}")
    if detections:
        print(f"  death -> PEER_FAILED: max {max(detections):.3f} s, min {min(detections):.3f} s")
        print(f"  death -> repaired and computing: max {max(recoveries):.3f} s")
    for line in survivors[:1]:
        print("  e.g.", line.split(" message=", 1)[-1][:300])
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        print("---- stdout\n" + out[-4000:] + "\n---- stderr\n" + err[-30000:])
        return False, detections, recoveries
    return True, detections, recoveries


if __name__ == "__main__":
    sys.exit(main())
