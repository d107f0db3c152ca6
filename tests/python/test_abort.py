"""Context.abort(): a second context is aborted by rank 0 from another thread while its
main thread is blocked in a call that the other ranks never make; the session context
keeps the ranks in step."""

import threading
import time

import numpy as np
import pytest

import starling
import starling.torch as bf
from conftest import RANK, SIZE

ABORT_BOUND = 0.1  # seconds from abort() to the blocked call's error (measured: well under 0.01)


def abort_later(context, delay):
    """Aborts `context` from a new thread after `delay` s; returns (thread, [abort time])."""
    when = []

    def run():
        time.sleep(delay)
        when.append(time.monotonic())
        context.abort()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, when


def test_abort_releases_blocked_and_pending_calls(ctx):
    victim = starling.Context()
    x = np.ones(1024, dtype=np.float32)
    if RANK == 0 and SIZE > 1:
        pending = [victim.allreduce_nonblocking(x, "sum") for _ in range(3)]
        thread, when = abort_later(victim, 0.3)
        with pytest.raises(starling.AbortedError, match="allreduce 'blocked'.*abort") as info:
            victim.allreduce(x, "sum", name="blocked")
        returned = time.monotonic()
        thread.join()
        assert info.value.status == starling.AbortedError.status < 0
        assert returned - when[0] < ABORT_BOUND
        for request in pending:
            with pytest.raises(starling.AbortedError):
                request.wait()
    if RANK == 0:
        if SIZE == 1:
            victim.abort()
        start = time.monotonic()
        for call in (lambda: victim.allreduce(x), victim.barrier, lambda: victim.allreduce_nonblocking(x),
                     lambda: victim.window(np.zeros(4), "w")):
            with pytest.raises(starling.AbortedError, match="aborted"):
                call()
        assert time.monotonic() - start < ABORT_BOUND
        assert victim.rank == 0  # local queries still work
        victim.abort()  # idempotent
        start = time.monotonic()
        victim.close()  # local: never waits for peers
        assert time.monotonic() - start < 1.0
        with pytest.raises(starling.InvalidHandleError):
            victim.abort()
    ctx.barrier()
    if not victim.closed:
        victim.close()
    ctx.barrier()


def test_abort_while_a_window_exists(ctx):
    victim = starling.Context()
    window = victim.window(np.zeros(16, dtype=np.float64), "abort.w")
    ctx.barrier()
    victim.abort()  # every rank aborts its own context: nothing is waited for
    with pytest.raises(starling.AbortedError):
        window.put(np.ones(16))
    with pytest.raises(starling.AbortedError):
        window.update()
    window.free()  # local after an abort
    victim.close()
    ctx.barrier()


def test_errors_map_to_their_classes():
    assert starling.AbortedError.status == -13
    assert starling.PeerFailedError.status == -14
    assert issubclass(starling.PeerFailedError, starling.StarlingError)
    assert "abort" in bf.__all__ and callable(bf.abort)  # tested in test_abort_torch.py
