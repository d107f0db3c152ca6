"""BlueFog's environment variables as aliases of Starling's (a fresh 4-rank process with
BLUEFOG_NODES_PER_MACHINE=2, BLUEFOG_TIMELINE, BLUEFOG_LOG_LEVEL=warning and
BLUEFOG_FUSION_THRESHOLD=0): simulated machines and hierarchical operations, the
timeline file, the log level, fusion off; and the GPU that the first init() selects."""

import json
import logging
import os
import threading

import numpy as np
import pytest
import torch

import starling.torch as bf
from starling.torch import _state
from conftest import RANK, SIZE, values

pytestmark = pytest.mark.skipif(SIZE != 4 or os.environ.get("BLUEFOG_NODES_PER_MACHINE") != "2",
                                reason="run by ctest with 4 ranks and BLUEFOG_NODES_PER_MACHINE=2")
SHAPE = (3,)


def machine_mean(m, salt=0):
    return (values(2 * m, SHAPE, "float64", salt) + values(2 * m + 1, SHAPE, "float64", salt)) / 2


def test_init_reads_the_aliases(monkeypatch):
    # The first init() puts the rank on GPU local_rank % device_count (torch.cuda mocked:
    # this machine has none). 3 GPUs: local rank 1 of machine 1 (rank 3) takes GPU 1, not 0.
    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    bf.init()
    assert chosen == [RANK % 2]
    bf.init()
    assert chosen == [RANK % 2]  # only once
    assert (bf.local_size(), bf.local_rank(), bf.machine_size(), bf.machine_rank()) == (2, RANK % 2, 2, RANK // 2)
    assert logging.getLogger("starling").level == logging.WARNING
    assert bf.timeline_start_activity("test", "INIT") and bf.timeline_end_activity("test")


def test_local_allreduce_averages_inside_the_machine():
    x = torch.from_numpy(values(RANK, SHAPE, "float64"))
    assert np.allclose(bf.allreduce(x, is_hierarchical_local=True).numpy(), machine_mean(RANK // 2))


def test_hierarchical_neighbor_allreduce_static_and_dynamic():
    m = RANK // 2
    x = torch.from_numpy(values(RANK, SHAPE, "float64", 1))
    assert bf.set_machine_topology(bf.RingGraph(2))
    assert bf.in_neighbor_machine_ranks() == [1 - m] and bf.out_neighbor_machine_ranks() == [1 - m]
    y = bf.hierarchical_neighbor_allreduce(x)
    assert np.allclose(y.numpy(), (machine_mean(0, 1) + machine_mean(1, 1)) / 2)
    h = bf.hierarchical_neighbor_allreduce_nonblocking(x, self_weight=0.75, src_machine_weights={1 - m: 0.25},
                                                       dst_machine_weights=[1 - m])
    assert np.allclose(bf.synchronize(h).numpy(), 0.75 * machine_mean(m, 1) + 0.25 * machine_mean(1 - m, 1))
    with pytest.raises(ValueError, match="in-neighbors"):
        bf.hierarchical_neighbor_allreduce(x, self_weight=0.5, src_machine_weights={m: 0.5}, dst_machine_weights=[])


def test_hierarchical_optimizer_over_two_machines():
    torch.manual_seed(RANK)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1))
    opt = bf.DistributedAdaptWithCombineOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), model,
                                                  bf.CommunicationType.hierarchical_neighbor_allreduce)
    weight = model[0].weight.detach().clone()
    model(torch.ones(2, 3)).sum().backward()
    opt.step()  # lr 0: only the averaging over the ring of 2 machines: the global mean
    mean = bf.allreduce(weight)
    assert torch.allclose(model[0].weight.detach(), mean)


def test_fusion_threshold_zero_disables_fusion():
    before = _state.context.stats()["fused_operations"]
    handles = [bf.neighbor_allreduce_nonblocking(torch.ones(16)) for _ in range(20)]
    for h in handles:
        bf.synchronize(h)
    assert _state.context.stats()["fused_operations"] == before


def test_timeline_file_is_valid_json_after_shutdown():
    def activity(name):
        with bf.timeline_context(name, "THREAD_WORK"):
            pass
    worker = threading.Thread(target=activity, args=("from_thread",))
    worker.start()
    worker.join()
    model = torch.nn.Sequential(torch.nn.Linear(2, 1))
    opt = bf.DistributedAdaptWithCombineOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model)
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    bf.shutdown()  # completes the file
    with open(f"{os.environ['BLUEFOG_TIMELINE']}{RANK}.json") as f:
        records = json.load(f)
    lanes = {r["tid"]: r["args"]["name"] for r in records if r.get("name") == "thread_name"}
    assert {"test", "from_thread", "0.weight", "0.bias"} <= set(lanes.values())
    events = [r for r in records if r["ph"] in "BE"]
    user = [r for r in events if lanes.get(r["tid"]) in ("test", "from_thread", "0.weight", "0.bias")]
    assert {"INIT", "THREAD_WORK", "FORWARD", "GRADIENT COMPT."} <= {r.get("name") for r in user}
    assert sum(r["ph"] == "B" for r in user) == sum(r["ph"] == "E" for r in user)
    assert all(r["ts"] >= 0 for r in events)
