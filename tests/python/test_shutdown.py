"""Before init and after shutdown (a fresh process: shutdown is final)."""

import numpy as np
import pytest
import torch

import starling
import starling.torch as bf
from conftest import RANK, SIZE


def test_before_init_every_call_says_to_init():
    for call in (bf.size, bf.rank, bf.local_size, bf.barrier, lambda: bf.allreduce(torch.ones(2)),
                 lambda: bf.neighbor_allreduce(torch.ones(2)), lambda: bf.win_create(torch.ones(2), "w"),
                 bf.suspend, lambda: bf.set_topology(None)):
        with pytest.raises(ValueError, match=r"not been initialized; call starling.torch.init\(\) first"):
            call()
    assert bf.load_topology() is None and bf.in_neighbor_ranks() == []
    assert bf.is_initialized() is False


def test_use_after_shutdown():
    bf.init()
    ctx = starling.Context()
    x = torch.full((1000,), float(RANK))
    handle = bf.allreduce_nonblocking(x, average=False)
    assert bf.win_create(torch.zeros(3), "w")
    request = ctx.allreduce_nonblocking(np.ones(3))
    assert bf.is_initialized() is True
    bf.shutdown()  # frees the windows; the queued allreduce still finishes
    bf.shutdown()  # idempotent
    assert bf.is_initialized() is False
    assert torch.all(bf.synchronize(handle) == SIZE * (SIZE - 1) / 2)
    assert np.all(request.wait() == SIZE)

    for call in (bf.size, bf.barrier, lambda: bf.allreduce(x), lambda: bf.allreduce_nonblocking_(x),
                 lambda: bf.broadcast(x, 0), lambda: bf.neighbor_allreduce(x), lambda: bf.allgather(x),
                 lambda: bf.win_create(x, "v"), lambda: bf.win_put(x, "w"), lambda: bf.set_topology(),
                 lambda: bf.pair_gossip(x, 0), bf.resume, bf.init):
        with pytest.raises(ValueError, match="shut down .*call init\\(\\) once per process"):
            call()
    with pytest.raises(KeyError):
        bf.win_update("w")  # freed at shutdown

    ctx.close()
    with pytest.raises(starling.InvalidHandleError, match="already freed or destroyed"):
        ctx.allreduce(np.ones(3))
    with pytest.raises(starling.InvalidUsageError, match="finalized"):
        starling.Context()  # MPI was finalized with the last context
