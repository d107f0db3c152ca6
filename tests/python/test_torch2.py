"""What PyTorch 2 programs bring to starling.torch: gradients that are None
(zero_grad() sets them to None by default since 2.0), optimizer state and options as
tensors, torch.compile'd modules (parameters under _orig_mod), torch.func, bfloat16 and
float16 parameters, channels-last parameters, frozen parameters, and models whose
modules were registered in another order on some ranks. Every result is checked against
a reference computed here without Starling: each rank's gradient recomputed for every
rank's data and averaged, then the same optimizer step. The parts that need PyTorch 2
(torch.compile, torch.func, tensor learning rates) run only there; the rest runs on the
Debian stack too."""

import copy

import pytest
import torch

import starling
import starling.torch as bf
from conftest import RANK, SIZE

STEPS = 3


def data(rank, shape=(6, 4)):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(shape, generator=g), torch.randn(shape[0], 2, generator=g)


class TwoLayers(torch.nn.Module):
    """Two layers of the same shape (a swapped order goes unnoticed by shape checks);
    `swapped` registers them in the other order, names unchanged."""

    def __init__(self, swapped=False):
        super().__init__()
        torch.manual_seed(0)
        first, second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
        head = torch.nn.Linear(4, 2)
        if swapped:
            self.b, self.a = second, first
        else:
            self.a, self.b = first, second
        self.head = head

    def forward(self, x):
        return self.head(torch.tanh(self.b(torch.tanh(self.a(x)))))


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x).float(), y)


def reference(model, make_optimizer, steps=STEPS, dtype=None, unused=()):
    """What gradient-averaged training gives: every rank's gradient computed here, in one
    process, averaged (in float64, then rounded to the parameter's dtype)."""
    model = copy.deepcopy(model)
    optimizer = make_optimizer(model)
    for _ in range(steps):
        grads = []
        for r in range(SIZE):
            model.zero_grad()
            x, y = data(r)
            loss_fn(model, x.to(dtype) if dtype else x, y).backward()
            grads.append({n: (p.grad.double() if p.grad is not None else torch.zeros_like(p, dtype=torch.float64))
                          for n, p in model.named_parameters() if p.requires_grad})
        for n, p in model.named_parameters():
            if p.requires_grad:
                p.grad = (sum(g[n] for g in grads) / SIZE).to(p.dtype)
        optimizer.step()
    return model


def train_allreduce(model, make_optimizer, steps=STEPS, dtype=None):
    optimizer = bf.DistributedGradientAllreduceOptimizer(make_optimizer(model), model=model)
    x, y = data(RANK)
    for _ in range(steps):
        optimizer.zero_grad()  # PyTorch 2: the gradients become None
        loss_fn(model, x.to(dtype) if dtype else x, y).backward()
        optimizer.step()
    return model


def assert_same_parameters(model, expected, atol=1e-6):
    got = dict(model.named_parameters())
    for name, p in expected.named_parameters():
        name = name if name in got else "_orig_mod." + name
        assert torch.allclose(got[name].detach().double(), p.detach().double(), atol=atol, rtol=0), name


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)


def test_gradient_allreduce_with_gradients_set_to_none():
    model = TwoLayers()
    expected = reference(model, sgd)
    train_allreduce(model, sgd)
    assert_same_parameters(model, expected)


def test_a_parameter_without_gradient_on_some_ranks():
    # The head's bias is used on rank 0 only: the other ranks' gradient is None and
    # counts as zero in the average (as Horovod does), on every rank alike.
    class Partial(TwoLayers):
        def forward(self, x):
            out = torch.nn.functional.linear(torch.tanh(self.b(torch.tanh(self.a(x)))), self.head.weight)
            return out + self.head.bias if self.rank_uses_bias else out

    model = Partial()
    reference_model = copy.deepcopy(model)
    grads = []
    for r in range(SIZE):
        reference_model.rank_uses_bias = r == 0
        reference_model.zero_grad()
        loss_fn(reference_model, *data(r)).backward()
        grads.append({n: p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                      for n, p in reference_model.named_parameters()})
    model.rank_uses_bias = RANK == 0
    optimizer = bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model=model)
    optimizer.zero_grad()
    loss_fn(model, *data(RANK)).backward()
    optimizer.step()
    for n, p in model.named_parameters():
        expected = dict(copy.deepcopy(reference_model).named_parameters())[n].detach() - 0.1 * sum(
            g[n] for g in grads) / SIZE
        assert torch.allclose(p.detach(), expected, atol=1e-6), n


