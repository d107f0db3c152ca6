"""starling.torch training that survives a dead rank (run by run_ulfm_test.py under
`mpirun --with-ft ulfm`): every optimizer family of starling.torch trains side by side
(one small float64 model each) on the bidirectional ring; rank 1 is SIGKILLed at
iteration 5; the survivors get a PeerFailedError naming it, call bf.repair(), and every
optimizer goes on over the survivors (the ring over them). Checked with numbers:
- one step after the repair, with parameters reset to new_rank + 1, gives exactly what
  the method computes over the survivors (the neighbor averages with the survivors'
  uniform ring weights, the allreduce means over new_size ranks);
- the window optimizers (win_put, pull_get, push-sum, AD-PSGD), never reset, reach
  consensus among the survivors, inside the range of the values they started from.
Prints the driver's VICTIM / SURVIVOR lines (and, for push-sum, what it converged to)."""
import os
import signal
import sys
import time

import torch

import starling
import starling.torch as bf
from starling.compression import TopK
from starling.topology_util import RingGraph

VICTIM, KILL_AT, CONSENSUS_STEPS = 1, 5, 40

# name -> (factory(optimizer, model), learning rate); lr 0 keeps the checks to averaging.
FAMILIES = {
    "awc": (lambda o, m: bf.DistributedAdaptWithCombineOptimizer(o, m), 0.0),
    "atc": (lambda o, m: bf.DistributedAdaptThenCombineOptimizer(o, m), 0.0),
    "gradient_allreduce": (lambda o, m: bf.DistributedGradientAllreduceOptimizer(o, m), 1.0),
    # Scheduled by priority: the death comes after its plan is made (first step, then 3
    # calibration steps), with its updates pending; the repair calibrates again.
    "gradient_priority": (lambda o, m: bf.DistributedGradientAllreduceOptimizer(o, m, priority=True), 1.0),
    "compressed_allreduce": (lambda o, m: bf.DistributedCompressedGradientAllreduceOptimizer(o, m, TopK(4)), 1.0),
    "choco": (lambda o, m: bf.DistributedChocoSGDOptimizer(o, m, TopK(4, gamma=1.0)), 0.0),
    "sma": (lambda o, m: bf.DistributedSynchronousModelAveragingOptimizer(o, m, alpha=1.0), 0.0),
    "gradient_tracking": (lambda o, m: bf.DistributedGradientTrackingOptimizer(o, m), 0.0),
    "exact_diffusion": (lambda o, m: bf.DistributedExactDiffusionOptimizer(o, m), 0.0),
    "win_put": (lambda o, m: bf.DistributedWinPutOptimizer(o, m, window_prefix="put"), 0.0),
    "pull_get": (lambda o, m: bf.DistributedPullGetOptimizer(o, m, window_prefix="get"), 0.0),
    "push_sum": (lambda o, m: bf.DistributedPushSumOptimizer(o, m), 0.0),
    "adpsgd": (lambda o, m: bf.DistributedPairAveragingOptimizer(o, m, seed=3), 0.0),
}
WINDOWED = ("win_put", "pull_get", "push_sum", "adpsgd")


def build(name: str, value: float):
    factory, lr = FAMILIES[name]
    model = torch.nn.Linear(4, 1, bias=False).double()
    with torch.no_grad():
        model.weight.fill_(value)
    return model, factory(torch.optim.SGD(model.parameters(), lr=lr), model)


def step(model, opt, rank: int) -> None:
    opt.zero_grad()
    model(torch.full((2, 4), rank + 1.0, dtype=torch.float64)).sum().backward()  # grad = 2 (rank + 1)
    opt.step()


def expected_after_one_step(name: str, rank: int, size: int, sources) -> float:
    """NumPy-free reference over the survivors: values v_r = r + 1 (weights reset to 0
    for the gradient allreduces), uniform weights over self and in-neighbors."""
    neighbor_average = (rank + 1.0 + sum(r + 1.0 for r in sources)) / (len(sources) + 1)
    if name in ("gradient_allreduce", "gradient_priority", "compressed_allreduce"):
        return -sum(2.0 * (r + 1) for r in range(size)) / size  # 0 - lr * mean gradient
    if name == "sma":
        return sum(r + 1.0 for r in range(size)) / size
    if name == "exact_diffusion":  # W_bar = (I + W) / 2; the restart makes phi = x
        return 0.5 * (rank + 1.0) + 0.5 * neighbor_average
    return neighbor_average


