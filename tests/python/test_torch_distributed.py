"""The torch.distributed backend "starling" (starling.torch.distributed): every
collective against gloo and an independent reference on the same inputs, DDP against
DDP over gloo, decentralize() on the digits MLP, and bad input. Its own process (it
initializes torch.distributed); run at 2, 3 and 4 ranks."""

import contextlib
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import starling.torch.distributed as sdist
from starling import MismatchError, UnsupportedError

dist.init_process_group(backend="starling")
RANK, SIZE = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")
STARLING = dist.group.WORLD


def test_the_default_group_is_starling():
    assert dist.get_backend() == "starling"
    assert isinstance(STARLING, sdist.StarlingProcessGroup) or "starling" in str(dist.get_backend(STARLING))
    assert (RANK, SIZE) == (sdist.world_context().rank, sdist.world_context().size)


def data(rank, n=10, dtype=torch.float32, salt=0):
    """Integer-valued per-rank data every rank can recompute (exact in every order)."""
    i = torch.arange(n, dtype=torch.float64)
    return ((i * 7 + rank * 13 + salt) % 11 - 5).to(dtype)


def both(fn):
    """fn(group) on the starling and the gloo group; gloo's result or None where gloo
    does not have the operation."""
    mine = fn(STARLING)
    try:
        theirs = fn(GLOO)
    except RuntimeError as e:
        if not any(w in str(e).lower() for w in ("not support", "unsupported", "no support")):
            raise
        theirs = None
    return mine, theirs


def check(mine, theirs, reference):
    assert torch.equal(mine, reference), (mine, reference)
    if theirs is not None:
        assert torch.equal(mine, theirs), (mine, theirs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("op", ["SUM", "MIN", "MAX", "PRODUCT"])
def test_all_reduce(op, dtype):
    inputs = [data(r, dtype=dtype) + (6 if op == "PRODUCT" else 0) for r in range(SIZE)]
    stacked = torch.stack(inputs)
    reference = {"SUM": stacked.sum(0), "MIN": stacked.min(0).values, "MAX": stacked.max(0).values,
                 "PRODUCT": stacked.prod(0)}[op].to(dtype)

    def run(group):
        t = inputs[RANK].clone()
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op), group=group)
        return t
    check(*both(run), reference)


def test_all_reduce_average_and_async():
    t = data(RANK, dtype=torch.float64)
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    assert work.wait()
    assert torch.equal(t, torch.stack([data(r, dtype=torch.float64) for r in range(SIZE)]).sum(0) / SIZE)
    future = dist.all_reduce(torch.ones(3), async_op=True).get_future()
    assert torch.equal(future.wait()[0], torch.full((3,), float(SIZE)))


def test_all_reduce_non_contiguous():
    base = data(RANK, 24).reshape(4, 6)
    t = base.t()  # a transposed view
    dist.all_reduce(t)
    assert torch.equal(t, sum(data(r, 24).reshape(4, 6) for r in range(SIZE)).t())


@pytest.mark.parametrize("root", [0, -1])
def test_broadcast(root):
    root = root % SIZE

    def run(group):
        t = data(RANK, 7)
        dist.broadcast(t, src=root, group=group)
        return t
    check(*both(run), data(root, 7))


def test_all_gather():
    def run(group):
        outs = [torch.empty(3, 2) for _ in range(SIZE)]
        dist.all_gather(outs, data(RANK, 6).reshape(3, 2), group=group)
        return torch.stack(outs)
    check(*both(run), torch.stack([data(r, 6).reshape(3, 2) for r in range(SIZE)]))


def test_all_gather_into_tensor():
    def run(group):
        out = torch.empty(SIZE * 5, dtype=torch.float64)
        dist.all_gather_into_tensor(out, data(RANK, 5, torch.float64), group=group)
        return out
    check(*both(run), torch.cat([data(r, 5, torch.float64) for r in range(SIZE)]))


