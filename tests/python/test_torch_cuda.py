"""starling.torch's CUDA plumbing on a machine without CUDA (CI): torch has no CUDA here,
so these tests stand in for it. GPU selection in init() runs against a mocked
torch.cuda; tensors that say they are on CUDA (a subclass whose is_cuda is True, with CPU
memory) check that torch's current stream is asked for and carried into each call, and
that the thread's Starling stream is restored afterwards. The CUDA operations themselves
run on the emulated device in test_gpu_emulated.py."""

import types

import numpy as np
import pytest
import torch

import starling
import starling.torch as bf
from starling.torch import mpi_ops
from conftest import RANK, SIZE, values
from test_core_neighbor import exp2_in_neighbors

FAKE_STREAM = 0x5EED


class CudaLabelled(torch.Tensor):
    """CPU memory whose is_cuda says True: takes the CUDA code paths of the binding."""

    @property
    def is_cuda(self):
        return True


@pytest.fixture
def torch_stream(monkeypatch):
    """torch.cuda.current_stream mocked: returns FAKE_STREAM, records the devices asked."""
    asked = []

    def current_stream(device=None):
        asked.append(device)
        return types.SimpleNamespace(cuda_stream=FAKE_STREAM)

    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    return asked


def labelled(rank, shape=(4, 3), dtype="float64"):
    return torch.from_numpy(values(rank, shape, dtype)).as_subclass(CudaLabelled)


def test_gpu_selection_follows_the_local_rank(monkeypatch):
    chosen = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mpi_ops._select_gpu(5)
    assert chosen == []  # no CUDA: nothing to choose (the CI machine)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    for local_rank in range(5):
        mpi_ops._select_gpu(local_rank)
    assert chosen == [0, 1, 2, 0, 1]


def test_operations_carry_torchs_current_stream(torch_stream):
    x = labelled(RANK)
    sources = exp2_in_neighbors(RANK, SIZE)
    y = bf.allreduce(x, average=False)
    assert np.allclose(y.numpy(), sum(values(r, (4, 3), "float64") for r in range(SIZE)))
    z = bf.synchronize(bf.neighbor_allreduce_nonblocking(x))
    expected = (values(RANK, (4, 3), "float64") + sum(values(j, (4, 3), "float64") for j in sources))
    assert np.allclose(z.numpy(), expected / (len(sources) + 1))
    g = bf.allgather(labelled(RANK, (RANK + 1, 2)))
    assert g.device == x.device and g.shape == (SIZE * (SIZE + 1) // 2, 2)
    assert len(torch_stream) >= 3 and all(d == x.device for d in torch_stream)
    assert starling.get_cuda_stream() == 0  # set for each call only, then restored


def test_windows_carry_torchs_current_stream(torch_stream):
    x = labelled(RANK, (3,))
    assert bf.win_create(x, "cuda.labelled")
    try:
        asked = len(torch_stream)
        assert bf.win_put(x, "cuda.labelled")
        bf.barrier()
        bf.win_update("cuda.labelled")
        assert len(torch_stream) >= asked + 2  # put exports afresh, update sets the stream
        assert starling.get_cuda_stream() == 0
        bf.barrier()
    finally:
        bf.win_free("cuda.labelled")


def test_an_explicit_stream_survives_the_calls(torch_stream):
    starling.set_cuda_stream(0x1234)
    try:
        bf.allreduce(labelled(RANK))
        starling.Context.allreduce(bf.mpi_ops.S.context, labelled(RANK))  # the neutral API too
        assert starling.get_cuda_stream() == 0x1234
    finally:
        starling.set_cuda_stream(None)
    assert starling.get_cuda_stream() == 0