def main() -> int:
    bf.init()
    rank, size = bf.rank(), bf.size()
    if not bf.fault_tolerant():
        print(f"SURVIVOR rank={rank} ok=0 reason=not_fault_tolerant", flush=True)
        return 1
    bf.set_topology(RingGraph(size))
    trained = {name: build(name, rank + 1.0) for name in FAMILIES}

    failure = None
    for it in range(10000):
        if rank == VICTIM and it == KILL_AT:
            print(f"VICTIM rank={rank} pid={os.getpid()} mono={time.monotonic():.6f}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            for model, opt in trained.values():
                step(model, opt, rank)
        except starling.PeerFailedError as e:
            failure = e
            break
    detect = time.monotonic()
    problems = []
    if failure is None or failure.ranks != [VICTIM]:
        problems.append(f"expected a PeerFailedError naming rank {VICTIM}, got {failure!r}")
    start = time.monotonic()
    result = bf.repair()
    if result["new_size"] != size - 1 or result["failed"] != [VICTIM]:
        problems.append(f"repair returned {result}")
    new_rank, new_size = bf.rank(), bf.size()
    sources = bf.in_neighbor_ranks()
    expected_sources = sorted({(new_rank - 1) % new_size, (new_rank + 1) % new_size} - {new_rank})
    if sources != expected_sources:
        problems.append(f"in-neighbors {sources} after the repair, expected the ring's {expected_sources}")

    # 1. One exact step of every non-window family over the survivors.
    for name, (model, opt) in trained.items():
        if name in WINDOWED:
            continue
        with torch.no_grad():
            model.weight.fill_(0.0 if FAMILIES[name][1] else new_rank + 1.0)
        step(model, opt, new_rank)
        want = expected_after_one_step(name, new_rank, new_size, sources)
        got = model.weight.detach()
        if not torch.allclose(got, torch.full_like(got, want), rtol=1e-12, atol=1e-12):
            problems.append(f"{name}: weights {got.flatten().tolist()} != {want} one step after the repair")
    repaired = time.monotonic()

    # 2. The window families, never reset, reach consensus among the survivors.
    for _ in range(CONSENSUS_STEPS):
        for name in WINDOWED:
            step(*trained[name], new_rank)
    bf.barrier()
    mine = torch.tensor([[trained[n][0].weight[0, 0].item() for n in WINDOWED]], dtype=torch.float64)
    everyone = bf.allgather(mine)
    survivors_average = sum(old + 1.0 for old, new in enumerate(result["old_to_new"]) if new >= 0) / new_size
    old_average = (size + 1.0) / 2
    for i, name in enumerate(WINDOWED):
        column = everyone[:, i]
        spread = (column.max() - column.min()).item()
        if not spread < 1e-4 or column.min().item() < 1.0 or column.max().item() > size:
            problems.append(f"{name}: survivors' values {column.tolist()} (spread {spread:.3g}, want < 1e-4, "
                            f"inside [1, {size}])")
    # The other families keep training too (over the survivors, lr as built).
    for _ in range(2):
        for name, (model, opt) in trained.items():
            if name not in WINDOWED:
                step(model, opt, new_rank)
    pushsum = everyone[0, WINDOWED.index("push_sum")].item()
    winput = everyone[0, WINDOWED.index("win_put")].item()
    bf.shutdown()
    if problems:
        print(f"SURVIVOR rank={rank} ok=0 reason={'; '.join(problems)}", flush=True)
        return 1
    print(f"SURVIVOR rank={rank} ok=1 detect_mono={detect:.6f} repaired_mono={repaired:.6f} "
          f"repair_s={repaired - start:.6f} new_rank={new_rank} new_size={new_size} "
          f"pushsum_value={pushsum:.6f} winput_value={winput:.6f} survivors_average={survivors_average:.6f} "
          f"old_average={old_average:.6f} message={failure}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
