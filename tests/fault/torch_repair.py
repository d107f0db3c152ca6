"""starling.torch training that survives a dead rank (run by run_ulfm_test.py under
`mpirun --with-ft ulfm`): rank 1 is SIGKILLed at step 5; the survivors get a
PeerFailedError naming it, call bf.repair(), and the neighbor-averaging optimizer goes
on over the survivors. The check is exact: with lr = 0 one step leaves each weight at
the uniform average of the survivors' values over self and in-neighbors.
Prints the driver's VICTIM / SURVIVOR lines."""
import os
import signal
import sys
import time

import torch

import starling
import starling.torch as bf


def main() -> int:
    bf.init()
    rank, size, victim = bf.rank(), bf.size(), 1
    if not bf.fault_tolerant():
        print(f"SURVIVOR rank={rank} ok=0 reason=not_fault_tolerant", flush=True)
        return 1
    model = torch.nn.Linear(4, 1, bias=False)
    opt = bf.DistributedAdaptWithCombineOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), model,
                                                  communication_type=bf.CommunicationType.neighbor_allreduce)

    def step() -> None:
        opt.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        opt.step()

    failure = None
    for it in range(10000):
        if rank == victim and it == 5:
            print(f"VICTIM rank={rank} pid={os.getpid()} mono={time.monotonic():.6f}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            step()
        except starling.PeerFailedError as e:
            failure = e
            break
    detect = time.monotonic()
    problems = []
    if failure is None or failure.ranks != [victim]:
        problems.append(f"expected a PeerFailedError naming rank {victim}, got {failure!r}")
    start = time.monotonic()
    result = bf.repair()
    if result["new_size"] != size - 1 or result["failed"] != [victim]:
        problems.append(f"repair returned {result}")
    # Training goes on over the survivors; one step with lr = 0 averages exactly.
    new_rank, new_size = bf.rank(), bf.size()
    with torch.no_grad():
        model.weight.fill_(new_rank + 1.0)
    step()
    repaired = time.monotonic()
    sources = bf.in_neighbor_ranks()
    expected = (new_rank + 1.0 + sum(r + 1.0 for r in sources)) / (len(sources) + 1)
    got = model.weight.detach()
    if not torch.allclose(got, torch.full_like(got, expected), rtol=1e-6, atol=0):
        problems.append(f"weights {got.flatten().tolist()} != {expected} after the repair")
    for _ in range(3):  # and keeps training
        step()
    bf.shutdown()
    if problems:
        print(f"SURVIVOR rank={rank} ok=0 reason={'; '.join(problems)}", flush=True)
        return 1
    print(f"SURVIVOR rank={rank} ok=1 detect_mono={detect:.6f} repaired_mono={repaired:.6f} "
          f"repair_s={repaired - start:.6f} new_rank={new_rank} new_size={new_size} message={failure}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
