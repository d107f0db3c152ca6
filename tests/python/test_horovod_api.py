"""Horovod's API in starling.torch (import starling.torch as hvd): Horovod-style
training against the equivalent explicit-allreduce loop, each operation against a
reference every rank computes, and the clear errors for what Starling lacks."""

import pytest
import torch
import torch.nn as nn

import starling.torch as hvd
from starling import UnsupportedError

hvd.init()
RANK, SIZE = hvd.rank(), hvd.size()


def data(rank, n=6, dtype=torch.float32):
    i = torch.arange(n, dtype=torch.float64)
    return ((i * 5 + rank * 3) % 7 - 3).to(dtype)


def test_layout_and_build_queries():
    assert hvd.is_initialized()
    assert (hvd.cross_rank(), hvd.cross_size()) == (hvd.machine_rank(), hvd.machine_size())
    assert hvd.mpi_built() and hvd.mpi_enabled()
    assert not (hvd.gloo_built() or hvd.ccl_built() or hvd.nccl_built())


@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_ops(op):
    stacked = torch.stack([data(r, dtype=torch.float64) for r in range(SIZE)])
    expected = {"Sum": stacked.sum(0), "Average": stacked.sum(0) / SIZE, "Min": stacked.min(0).values,
                "Max": stacked.max(0).values, "Product": stacked.prod(0)}[op]
    assert torch.equal(hvd.allreduce(data(RANK, dtype=torch.float64), op=getattr(hvd, op)), expected)
    t = data(RANK, dtype=torch.float64)
    assert torch.equal(hvd.synchronize(hvd.allreduce_async_(t, op=getattr(hvd, op))), expected)
    assert torch.equal(t, expected)


def test_allreduce_scaling_fp16_and_bluefog_forms_side_by_side():
    total = sum(data(r) for r in range(SIZE))
    assert torch.equal(hvd.allreduce(data(RANK), op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5), total)
    half = hvd.allreduce(data(RANK), op=hvd.Sum, compression=hvd.Compression.fp16)
    assert half.dtype == torch.float32 and torch.equal(half, total)
    # BlueFog's positional form: average=False sums
    assert torch.equal(hvd.allreduce(data(RANK), False), total)
    assert torch.equal(hvd.allreduce(data(RANK)), total / SIZE)
    assert [torch.equal(a, b) for a, b in zip(hvd.grouped_allreduce([data(RANK), 2 * data(RANK)], op=hvd.Sum),
                                              [total, 2 * total])] == [True, True]


def test_allgather_broadcast_objects():
    gathered = hvd.allgather(torch.full((RANK + 1, 2), float(RANK)))
    assert torch.equal(gathered, torch.cat([torch.full((r + 1, 2), float(r)) for r in range(SIZE)]))
    assert torch.equal(hvd.broadcast(data(RANK), root_rank=SIZE - 1), data(SIZE - 1))
    assert hvd.broadcast_object({"epoch": RANK, "name": "x" * RANK}, root_rank=0) == {"epoch": 0, "name": ""}
    assert hvd.allgather_object(("r", RANK)) == [("r", r) for r in range(SIZE)]


def test_alltoall_and_reducescatter():
    out = hvd.alltoall(torch.arange(2.0 * SIZE) + 100 * RANK)
    assert torch.equal(out, torch.tensor([100.0 * q + 2 * RANK + i for q in range(SIZE) for i in range(2)]))
    splits = [q + 1 for q in range(SIZE)]  # rank q gets q+1 rows from everyone
    rows = torch.arange(float(sum(splits))).reshape(-1, 1) + 100 * RANK
    out, received = hvd.alltoall(rows, splits=splits)
    start = sum(splits[:RANK])
    assert received.tolist() == [RANK + 1] * SIZE
    assert torch.equal(out, torch.cat([rows[start:start + RANK + 1] - 100 * RANK + 100 * q for q in range(SIZE)]))
    whole = torch.stack([data(r, 3 * SIZE + 1) for r in range(SIZE)]).sum(0) / SIZE
    mine = hvd.reducescatter(data(RANK, 3 * SIZE + 1).reshape(-1, 1))
    counts = [3 + (1 if r < 1 else 0) for r in range(SIZE)]
    begin = sum(counts[:RANK])
    assert torch.equal(mine.reshape(-1), whole[begin:begin + counts[RANK]])


