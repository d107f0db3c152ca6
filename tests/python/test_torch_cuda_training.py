"""starling.torch's optimizers training a model on a GPU, run by the device kit
(tests/gpu/device_kit.sh, STARLING_TEST_ARRAYS=torch). The ones whose result does not
depend on timing must give the CPU's parameters (float64, so only the order of a few
additions can differ); the window and push-sum optimizers must reach the single-process
accuracy, as on the CPU (test_optimizers.py). STARLING_TEST_TORCH_DEVICE=cpu runs the
file without a GPU, to check the test itself. Skipped when STARLING_TEST_ARRAYS is not
torch (the main suite)."""

import os

import pytest
import torch

if os.environ.get("STARLING_TEST_ARRAYS") != "torch":
    pytest.skip("needs STARLING_TEST_ARRAYS=torch: run by tests/gpu/device_kit.sh", allow_module_level=True)
DEVICE = torch.device(os.environ.get("STARLING_TEST_TORCH_DEVICE", "cuda"))
if DEVICE.type == "cuda" and not torch.cuda.is_available():
    pytest.skip("PyTorch sees no GPU", allow_module_level=True)

import starling.torch as bf  # noqa: E402
from conftest import RANK  # noqa: E402
from test_optimizers import X_SHARD, Y_SHARD, base_optimizer, check, new_model, train  # noqa: E402

if DEVICE.type == "cuda":
    DEVICE = torch.device("cuda", torch.cuda.current_device())  # bf.init() chose it
KINDS = bf.CommunicationType
STEPS = 40


def trained(make_optimizer, device, dtype=torch.float64, steps=STEPS):
    model = new_model().to(device=device, dtype=dtype)
    optimizer = make_optimizer(model)
    try:
        train(model, optimizer, X_SHARD.to(device, dtype), Y_SHARD.to(device, dtype), steps=steps)
        return model
    finally:
        bf.barrier()
        if hasattr(optimizer, "unregister_window"):
            optimizer.unregister_window()


def flat(model):
    return torch.cat([p.detach().to("cpu", torch.float64).flatten() for p in model.parameters()])


DETERMINISTIC = {
    "AWC neighbor_allreduce sgd": lambda m: bf.DistributedAdaptWithCombineOptimizer(
        base_optimizer("sgd", m, 0.5), m, communication_type=KINDS.neighbor_allreduce),
    "ATC allreduce adam": lambda m: bf.DistributedAdaptThenCombineOptimizer(
        base_optimizer("adam", m, 0.05), m, communication_type=KINDS.allreduce),
    "ATC neighbor_allreduce momentum, every 2nd step": lambda m: bf.DistributedAdaptThenCombineOptimizer(
        base_optimizer("momentum", m, 0.3), m, num_steps_per_communication=2),
    "GradientAllreduce sgd": lambda m: bf.DistributedGradientAllreduceOptimizer(base_optimizer("sgd", m, 0.5), m),
}


@pytest.mark.parametrize("label", list(DETERMINISTIC))
def test_the_gpu_trains_the_cpus_model(label):
    on_device = flat(trained(DETERMINISTIC[label], DEVICE))
    on_cpu = flat(trained(DETERMINISTIC[label], torch.device("cpu")))
    assert torch.isfinite(on_device).all()
    torch.testing.assert_close(on_device, on_cpu, rtol=1e-9, atol=1e-10, msg=f"{label} on rank {RANK}")
    assert not torch.equal(on_device, flat(new_model()).to(torch.float64)), "the model did not change"


def window_optimizer(factory):
    def make(model):
        if factory is bf.DistributedPushSumOptimizer:
            return factory(base_optimizer("sgd", model, 0.5), model, force_barrier=True)
        optimizer = factory(base_optimizer("sgd", model, 0.5), model, window_prefix=f"cuda.{factory.__name__}")
        optimizer.force_barrier = True  # staleness of one step at most, as in test_optimizers.py
        return optimizer
    return make


@pytest.mark.parametrize("factory", [bf.DistributedWinPutOptimizer, bf.DistributedPullGetOptimizer,
                                     bf.DistributedPushSumOptimizer], ids=["WinPut", "PullGet", "PushSum"])
def test_window_optimizers_reach_the_single_process_accuracy(factory):
    model = trained(window_optimizer(factory), DEVICE, dtype=torch.float32, steps=100)
    assert all(p.device == DEVICE for p in model.parameters())
    on_cpu = new_model()  # a copy without the optimizer's hooks, where check() evaluates
    on_cpu.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    check(f"{factory.__name__[11:]} sgd on {DEVICE.type}", on_cpu, "sgd", 0.5)
    assert bf.get_current_created_window_names() == []
