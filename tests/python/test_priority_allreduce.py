"""Gradient averaging scheduled by priority (DistributedGradientAllreduceOptimizer with
priority=True): the release plan, and training that ends with the same parameters as
without priority, whatever the plan holds back."""

import warnings

import numpy as np
import pytest
import torch

import starling.torch as bf
from conftest import RANK, SIZE
from starling.torch._priority_allreduce import CALIBRATION_STEPS
from starling.torch._priority_plan import partition, plan


# ---- the plan, a pure function ------------------------------------------------------------------
def test_partition_cuts_each_tensor_in_order():
    assert partition([10, 3], [4, 8], 16) == [(0, 0, 4), (0, 4, 8), (0, 8, 10), (1, 0, 2), (1, 2, 3)]
    assert partition([5], [8], 4) == [(0, i, i + 1) for i in range(5)]  # at least one element each


def test_a_link_that_keeps_up_sends_each_partition_when_ready():
    releases, final = plan([100, 100, 100], [0, 1, 2], [(0,), (-1,), (-2,)], [0.0, 1.0, 2.0], 3.0, 0.0, 0.0)
    assert releases == [[0], [1], [2]] and final == []


def test_a_backed_up_link_holds_partitions_and_sends_the_input_side_first():
    # 4 gradients, ready at 0, 1, 2, 3 s; each takes 2 s to send; the backward pass ends at 3.5 s.
    # Event 0: link busy until 2 (> next event at 1): send 0. Event 1: busy until 2 > 2? no,
    # 2 < 2 + 0 is false, hold 1. Event 2: send the best of {1, 2}: 2 (key -2), busy until 4.
    # Event 3: 4 < 3.5 is false: hold. The end: held 3 and 1, input side (larger index) first.
    keys = [(-i, 0) for i in range(4)]
    releases, final = plan([2, 2, 2, 2], [0, 1, 2, 3], keys, [0.0, 1.0, 2.0, 3.0], 3.5, 1.0, 0.0)
    assert releases == [[0], [], [2], []]
    assert final == [3, 1]
    # Every partition goes exactly once.
    assert sorted(sum(releases, []) + final) == [0, 1, 2, 3]


def test_lead_keeps_more_queued():
    keys = [(-i, 0) for i in range(3)]
    releases, final = plan([1, 1, 1], [0, 0, 0], keys, [0.0], 0.5, 1.0, 10.0)
    assert releases == [[2, 1, 0]] and final == []


# ---- training ------------------------------------------------------------------------------------
def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 3))


def _data(step, rank=RANK):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 12, generator=g), torch.randint(0, 3, (8,), generator=g)


def _train(optimizer_of, steps, set_to_none=True):
    model = _model()
    base = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt = optimizer_of(base, model)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    for step in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        x, y = _data(step)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        scheduler.step()  # after step(): the pending updates still use the step's learning rate
    opt.synchronize()
    return model, opt


def _reference(steps):
    """The same training in float64, in one process: the mean of every rank's
    gradient is the gradient of the mean loss over all ranks' batches."""
    torch.manual_seed(0)
    model = _model().double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    for step in range(steps):
        opt.zero_grad()
        loss = 0
        for rank in range(SIZE):
            x, y = _data(step, rank)
            loss = loss + torch.nn.functional.cross_entropy(model(x.double()), y) / SIZE
        loss.backward()
        opt.step()
        scheduler.step()
    return model


