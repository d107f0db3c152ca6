"""Runs a job under a time limit; when it hangs, prints where its processes are stuck.

A hang in CI is only worth something if it says where: before the job is killed, every
thread of every process of the job whose command line names the program is shown with
gdb ("thread apply all bt"), or, without gdb, with each thread's kernel wait channel.
"""
import os
import shutil
import signal
import subprocess


def run_with_stacks(command, limit, program, env=None):
    """Runs command (a list) for at most limit seconds; returns (returncode, stdout, stderr).

    On a hang the return code is 124 (as `timeout` gives) and stderr ends with the stacks of
    the processes whose command line contains program (a file name)."""
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                           start_new_session=True)
    try:
        out, err = job.communicate(timeout=limit)
        return job.returncode, out, err
    except subprocess.TimeoutExpired:
        pass
    stacks = describe_hung(program)
    try:
        os.killpg(job.pid, signal.SIGTERM)
        out, err = job.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = job.communicate()
    # A rank mpirun left behind (it was not in the session's process group) is ended too.
    for pid in matching_pids(program):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return 124, out, err + "\n---- stacks of the hung job\n" + stacks


def matching_pids(program):
    name = os.path.basename(program).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        # The program itself or an interpreter running it; not mpirun or timeout naming it.
        if any(os.path.basename(a) == name for a in argv[:2]) and b"mpirun" not in argv[0] \
                and os.path.basename(argv[0]) != b"timeout":
            pids.append(int(entry))
    return sorted(pids)


def describe_hung(program):
    gdb = shutil.which("gdb")
    parts = []
    for pid in matching_pids(program):
        parts.append(f"== pid {pid}")
        if gdb:
            try:
                run = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                                      "-ex", "thread apply all bt 30"], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, timeout=60)
                parts.append("\n".join(line for line in run.stdout.splitlines()
                                       if line.startswith(("#", "Thread"))))
                continue
            except subprocess.TimeoutExpired:
                parts.append("(gdb did not answer within 60 s)")
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int) if os.path.isdir(f"/proc/{pid}/task") else []:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f, open(f"/proc/{pid}/task/{tid}/wchan") as w:
                    parts.append(f"thread {tid} {f.read().strip()}: waits in {w.read().strip() or 'user space'}")
            except OSError:
                pass
    return "\n".join(parts) if parts else "(no process of the job was left)"
