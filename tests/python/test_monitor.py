"""starling.torch.monitor_gradients: the gradient noise scale and variance against a
NumPy float64 reference that every rank computes from every rank's gradients, over the
gradient-averaging optimizers (one extra scalar allreduce, counted) and over a plain
torch optimizer (the monitor averages the gradients itself); and its bad input."""

import numpy as np
import pytest
import torch
import torch.nn as nn

import starling
import starling.torch as bf
from starling.torch import _state

bf.init()
RANK, SIZE = bf.rank(), bf.size()
BATCH = 8
LR = 0.1


def gradient(rank, step, shape, salt):
    """Rank's gradient of one parameter at step: a common part plus a rank's own."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.float64)
    common = np.cos(0.7 * i + 0.3 * step + salt)
    own = 0.5 * np.sin(1.3 * i * (rank + 1) + 0.9 * step + 2 * salt)
    return (common + own).astype(np.float32).reshape(shape)  # what the rank holds (float32)


def reference(steps, shapes, interval, alpha, size):
    """noise_scale, variance and the number of monitored steps, in float64 from the formula."""
    g_ema = s_ema = noise = variance = None
    monitored = 0
    for step in range(0, steps, interval):
        per_rank = [np.concatenate([gradient(r, step, s, k).astype(np.float64).ravel()
                                    for k, s in enumerate(shapes)]) for r in range(size)]
        local = np.mean([np.dot(g, g) for g in per_rank])
        avg = np.mean(per_rank, axis=0)
        big_sq = np.dot(avg, avg)
        variance = local - big_sq
        monitored += 1
        if size > 1:
            small, big = BATCH, BATCH * size
            g_biased = (big * big_sq - small * local) / (big - small)
            s_biased = (local - big_sq) / (1 / small - 1 / big)
            g_ema = g_biased if g_ema is None else alpha * g_ema + (1 - alpha) * g_biased
            s_ema = s_biased if s_ema is None else alpha * s_ema + (1 - alpha) * s_biased
            noise = s_ema / g_ema
    return noise, variance, monitored


def train(kind, steps, interval, alpha, name):
    """steps of SGD where rank's loss is sum(c * p), so that p.grad == c = gradient(...)."""
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    start = [p.detach().clone() for p in model.parameters()]
    sgd = torch.optim.SGD(model.parameters(), lr=LR)
    if kind == "gradient_allreduce":
        opt = bf.DistributedGradientAllreduceOptimizer(sgd, model=model)
    elif kind == "horovod_average":
        opt = bf.DistributedOptimizer(sgd, named_parameters=model.named_parameters())
    elif kind == "horovod_sum":
        opt = bf.DistributedOptimizer(sgd, named_parameters=model.named_parameters(), op=bf.Sum)
    elif kind == "adapt_with_combine":  # averages parameters with neighbors, not gradients
        opt = bf.DistributedAdaptWithCombineOptimizer(sgd, model=model)
    else:
        opt = sgd
    assert bf.monitor_gradients(opt, batch_size=BATCH, interval=interval, alpha=alpha, name=name) is opt
    assert isinstance(opt, torch.optim.SGD)
    shapes = [tuple(p.shape) for p in model.parameters()]
    operations = []
    for step in range(steps):
        before = _state.context.stats()["operations"]  # (the allreduces start during backward)
        opt.zero_grad()
        loss = sum((torch.from_numpy(gradient(RANK, step, tuple(p.shape), k)) * p).sum()
                   for k, p in enumerate(model.parameters()))
        loss = loss + 0.0 * model(torch.ones(1, 3)).sum()  # a forward pass for the forward hooks
        loss.backward()
        opt.step()
        operations.append(_state.context.stats()["operations"] - before)
    return opt, model, start, shapes, operations


@pytest.mark.parametrize("kind", ["gradient_allreduce", "horovod_average", "horovod_sum", "plain",
                                  "adapt_with_combine"])
def test_noise_scale_and_variance_against_numpy(kind):
    steps, interval, alpha = 7, 2, 0.7
    opt, model, start, shapes, operations = train(kind, steps, interval, alpha, f"test-{kind}")
    noise, variance, monitored = reference(steps, shapes, interval, alpha, SIZE)
    m = opt.monitor
    assert (m.monitored_steps, m.steps, m.name) == (monitored, steps, f"test-{kind}")
    assert m.variance == pytest.approx(variance, rel=1e-5, abs=1e-6)
    if SIZE == 1:
        assert m.noise_scale is None and m.variance == pytest.approx(0.0, abs=1e-9)
    else:
        assert variance > 0.1 and m.noise_scale == pytest.approx(noise, rel=1e-4)
    if kind == "adapt_with_combine":
        return  # (its forward hooks average the parameters with neighbors: no simple reference)
    # The update used what the optimizer is meant to use: the average (sum for op=Sum)
    # over the ranks, or only the local gradient for a plain torch optimizer.
    scale = SIZE if kind == "horovod_sum" else 1
    for k, (p, p0) in enumerate(zip(model.parameters(), start)):
        total = np.zeros(tuple(p.shape))
        for step in range(steps):
            if kind == "plain":
                total += gradient(RANK, step, tuple(p.shape), k)
            else:
                total += scale * np.mean([gradient(r, step, tuple(p.shape), k) for r in range(SIZE)], axis=0)
        np.testing.assert_allclose(p.detach().numpy(), p0.numpy() - LR * total, rtol=1e-5, atol=1e-5)
    # Cost: a monitored step adds one operation (a scalar allreduce over the averaging
    # optimizers; the gradients and |g|^2 in one allreduce over a plain optimizer).
    if SIZE > 1:
        plain_step, monitored_step = operations[3], operations[4]  # (step 0 also agrees on an order)
        assert monitored_step == plain_step + 1, operations