@pytest.mark.skipif(SIZE < 3, reason="a proper process set needs 3 ranks")
def test_process_set():
    pytest.importorskip("mpi4py")
    ps = hvd.add_process_set([0, 2])
    if ps.included():
        assert ps.size() == 2
        assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=ps), torch.full((2,), 2.0))
    else:
        with pytest.raises(ValueError, match="not in process set"):
            hvd.allreduce(torch.ones(2), process_set=ps)
    hvd.remove_process_set(ps)


def test_what_starling_lacks_fails_clearly():
    with pytest.raises(UnsupportedError, match="Adasum"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    with pytest.raises(UnsupportedError, match="elastic"):
        hvd.elastic.run
    with pytest.raises(UnsupportedError, match="SyncBatchNorm"):
        hvd.SyncBatchNorm(4)
    assert 0 <= hvd.join() < SIZE


# ---- Horovod-style training against the explicit-allreduce loop --------------------------------
def make_model():
    torch.manual_seed(RANK)  # different on every rank: broadcast_parameters must fix that
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))


def batches(steps):
    g = torch.Generator().manual_seed(7 + RANK)
    return [(torch.randn(8, 5, generator=g), torch.randn(8, 2, generator=g)) for _ in range(steps)]


def horovod_style(steps, passes, op=hvd.Average, compression=hvd.Compression.none):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), compression=compression,
                                   backward_passes_per_step=passes, op=op)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    losses = []
    data_ = batches(steps * passes)
    for step in range(steps):
        opt.zero_grad()
        for x, y in data_[step * passes:(step + 1) * passes]:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
        if step % 2:  # the synchronize / skip_synchronize pattern (gradient clipping)
            opt.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 100.0)
            with opt.skip_synchronize():
                opt.step()
        else:
            opt.step()
        losses.append(hvd.allreduce(loss.detach(), name="avg_loss").item())  # metric averaging
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]), losses


def explicit_loop(steps, passes, average=True, fp16=False):
    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(hvd.broadcast(p, 0))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data_ = batches(steps * passes)
    for step in range(steps):
        opt.zero_grad()
        for x, y in data_[step * passes:(step + 1) * passes]:
            nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            p.grad.copy_(hvd.allreduce(p.grad.half() if fp16 else p.grad, average).float())
        if step % 2:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 100.0)
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("passes", [1, 2])
def test_distributed_optimizer_matches_explicit_allreduce(passes):
    trained, losses = horovod_style(20, passes)
    assert torch.equal(trained, explicit_loop(20, passes))
    assert isinstance(hvd.DistributedOptimizer(torch.optim.Adam(nn.Linear(2, 2).parameters())), torch.optim.Adam)
    everyone = hvd.allgather(trained.reshape(1, -1))
    assert all(torch.equal(row, trained) for row in everyone)  # the ranks agree
    assert len(losses) == 20 and all(l == losses for l in hvd.allgather_object(losses))  # averaged metric


def test_distributed_optimizer_sum_and_fp16():
    trained, _ = horovod_style(10, 1, op=hvd.Sum)
    assert torch.equal(trained, explicit_loop(10, 1, average=False))
    trained16, _ = horovod_style(10, 1, compression=hvd.Compression.fp16)
    assert torch.equal(trained16, explicit_loop(10, 1, fp16=True))  # gradients travel as float16


def test_distributed_optimizer_bad_arguments():
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="duplicate"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("w", model.weight), ("w", model.bias)])
    with pytest.raises(UnsupportedError, match="Adasum"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum)
