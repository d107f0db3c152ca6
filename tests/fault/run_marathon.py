#!/usr/bin/env python3
"""The failure marathon's driver: runs marathon_program under `mpirun --with-ft ulfm`
(Open MPI 5) and SIGKILLs a random rank every --interval seconds, for --cycles
kill-and-grow cycles; then asks the job to stop and checks what it left.

Each cycle: pick a random rank of the current members (DIR/members, written by rank 0
after every recovery) other than the protected ones, SIGKILL it, wait until the
survivors have repaired, grown a replacement and written the next cycle's members.

Checks at the end: mpirun exits 0; every member of the final job reports exact results
(DONE ... exact=1) and no process reports FAIL; the long-lived ranks' RSS grew by less
than --max-rss-growth MiB between the cycle-2 sample and the end; no process of the job is
left, no shared-memory file any of its processes had mapped, no file in the job's TMPDIR.
Prints detection (kill -> last survivor's PEER_FAILED), recovery (kill -> last
survivor repaired) and grow times: median and worst.

  run_marathon.py --mpiexec mpirun --np 6 --program marathon_program --cycles 200 --interval 2
  run_marathon.py --starlingrun starlingrun ...        (starlingrun --fault-tolerant, as users do)
  run_marathon.py ... --launch 'mh_exec host1 ...'   (a launch prefix: see failure_marathon.sh)
"""
import argparse
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from ulfm_launch import ULFM_MPIRUN_ARGS


def read_members(path):
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return None, {}
    if not lines or not lines[0].startswith("cycle "):
        return None, {}
    members = {}
    for line in lines[1:]:
        if line.strip():
            rank, pid = line.split()
            members[int(rank)] = int(pid)
    return int(lines[0].split()[1]), members


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def files_under(path):
    found = []
    for root, _, files in os.walk(path):
        found += [os.path.join(root, f) for f in files]
    return sorted(found)