@pytest.mark.parametrize("seconds_per_byte", [None, 1e-3])
@pytest.mark.parametrize("set_to_none", [True, False])
def test_priority_trains_as_without_it(seconds_per_byte, set_to_none):
    steps = 1 + CALIBRATION_STEPS + 6

    def scheduled(base, model):
        opt = bf.DistributedGradientAllreduceOptimizer(base, model, priority=True, partition_bytes=64)
        opt._assumed_seconds_per_byte = seconds_per_byte  # 1 ms a byte: a link so slow the plan holds back
        return opt

    model, opt = _train(scheduled, steps, set_to_none)
    fifo, _ = _train(lambda base, m: bf.DistributedGradientAllreduceOptimizer(base, m), steps, set_to_none)
    reference = _reference(steps)
    schedule = opt.schedule
    if SIZE > 1:
        assert schedule is not None
        parts = sum(len(names) for _, names in schedule["during"]) + len(schedule["after"])
        assert parts == sum(-(-p.numel() // 16) for p in model.parameters())  # 64 bytes: 16 floats each
        if seconds_per_byte:
            # Held back, and the first layer's partitions lead what is held.
            assert schedule["after"] and schedule["after"][0].startswith("0.")
    for (name, p), q, r in zip(model.named_parameters(), fifo.parameters(), reference.parameters()):
        # The partitions sum what the whole tensors sum, rank by rank: the same bits at 2 ranks.
        if SIZE <= 2:
            assert torch.equal(p, q), name
        np.testing.assert_allclose(p.detach().double().numpy(), r.detach().numpy(), rtol=0, atol=1e-5, err_msg=name)


class _Branchy(torch.nn.Module):
    """A model whose `extra` layer runs on even steps only (on every rank alike)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = _model()
        self.extra = torch.nn.Linear(3, 3)
        self.use_extra = True

    def forward(self, x):
        y = self.body(x)
        return self.extra(y) if self.use_extra else y


def _train_patterns(pattern, priority):
    """Training as programs do it: Adam over two groups, a layer used every other step,
    layers frozen and unfrozen (before the plan, during its calibration, after it), two
    backward passes per step."""
    model = _Branchy()
    groups = [{"params": model.body.parameters(), "lr": 0.01}, {"params": model.extra.parameters(), "lr": 0.03}]
    steps_per_communication = 2 if pattern == "accumulate" else 1
    if pattern == "freeze":
        model.body[0].weight.requires_grad_(False)  # frozen from the start, unfrozen at step 7
    opt = bf.DistributedGradientAllreduceOptimizer(torch.optim.Adam(groups), model, steps_per_communication,
                                                   priority=priority, partition_bytes=96)
    for step in range(14):
        if pattern == "freeze" and step == 2:  # frozen during calibration (its hook exists)
            model.body[2].weight.requires_grad_(False)
        if pattern == "freeze" and step == 7:
            model.body[0].weight.requires_grad_(True)
            model.body[2].weight.requires_grad_(True)
        if pattern == "freeze" and step == 10:
            model.body[2].bias.requires_grad_(False)
        model.use_extra = pattern != "branch" or step % 2 == 0
        opt.zero_grad()
        for half in range(steps_per_communication):
            x, y = _data(2 * step + half)
            torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    opt.synchronize()
    return model


@pytest.mark.parametrize("pattern", ["groups", "branch", "freeze", "accumulate"])
def test_priority_in_training_patterns(pattern):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduled = _train_patterns(pattern, True)
    assert not [w for w in caught if "Unexpected behavior" in str(w.message)], "a hook miscounted its steps"
    fifo = _train_patterns(pattern, False)
    for (name, p), q in zip(scheduled.named_parameters(), fifo.parameters()):
        # Averaged gradients keep the replicas identical on every rank, with and without priority.
        root = bf.broadcast(p.detach(), root_rank=0, name=f"{pattern}.{name}")
        assert torch.equal(root, p.detach()), f"{name} differs from rank 0's"
        root = bf.broadcast(q.detach(), root_rank=0, name=f"{pattern}.{name}.fifo")
        assert torch.equal(root, q.detach()), f"{name} (without priority) differs from rank 0's"
        if SIZE <= 2:
            assert torch.equal(p, q), name
        else:
            torch.testing.assert_close(p, q, rtol=0, atol=1e-6)


def test_step_returns_before_the_update_and_forward_applies_it():
    model = _model()
    opt = bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model,
                                                   priority=True)
    x, y = _data(0)
    for _ in range(1 + CALIBRATION_STEPS + 1):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        before = [p.detach().clone() for p in model.parameters()]
        opt.step()
    after_step = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        model[0](x)  # the first layer's forward applies the first layer's update only
    changed = [not torch.equal(a, b) for a, b in zip(before, model.parameters())]
    if SIZE > 1:
        assert all(torch.equal(a, b) for a, b in zip(before, after_step)), "step() updated before the forward"
        assert changed == [True, True, False, False, False, False]
    else:
        assert all(changed)  # one rank: no scheduling, step() updates
    opt.synchronize()
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_parameter_used_outside_its_module_is_an_error():
    class Functional(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 1)

        def forward(self, x):  # uses inner's weight without calling inner: no pre-hook runs
            return torch.nn.functional.linear(x, self.inner.weight, self.inner.bias)

    torch.manual_seed(0)
    model = Functional()
    opt = bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model,
                                                   priority=True)
    x = torch.ones(2, 4)
    error = None
    for _ in range(1 + CALIBRATION_STEPS + 2):
        opt.zero_grad()
        try:
            model(x).sum().backward()
        except RuntimeError as e:
            error = str(e)
            break
        opt.step()
    if SIZE > 1:
        assert error is not None and "parameter 'inner." in error and "priority=False" in error
    else:
        assert error is None


@pytest.mark.parametrize("kwargs, message", [
    ({"priority": "yes"}, "priority must be True or False"),
    ({"priority": True, "partition_bytes": 0}, "partition_bytes must be a positive integer"),
    ({"priority": True, "partition_bytes": 1.5}, "partition_bytes must be a positive integer"),
    ({"priority": True, "partition_bytes": True}, "partition_bytes must be a positive integer"),
    ({"partition_bytes": -1}, "partition_bytes must be a positive integer"),
])
def test_bad_arguments(kwargs, message):
    model = _model()
    with pytest.raises(ValueError, match=message):
        bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model, **kwargs)
