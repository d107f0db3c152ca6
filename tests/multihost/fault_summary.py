#!/usr/bin/env python3
"""Reads what fault_jobs.sh's fj_run appended (RUN lines and the jobs' output) and prints
one line per job and a Markdown table of medians: kill -> PEER_FAILED on every survivor,
the repair, kill -> an exact allreduce over the survivors. Jobs of mode daemon (a host
dies with its Open MPI daemon) are reported as how the job ended.

  fault_summary.py RESULTS [--bound SECONDS]
--bound: exit 1 unless every job (but daemon ones) passed and every detection took
less than SECONDS, by the heartbeat where ranks were stopped (the ctest's check);
without it, exit 0."""
import argparse
import re
import statistics
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--bound", type=float)
    args = parser.parse_args()
    rows, bad = {}, []
    for block in open(args.results).read().split("RUN ")[1:]:
        head, *lines = block.splitlines()
        fields = dict(re.findall(r"(\w+)=(\S+)", head))
        label = re.search(r"label=(.*) np=", head).group(1)
        victims = [float(m) for m in re.findall(r"^VICTIM .*mono=(\S+)", block, re.M)]
        death = float(fields["kill_mono"]) if fields["kill_mono"] != "none" else min(victims, default=None)
        survivors = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in lines if line.startswith("SURVIVOR ")]
        if fields["mode"] == "daemon":
            how = next((line.strip() for line in lines if "daemon" in line.lower() and "PRTE" in line or
                        "failed to report back" in line), "no message")
            print(f"{label}: the job ended {float(fields['end_mono']) - death:.2f} s after the kill, mpirun rc "
                  f"{fields['rc']}, {len(survivors)} survivors reported ({how})")
            continue
        row = rows.setdefault(label, {"detect": [], "repair": [], "recover": [], "failed": 0})
        if fields["rc"] != "0" or death is None or not survivors or any(s.get("ok") != "1" for s in survivors):
            row["failed"] += 1
            bad.append(label)
            print(f"{label}: FAILED (mpirun rc {fields['rc']})\n  " + "\n  ".join(lines[-20:]))
            continue
        detect = max(float(s["detect_mono"]) - death for s in survivors)
        repair = max(float(s["repair_s"]) for s in survivors)
        recover = max(float(s["recovered_mono"]) - death for s in survivors)
        row["detect"].append(detect)
        row["repair"].append(repair)
        row["recover"].append(recover)
        print(f"{label}: detect {detect:.3f} s, repair {repair:.3f} s, kill -> exact allreduce {recover:.3f} s "
              f"({len(survivors)} survivors, dropped ranks {survivors[0]['failed']})")
        if args.bound is not None and detect >= args.bound:
            bad.append(label)
            print(f"  detection took {detect:.3f} s, bound {args.bound} s")
        # Nothing reports a stopped rank: only the heartbeat can have found it.
        if fields["mode"] == "stop" and any(s.get("by") != "heartbeat" for s in survivors):
            bad.append(label)
            print("  a survivor learned of the stopped ranks otherwise than by the heartbeat:\n    " +
                  "\n    ".join(line for line in lines if line.startswith("MESSAGE ")))

    def med(values):
        return f"{statistics.median(values):.3f} s (max {max(values):.3f})" if values else "-"

    print("\n| job | kill -> PEER_FAILED (every survivor) | repair | kill -> exact allreduce | runs ok |")
    print("|---|---|---|---|---|")
    for label, row in rows.items():
        n = len(row["detect"])
        print(f"| {label} | {med(row['detect'])} | {med(row['repair'])} | {med(row['recover'])} | "
              f"{n}/{n + row['failed']} |")
    return 1 if args.bound is not None and bad else 0


if __name__ == "__main__":
    sys.exit(main())