def test_noise_scale_formula_is_not_the_local_only_one():
    """The reference itself tells the formulas apart (a test that cannot fail is no test):
    with the local |g_i|^2 instead of the ranks' mean the value differs on some rank."""
    if SIZE == 1:
        return
    shapes = [(2, 3), (2,)]
    per_rank = [np.concatenate([gradient(r, 0, s, k).astype(np.float64).ravel() for k, s in enumerate(shapes)])
                for r in range(SIZE)]
    avg_sq = np.dot(np.mean(per_rank, axis=0), np.mean(per_rank, axis=0))
    local = [np.dot(g, g) for g in per_rank]
    assert max(abs(v - np.mean(local)) for v in local) > 1e-3 * avg_sq


def test_every_rank_sees_the_same_values():
    opt, *_ = train("gradient_allreduce", 3, 1, 0.5, "test-agree")
    values = torch.tensor([opt.monitor.noise_scale or 0.0, opt.monitor.variance], dtype=torch.float64)
    gathered = bf.allgather(values.reshape(1, 2))
    assert torch.equal(gathered, values.reshape(1, 2).repeat(SIZE, 1))


def test_bad_input():
    model = nn.Linear(2, 1)
    with pytest.raises(starling.InvalidArgumentError, match="batch_size"):
        bf.monitor_gradients(torch.optim.SGD(model.parameters(), lr=0.1), batch_size=0)
    with pytest.raises(starling.InvalidArgumentError, match="interval"):
        bf.monitor_gradients(torch.optim.SGD(model.parameters(), lr=0.1), batch_size=4, interval=0)
    with pytest.raises(starling.InvalidArgumentError, match="alpha"):
        bf.monitor_gradients(torch.optim.SGD(model.parameters(), lr=0.1), batch_size=4, alpha=1.0)
    with pytest.raises(starling.InvalidArgumentError, match="torch.optim.Optimizer"):
        bf.monitor_gradients(object(), batch_size=4)
    opt = bf.monitor_gradients(torch.optim.SGD(model.parameters(), lr=0.1), batch_size=4)
    with pytest.raises(starling.InvalidArgumentError, match="monitored already"):
        bf.monitor_gradients(opt, batch_size=4)
    delayed = bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model=model,
                                                      num_steps_per_communication=2)
    with pytest.raises(starling.InvalidArgumentError, match="num_steps_per_communication"):
        bf.monitor_gradients(delayed, batch_size=4)
    for hook in delayed._hooks:
        hook.remove()


# ---- consensus distance and TensorBoard ---------------------------------------------------------
def test_consensus_distance_against_numpy():
    def values(r):
        return np.random.RandomState(40 + r).uniform(-1, 1, (3, 5))

    mine = torch.from_numpy(values(RANK)).to(torch.float32)
    everyone = np.stack([values(r).astype(np.float32).astype(np.float64) for r in range(SIZE)])
    expected = np.sqrt(np.mean(np.sum((everyone - everyone.mean(axis=0)) ** 2, axis=(1, 2))))
    got = bf.consensus_distance(mine, name="cd.test")
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert SIZE == 1 or got > 0.1
    assert bf.consensus_distance(torch.full((4,), 2.5)) == 0.0  # in agreement


def test_consensus_distance_bad_input():
    with pytest.raises(starling.InvalidArgumentError, match="expected a torch.Tensor"):
        bf.consensus_distance(np.zeros(3))
    with pytest.raises(starling.InvalidArgumentError, match="floating point"):
        bf.consensus_distance(torch.zeros(3, dtype=torch.int32))
    with pytest.raises(starling.InvalidArgumentError, match="name must be a str"):
        bf.consensus_distance(torch.zeros(3), name=5)


class RecordingWriter:
    """What SummaryWriter.add_scalar receives."""

    def __init__(self):
        self.scalars = {}

    def add_scalar(self, tag, value, step):
        self.scalars[(tag, step)] = value


def test_write_tensorboard_values():
    opt, *_ = train("plain", 2, 1, 0.5, "tb-monitor")
    writer = RecordingWriter()
    stats = _state.context.stats()
    written = starling.metrics.write_tensorboard(writer, 7, _state.context, prefix="run")
    assert written == len(writer.scalars) and written >= 9
    for key in ("operations", "bytes_sent", "messages_sent", "scratch_bytes"):
        assert writer.scalars[(f"run/{key}", 7)] == float(stats[key])
    assert writer.scalars[("run/tb-monitor/variance", 7)] == opt.monitor.variance
    if SIZE > 1:
        assert writer.scalars[("run/tb-monitor/noise_scale", 7)] == opt.monitor.noise_scale
    implicit = RecordingWriter()  # context=None: starling.torch's
    starling.metrics.write_tensorboard(implicit, 8)
    assert implicit.scalars[("starling/operations", 8)] == float(_state.context.stats()["operations"])
    for bad, match in [((object(), 1), "add_scalar"), ((writer, -1), "step must be"),
                       ((writer, 1, None, ""), "prefix must be")]:
        with pytest.raises(starling.InvalidArgumentError, match=match):
            starling.metrics.write_tensorboard(*bad)