@pytest.mark.parametrize("op", ["SUM", "MAX", "AVG"])
def test_reduce_scatter_tensor(op):
    inputs = [data(r, 4 * SIZE, torch.float64) for r in range(SIZE)]
    stacked = torch.stack(inputs)
    whole = {"SUM": stacked.sum(0), "MAX": stacked.max(0).values, "AVG": stacked.sum(0) / SIZE}[op]

    def run(group):
        out = torch.empty(4, dtype=torch.float64)
        dist.reduce_scatter_tensor(out, inputs[RANK].clone(), op=getattr(dist.ReduceOp, op), group=group)
        return out
    check(*both(run), whole[4 * RANK:4 * RANK + 4])


def test_all_to_all_single_equal_and_uneven():
    def run(group):
        out = torch.empty(2 * SIZE)
        dist.all_to_all_single(out, data(RANK, 2 * SIZE), group=group)
        return out
    check(*both(run), torch.cat([data(q, 2 * SIZE)[2 * RANK:2 * RANK + 2] for q in range(SIZE)]))

    send, recv, inp, reference = uneven_all_to_all()

    def uneven(group):
        out = torch.empty(sum(recv), 3)
        dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send, group=group)
        return out
    check(*both(uneven), reference)


def uneven_all_to_all():
    """Rank q sends q + p + 1 rows of 3 to rank p: this rank's split sizes (send, recv),
    its input and the output expected."""
    def rows(q, p):
        return q + p + 1

    def rank_input(q):
        return data(q, 3 * sum(rows(q, p) for p in range(SIZE))).reshape(-1, 3)
    pieces = []
    for q in range(SIZE):
        start = sum(rows(q, p) for p in range(RANK))
        pieces.append(rank_input(q)[start:start + rows(q, RANK)])
    return ([rows(RANK, p) for p in range(SIZE)], [rows(q, RANK) for q in range(SIZE)], rank_input(RANK),
            torch.cat(pieces))


def test_all_to_all_lists_and_barrier():
    outs = [torch.empty(RANK + 1) for _ in range(SIZE)]
    dist.all_to_all(outs, [torch.full((q + 1,), float(RANK * 10 + q)) for q in range(SIZE)])
    for q in range(SIZE):
        assert torch.equal(outs[q], torch.full((RANK + 1,), float(q * 10 + RANK)))
    dist.barrier()


def test_reduce_gather_scatter():
    t = data(RANK)
    dist.reduce(t, dst=SIZE - 1)
    if RANK == SIZE - 1:
        assert torch.equal(t, sum(data(r) for r in range(SIZE)))
    else:
        assert torch.equal(t, data(RANK))
    outs = [torch.empty(10) for _ in range(SIZE)] if RANK == 0 else None
    dist.gather(data(RANK), outs, dst=0)
    if RANK == 0:
        assert torch.equal(torch.stack(outs), torch.stack([data(r) for r in range(SIZE)]))
    out = torch.empty(10)
    dist.scatter(out, [data(r, salt=3) for r in range(SIZE)] if RANK == 0 else None, src=0)
    assert torch.equal(out, data(RANK, salt=3))


def test_new_group_over_every_rank():
    group = dist.new_group(ranks=list(range(SIZE)), backend="starling")
    t = torch.full((3,), float(RANK))
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((3,), float(sum(range(SIZE)))))


@pytest.mark.skipif(SIZE < 3, reason="a proper subset needs 3 ranks")
def test_new_group_over_a_subset():
    pytest.importorskip("mpi4py")
    group = dist.new_group(ranks=[0, 2], backend="starling")
    if RANK in (0, 2):
        t = torch.full((2,), float(RANK + 1))
        dist.all_reduce(t, group=group)
        assert torch.equal(t, torch.full((2,), 4.0))
        assert dist.get_world_size(group) == 2


# ---- DDP -------------------------------------------------------------------------------------
def ddp_run(group, steps=50, device="cpu", dtype=torch.float32):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).to(device, dtype)
    ddp = nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(100 + RANK)  # each rank its own data
    for _ in range(steps):
        x = torch.randn(16, 8, generator=g).to(device, dtype)
        y = torch.randint(0, 3, (16,), generator=g).to(device)
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()


