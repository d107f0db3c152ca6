"""The GIL is released while a rank waits in Starling: another Python thread keeps
running during a blocking call (BlueFog deadlocked here)."""

import threading
import time

import numpy as np
import torch

import starling.torch as bf
from conftest import RANK, SIZE


class Spinner:
    """Counts in a Python thread; the count only grows while this thread holds the GIL."""

    def __init__(self) -> None:
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.count += 1

    def __enter__(self) -> "Spinner":
        self._thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure(block):
    """(seconds block() took, spinner increments meanwhile)."""
    with Spinner() as spinner:
        start, before = time.perf_counter(), spinner.count
        block()
        return time.perf_counter() - start, spinner.count - before


def test_other_threads_run_while_waiting_for_a_late_rank(ctx):
    if SIZE == 1:
        # No peer to wait for: a long local operation instead (a 64 MiB out-of-place
        # allreduce, which copies).
        big = np.ones(16 << 20, dtype=np.float32)
        waited, progress = measure(lambda: ctx.allreduce(big))
        assert progress > 1000, f"the spinner advanced {progress} times in {waited:.3f} s"
        return
    late = SIZE - 1
    for wait in (ctx.barrier, bf.barrier, lambda: bf.synchronize(bf.allreduce_nonblocking(torch.ones(8)))):
        def block():
            if RANK == late:
                time.sleep(0.5)  # everyone else waits in Starling meanwhile
            wait()
        ctx.barrier()  # start together: under load, ranks leave the previous wait far apart
        waited, progress = measure(block)
        if RANK != late:
            # 0.2 s of slack for scheduling skew between the ranks on a loaded machine.
            assert waited > 0.3
            # Holding the GIL would freeze the spinner for the whole wait.
            assert progress > 1000, f"the spinner advanced {progress} times in {waited:.3f} s"