def test_modules_registered_in_another_order_on_odd_ranks():
    # Operations are matched by submission order: Starling submits by parameter name.
    model = TwoLayers(swapped=RANK % 2 == 1)
    expected = reference(TwoLayers(), sgd)
    train_allreduce(model, sgd)
    assert_same_parameters(model, expected)
    # The combine optimizers' forward hooks, and broadcast_parameters with a list.
    torch.manual_seed(RANK)
    model = TwoLayers(swapped=RANK % 2 == 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(RANK)
    bf.broadcast_parameters(list(model.named_parameters()), root_rank=0)
    assert_same_parameters(model, TwoLayers())
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            p.copy_(torch.full_like(p, RANK + len(name)))
    optimizer = bf.DistributedAdaptWithCombineOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), model=model,
                                                        communication_type=bf.CommunicationType.allreduce)
    optimizer.zero_grad()
    loss_fn(model, *data(RANK)).backward()
    optimizer.step()
    for name, p in model.named_parameters():
        assert torch.allclose(p.detach(), torch.full_like(p, (SIZE - 1) / 2 + len(name))), name


def test_frozen_parameters():
    model = TwoLayers()
    model.a.requires_grad_(False)
    frozen = model.a.weight.detach().clone()
    expected = reference(model, lambda m: torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1))
    train_allreduce(model, lambda m: torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1))
    assert_same_parameters(model, expected)
    assert torch.equal(model.a.weight.detach(), frozen)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_parameters(dtype):
    if dtype == torch.float16 and int(torch.__version__.split(".")[0]) < 2:
        pytest.skip("PyTorch 1.13 has no float16 matrix product on the CPU")
    model = TwoLayers().to(dtype)
    expected = reference(model, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), dtype=dtype)
    train_allreduce(model, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), dtype=dtype)
    # Starling averages float16/bfloat16 in float32 and rounds once, as the reference.
    assert_same_parameters(model, expected, atol=2e-2 if dtype == torch.bfloat16 else 2e-3)
    assert all(p.dtype == dtype for p in model.parameters())


class Conv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(4 * 2 * 2, 2)

    def forward(self, x):
        return self.head(torch.tanh(self.conv(x)).flatten(1))


def conv_data(rank):
    g = torch.Generator().manual_seed(200 + rank)
    return torch.randn(5, 3, 4, 4, generator=g).to(memory_format=torch.channels_last), torch.randn(5, 2, generator=g)