def test_ddp_matches_gloo():
    mine, theirs = ddp_run(STARLING), ddp_run(GLOO)
    if SIZE <= 2:  # a sum of two is the same in either order
        assert torch.equal(mine, theirs)
    else:
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
    # and the ranks agree
    gathered = [torch.empty_like(mine) for _ in range(SIZE)]
    dist.all_gather(gathered, mine)
    assert all(torch.equal(g, mine) for g in gathered)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (the device kit runs it)")
def test_ddp_on_cuda_matches_gloo_on_the_cpu():
    """DDP of a CUDA model over the starling backend (the staged or NCCL path), in
    float64: the CPU's result over gloo but for the order of a few additions."""
    device = torch.device("cuda", torch.cuda.current_device())
    mine = ddp_run(STARLING, device=device, dtype=torch.float64)
    theirs = ddp_run(GLOO, dtype=torch.float64)
    torch.testing.assert_close(mine, theirs, rtol=1e-9, atol=1e-10)
    gathered = [torch.empty_like(mine) for _ in range(SIZE)]
    dist.all_gather(gathered, mine)
    assert all(torch.equal(g, mine) for g in gathered)


def test_collectives_on_the_gpu():
    """The collectives torch.distributed users call, on CUDA tensors where there is a GPU
    (the staged or NCCL path; reduce_scatter and alltoall are NCCL's own there; on a real
    non-default stream, which the calls must order after), else on the CPU, against
    references computed on the CPU. Integer-valued data: exact in any summation order."""
    device, scope = torch.device("cpu"), contextlib.nullcontext()
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
        scope = torch.cuda.stream(torch.cuda.Stream(device))
    with scope:
        for dtype in (torch.float32, torch.float64, torch.int64, torch.bfloat16):
            stacked = torch.stack([data(r, 1000, dtype) for r in range(SIZE)])
            for op, reference in (("SUM", stacked.sum(0)), ("MAX", stacked.max(0).values)):
                t = data(RANK, 1000, dtype).to(device)
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                assert torch.equal(t.cpu(), reference.to(dtype)), (op, dtype)

        t = data(RANK, 300, salt=RANK).to(device)
        dist.broadcast(t, src=SIZE - 1)
        assert torch.equal(t.cpu(), data(SIZE - 1, 300, salt=SIZE - 1))

        out = torch.empty(SIZE * 5, dtype=torch.float64, device=device)
        dist.all_gather_into_tensor(out, data(RANK, 5, torch.float64).to(device))
        assert torch.equal(out.cpu(), torch.cat([data(r, 5, torch.float64) for r in range(SIZE)]))

        inputs = [data(r, 64 * SIZE, torch.float32) for r in range(SIZE)]
        whole = torch.stack(inputs).sum(0)
        for op, scale in (("SUM", 1), ("AVG", SIZE)):
            out = torch.empty(64, device=device)
            dist.reduce_scatter_tensor(out, inputs[RANK].to(device), op=getattr(dist.ReduceOp, op))
            assert torch.equal(out.cpu(), whole[64 * RANK:64 * RANK + 64] / scale), op

        out = torch.empty(2 * SIZE, device=device)
        dist.all_to_all_single(out, data(RANK, 2 * SIZE).to(device))
        assert torch.equal(out.cpu(), torch.cat([data(q, 2 * SIZE)[2 * RANK:2 * RANK + 2] for q in range(SIZE)]))
        send, recv, inp, reference = uneven_all_to_all()
        out = torch.empty(sum(recv), 3, device=device)
        dist.all_to_all_single(out, inp.to(device), output_split_sizes=recv, input_split_sizes=send)
        assert torch.equal(out.cpu(), reference)