def stats(values):
    if not values:
        return "none"
    return f"median {statistics.median(values):.3f} s, worst {max(values):.3f} s (n={len(values)})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpiexec", help="Open MPI 5's mpirun (or --starlingrun)")
    parser.add_argument("--starlingrun", help="start the job with starlingrun --fault-tolerant instead "
                        "(it runs the mpirun first on PATH)")
    parser.add_argument("--np", type=int, default=6)
    parser.add_argument("--program", required=True)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between a recovery and the next kill")
    parser.add_argument("--protect", default="0", help="ranks never killed (comma-separated)")
    parser.add_argument("--cycle-limit", type=float, default=60.0, help="seconds a kill-and-grow cycle may take")
    parser.add_argument("--limit", type=float, default=3600.0, help="seconds the whole job may take")
    parser.add_argument("--max-rss-growth", type=float, default=16.0, help="MiB")
    parser.add_argument("--mpirun-args", default="", help="extra mpirun arguments (split as a shell would)")
    parser.add_argument("--launch", default="", help="prefix for the mpirun command line (e.g. a namespace host)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    if not args.mpiexec and not args.starlingrun:
        parser.error("give --mpiexec or --starlingrun")
    rng = random.Random(args.seed)
    protected = {int(r) for r in args.protect.split(",") if r.strip()}
    workdir = tempfile.mkdtemp(prefix="starling-marathon-")
    # The job's temporary files (Open MPI's session directories) go to a folder of its
    # own, which must be empty at the end (other jobs on the machine use /tmp too).
    job_tmp = os.path.join(workdir, "tmp")
    os.mkdir(job_tmp)
    members_path, log_path = os.path.join(workdir, "members"), os.path.join(workdir, "log")
    if args.starlingrun:  # as users start such a job: the launcher adds the ULFM flags
        launcher = [args.starlingrun, "--fault-tolerant", "-np", str(args.np)]
        if args.mpirun_args:
            launcher += ["--mpi-args", args.mpirun_args]
    else:
        launcher = [args.mpiexec, *ULFM_MPIRUN_ARGS, "-np", str(args.np), *shlex.split(args.mpirun_args)]
    command = [*shlex.split(args.launch), "timeout", "-k", "10", str(int(args.limit)), *launcher, args.program, workdir]
    env = dict(os.environ, PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe", TMPDIR=job_tmp)
    out_path = os.path.join(workdir, "mpirun.out")
    start = time.monotonic()
    with open(out_path, "w") as out:
        job = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    problems, kills, seen_pids = [], [], set()
    cycle = None
    deadline = time.monotonic() + 120
    while cycle is None and time.monotonic() < deadline and job.poll() is None:
        cycle, members = read_members(members_path)
        time.sleep(0.05)
    if cycle is None:
        problems.append("the job never wrote its first members file")
    done = 0
    while not problems and done < args.cycles:
        time.sleep(args.interval)
        cycle, members = read_members(members_path)
        seen_pids.update(members.values())
        candidates = sorted(r for r in members if r not in protected)
        rank = rng.choice(candidates)
        pid = members[rank]
        kill_mono = time.monotonic()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            problems.append(f"cycle {cycle}: rank {rank} (pid {pid}) was already gone")
            break
        kills.append((cycle, rank, pid, kill_mono))
        cycle_deadline = time.monotonic() + args.cycle_limit
        while time.monotonic() < cycle_deadline and job.poll() is None:
            now, members = read_members(members_path)
            if now is not None and now > cycle:
                break
            time.sleep(0.02)
        else:
            problems.append(f"cycle {cycle}: no recovery within {args.cycle_limit} s of killing rank {rank} (pid {pid})"
                            + (f"; mpirun exited with {job.poll()}" if job.poll() is not None else ""))
            break
        seen_pids.update(members.values())
        done += 1
        if done % 10 == 0 or done == args.cycles:
            print(f"  {done} cycles, {time.monotonic() - start:.0f} s", flush=True)
    open(os.path.join(workdir, "stop"), "w").close()
    try:
        rc = job.wait(timeout=max(10.0, args.limit - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        job.kill()
        rc = job.wait()
    took = time.monotonic() - start
    if rc != 0:
        problems.append(f"mpirun exited with {rc} (124/137: the job did not end within {args.limit:.0f} s)")

    log = open(log_path).read().splitlines() if os.path.exists(log_path) else []
    records = [(line.split()[0], dict(re.findall(r"(\w+)=(\S+)", line)), line) for line in log]
    for kind, _, line in records:
        if kind == "FAIL":
            problems.append(line)
    # A rank may only die of the driver's SIGKILL (not, say, of SIGPIPE).
    for match in re.finditer(r"exited on\s+signal (\d+) \(([^)]*)\)", open(out_path, errors="replace").read()):
        if match.group(1) != "9":
            problems.append(f"a process of the job died of signal {match.group(1)} ({match.group(2)})")
    _, final = read_members(members_path)
    finals = [f for kind, f, _ in records if kind == "DONE"]
    if len(finals) != args.np:
        problems.append(f"{len(finals)} DONE lines, expected {args.np} (one per member of the final job)")
    for f in finals:
        if f.get("exact") != "1" or f.get("destroy") != "0":
            problems.append(f"rank {f.get('rank')}: exact={f.get('exact')} destroy={f.get('destroy')}")
    rss_notes = []
    for f in finals:
        print(f"  rank {f.get('rank')} (joined={f.get('joined')}): {f.get('shm_deleted_maps')} mapped shared-memory "
              f"files of dead peers, {f.get('shm_deleted_rss_kib')} KiB resident")
        if f.get("joined") == "0" and float(f.get("rss_start_mib", 0)) > 0:
            growth = float(f["rss_end_mib"]) - float(f["rss_start_mib"])
            rss_notes.append(f"rank {f['rank']} {f['rss_start_mib']} -> {f['rss_end_mib']} MiB")
            if growth > args.max_rss_growth:
                problems.append(f"rank {f['rank']}'s RSS grew by {growth:.1f} MiB (limit {args.max_rss_growth})")

    # Detection, recovery and grow times per cycle (kills are numbered by the cycle
    # they interrupted; DETECT lines carry the cycle the survivor was in).
    detections, recoveries, grows = [], [], []
    joined_pids = {int(f["pid"]) for kind, f, _ in records if kind == "JOINED"}
    by_kind = {"first-job": [], "grown": []}
    worst = []
    for index, (cycle, rank, pid, kill_mono) in enumerate(kills):
        end = kills[index + 1][3] if index + 1 < len(kills) else float("inf")
        detect = [float(f["mono"]) for kind, f, _ in records
                  if kind == "DETECT" and kill_mono <= float(f["mono"]) < end]
        repaired = [float(f["mono"]) for kind, f, _ in records
                    if kind == "REPAIRED" and kill_mono <= float(f["mono"]) < end]
        grown = [float(f["grow_s"]) for kind, f, _ in records
                 if kind == "GROWN" and kill_mono <= float(f["mono"]) < end]
        if detect:
            detections.append(max(detect) - kill_mono)
            by_kind["grown" if pid in joined_pids else "first-job"].append(max(detect) - kill_mono)
            worst.append((max(detect) - kill_mono, cycle, rank, pid in joined_pids))
        if repaired:
            recoveries.append(max(repaired) - kill_mono)
        if grown:
            grows.append(max(grown))
        sizes = [int(f["size"]) for kind, f, _ in records
                 if kind == "REPAIRED" and kill_mono <= float(f["mono"]) < end]
        if sizes and min(sizes) < args.np - 1:
            problems.append(f"cycle {cycle}: one kill (rank {rank}) left {min(sizes)} of {args.np} ranks: "
                            f"{args.np - 1 - min(sizes)} more died with it")

    time.sleep(0.5)
    left = sorted(p for p in seen_pids if alive(p))
    if left:
        problems.append(f"processes of the job still running: {left}")
    # Every shared-memory file a process of the job had mapped (it logs them) is gone.
    shm = sorted({path for kind, f, _ in records if kind == "SHM" for path in f.get("paths", "").split(",") if path})
    shm_left = [path for path in shm if os.path.exists(path)]
    if shm_left:
        problems.append(f"{len(shm_left)} of the job's {len(shm)} shared-memory files left: {shm_left[:6]}")
    tmp_left = files_under(job_tmp)
    if tmp_left:
        problems.append(f"{len(tmp_left)} temporary files left: {tmp_left[:6]}")

    print(f"marathon: {args.np} ranks, {len(kills)} kills, {done} kill-and-grow cycles survived, "
          f"job took {took:.1f} s, mpirun rc {rc}")
    print(f"  kill -> PEER_FAILED on every survivor: {stats(detections)}")
    for kind, values in by_kind.items():
        print(f"    of which, a rank of the {kind}: {stats(values)}")
    print("    worst: " + ", ".join(f"{t:.3f} s (cycle {c}, rank {r}, {'grown' if g else 'first job'})"
                                    for t, c, r, g in sorted(worst)[-3:]))
    print(f"  kill -> repaired on every survivor:    {stats(recoveries)}")
    print(f"  grow (a replacement joins):            {stats(grows)}")
    if rss_notes:
        print("  RSS of long-lived ranks (cycle 2 -> end): " + "; ".join(rss_notes))
    print(f"  left behind: {len(left)} processes, {len(shm_left)} of {len(shm)} shared-memory files, "
          f"{len(tmp_left)} temporary files")
    print(f"  final job: {len(finals)} members, exact results on {sum(f.get('exact') == '1' for f in finals)}")
    if args.starlingrun:  # what the launcher said of the job's end
        for line in open(out_path).read().splitlines():
            if line.startswith("starlingrun:"):
                print("  " + line)
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems[:20]))
        print("---- mpirun output (tail)\n" + open(out_path).read()[-3000:])
        print("---- log (tail)\n" + "\n".join(log[-30:]))
        print(f"(files kept in {workdir})")
        return 1
    subprocess.run(["rm", "-rf", workdir])
    return 0


if __name__ == "__main__":
    sys.exit(main())