def test_channels_last_parameters_and_optimizer_state():
    model = Conv().to(memory_format=torch.channels_last)
    assert not model.conv.weight.is_contiguous()  # the case at hand
    reference_model = copy.deepcopy(model)
    make = lambda m: torch.optim.Adam(m.parameters(), lr=0.01)  # noqa: E731
    reference_optimizer = make(reference_model)
    for _ in range(STEPS):
        grads = []
        for r in range(SIZE):
            reference_model.zero_grad()
            loss_fn(reference_model, *conv_data(r)).backward()
            grads.append({n: p.grad.clone() for n, p in reference_model.named_parameters()})
        for n, p in reference_model.named_parameters():
            p.grad = sum(g[n] for g in grads) / SIZE
        reference_optimizer.step()
    optimizer = bf.DistributedGradientAllreduceOptimizer(make(model), model=model)
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss_fn(model, *conv_data(RANK)).backward()
        optimizer.step()
    assert_same_parameters(model, reference_model, atol=1e-5)
    assert model.conv.weight.is_contiguous(memory_format=torch.channels_last)
    # The optimizer state shares the layout: broadcast it, and the parameters.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(RANK)
    state = optimizer.state[model.conv.weight]
    state["exp_avg"].add_(RANK)
    bf.broadcast_parameters(model.state_dict(), root_rank=0)
    bf.broadcast_optimizer_state(optimizer, root_rank=0)
    assert_same_parameters(model, reference_model, atol=1e-5)
    assert torch.allclose(state["exp_avg"], reference_optimizer.state[reference_model.conv.weight]["exp_avg"],
                          atol=1e-6)
    assert model.conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_optimizer_state_layouts_broadcast():
    # PyTorch 2 keeps Adam's step as a tensor, SGD's momentum_buffer may be None, and
    # options may be tensors (lr=torch.tensor(...), PyTorch >= 2.2).
    model = TwoLayers()
    lr = torch.tensor(0.01 * (RANK + 1)) if torch.__version__ >= "2.2" else 0.01 * (RANK + 1)
    adam = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9 - 0.1 * RANK, 0.999))
    plain_sgd = torch.optim.SGD(model.parameters(), lr=0.1 * (RANK + 1))
    for _ in range(RANK + 1):  # different states on every rank
        for optimizer in (adam, plain_sgd):
            optimizer.zero_grad()
            loss_fn(model, *data(RANK)).backward()
            optimizer.step()
    for optimizer in (adam, plain_sgd):
        bf.broadcast_optimizer_state(optimizer, root_rank=0)
    steps = {float(s["step"]) for s in adam.state.values()}
    assert steps == {1.0}
    assert float(adam.param_groups[0]["lr"]) == pytest.approx(0.01)
    assert adam.param_groups[0]["betas"] == pytest.approx((0.9, 0.999))
    assert plain_sgd.param_groups[0]["lr"] == pytest.approx(0.1)
    # Every rank now holds rank 0's moments.
    moments = torch.cat([s["exp_avg"].flatten() for _, s in sorted(
        ((n, adam.state[p]) for n, p in model.named_parameters()), key=lambda item: item[0])])
    gathered = bf.allgather(moments.unsqueeze(0))
    assert torch.equal(gathered, moments.unsqueeze(0).expand(SIZE, -1))


needs_torch2 = pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2, reason="PyTorch 2 API")


@needs_torch2
def test_compiled_module():
    model = TwoLayers()
    expected = reference(model, sgd)
    compiled = torch.compile(model, backend="aot_eager")
    assert all(name.startswith("_orig_mod.") for name, _ in compiled.named_parameters())
    train_allreduce(compiled, sgd)
    assert_same_parameters(compiled, expected)
    # The combine optimizers hook the compiled module's forward.
    with torch.no_grad():
        for p in compiled.parameters():
            p.fill_(RANK)
    optimizer = bf.DistributedAdaptWithCombineOptimizer(torch.optim.SGD(compiled.parameters(), lr=0.0),
                                                        model=compiled,
                                                        communication_type=bf.CommunicationType.allreduce)
    optimizer.zero_grad()
    loss_fn(compiled, *data(RANK)).backward()
    optimizer.step()
    assert all(torch.allclose(p.detach(), torch.full_like(p, (SIZE - 1) / 2)) for p in compiled.parameters())
    bf.broadcast_parameters(compiled.state_dict(), root_rank=0)


@needs_torch2
def test_torch_func_gradients():
    model = TwoLayers()
    params = {n: p.detach() for n, p in model.named_parameters()}

    def functional_loss(params, x, y):
        return torch.nn.functional.mse_loss(torch.func.functional_call(model, params, (x,)), y)

    grads = torch.func.grad(functional_loss)(params, *data(RANK))
    averaged = {n: bf.allreduce(g, name=f"func.{n}") for n, g in sorted(grads.items())}
    expected = {n: sum(torch.func.grad(functional_loss)(params, *data(r))[n] for r in range(SIZE)) / SIZE
                for n in params}
    for n in params:
        assert torch.allclose(averaged[n], expected[n], atol=1e-6), n

    # Inside a transform the tensors have no storage Starling can read: a clear error,
    # on the calling rank only (nothing is submitted).
    def communicating_loss(params, x, y):
        return bf.allreduce(functional_loss(params, x, y))

    with pytest.raises(starling.UnsupportedError):
        torch.func.grad(communicating_loss)(params, *data(RANK))
