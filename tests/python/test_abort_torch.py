"""starling.torch.abort() (a fresh process: it aborts the session's context). A neutral
Context keeps MPI alive and the ranks in step, so the job still ends normally."""

import threading
import time

import pytest
import torch

import starling
import starling.torch as bf
from conftest import RANK, SIZE


def test_bf_abort_releases_a_blocked_call_and_shutdown_is_local():
    keeper = starling.Context()
    bf.init()
    if RANK == 0 and SIZE > 1:
        timer = threading.Timer(0.3, bf.abort)
        timer.start()
        start = time.monotonic()
        with pytest.raises(starling.AbortedError, match="abort"):
            bf.allreduce(torch.ones(8), name="never_matched")  # the other ranks never call it
        timer.join()
        assert time.monotonic() - start < 5
        with pytest.raises(starling.AbortedError):
            bf.barrier()
    elif RANK == 0:
        bf.abort()
        with pytest.raises(starling.AbortedError):
            bf.allreduce(torch.ones(8))
    # The others shut down only after rank 0's abort: a rank that shuts down earlier is
    # reported to rank 0's blocked allreduce (PeerFailedError), before the abort.
    keeper.barrier()
    start = time.monotonic()
    bf.shutdown()
    assert time.monotonic() - start < 1.0 or RANK != 0
    keeper.barrier()
    keeper.close()