def digits_accuracy(decentralized, dynamic=False, epochs=12):
    sklearn = pytest.importorskip("sklearn.datasets")
    X, y = sklearn.load_digits(return_X_y=True)
    X = (X - X.mean(0)) / (X.std(0) + 1e-8)
    rng = np.random.RandomState(0)
    order = rng.permutation(len(X))
    X, y = torch.tensor(X[order], dtype=torch.float32), torch.tensor(y[order])
    split = int(0.8 * len(X))
    Xtr, ytr, Xte, yte = X[:split][RANK::SIZE], y[:split][RANK::SIZE], X[split:], y[split:]
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    if decentralized:
        sdist.decentralize(ddp, opt, dynamic=dynamic)
    for _ in range(epochs):
        for start in range(0, len(Xtr), 32):
            opt.zero_grad()
            nn.functional.cross_entropy(ddp(Xtr[start:start + 32]), ytr[start:start + 32]).backward()
            opt.step()
    with torch.no_grad():
        accuracy = torch.tensor([(model(Xte).argmax(1) == yte).double().mean().item() * 100])
    dist.all_reduce(accuracy, op=dist.ReduceOp.AVG)  # the ranks' mean test accuracy
    return accuracy.item()


def test_decentralize_reaches_allreduce_accuracy():
    if SIZE == 1:
        pytest.skip("one rank has no neighbors")
    baseline = digits_accuracy(False)
    static = digits_accuracy(True)
    dynamic = digits_accuracy(True, dynamic=True)
    print(f"\ndigits test accuracy at {SIZE} ranks: allreduce {baseline:.2f}, static {static:.2f}, "
          f"dynamic {dynamic:.2f}")
    assert baseline > 90
    assert static >= baseline - 1, (static, baseline)
    assert dynamic >= baseline - 1, (dynamic, baseline)


def test_decentralize_averages_with_neighbors():
    """One step with lr=0: the parameters become the neighbor average of the ranks'."""
    model = nn.Linear(3, 1, bias=False)
    ddp = nn.parallel.DistributedDataParallel(model)
    with torch.no_grad():
        model.weight.fill_(float(RANK))  # after DDP's broadcast: each rank its own value
    opt = torch.optim.SGD(ddp.parameters(), lr=0.0)
    sdist.decentralize(ddp, opt)
    ddp(torch.ones(2, 3)).sum().backward()
    opt.step()
    ins = sdist.world_context().in_neighbors
    expected = (RANK + sum(ins)) / (len(ins) + 1)
    assert torch.allclose(model.weight, torch.full((1, 3), expected))


# ---- bad input ----------------------------------------------------------------------------------
def test_mismatched_shapes_and_dtypes_fail_on_every_rank():
    with pytest.raises(MismatchError, match="allreduce"):
        dist.all_reduce(torch.ones(3 + RANK))
    with pytest.raises(MismatchError):
        dist.all_reduce(torch.ones(3, dtype=torch.float32 if RANK == 0 else torch.float64))
    with pytest.raises(MismatchError):
        dist.all_gather_into_tensor(torch.empty(SIZE * (2 + RANK)), torch.ones(2 + RANK))
    with pytest.raises(MismatchError):
        dist.reduce_scatter_tensor(torch.empty(2 + RANK), torch.ones(SIZE * (2 + RANK)))
    t = torch.ones(2)
    dist.all_reduce(t)  # and the group goes on
    assert torch.equal(t, torch.full((2,), float(SIZE)))


def test_a_wrong_output_fails_on_its_rank_only_and_nothing_hangs():
    out = [torch.empty(3 if RANK == 0 else 2) for _ in range(SIZE)]
    if RANK == 0:
        with pytest.raises(ValueError, match="all_gather output"):
            dist.all_gather(out, torch.ones(2))
    else:
        dist.all_gather(out, torch.ones(2))
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(SIZE)))


def test_unsupported_ops_and_tensors_fail_clearly():
    with pytest.raises(UnsupportedError, match="BAND|reduce op"):
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)
    with pytest.raises(UnsupportedError, match="meta"):
        dist.all_reduce(torch.ones(2, device="meta"))
    with pytest.raises(UnsupportedError, match="send/recv"):
        dist.send(torch.ones(1), dst=(RANK + 1) % SIZE)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
