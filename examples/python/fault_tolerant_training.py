"""Decentralized training that survives a dead rank and takes in its replacement.

The MLP of train_mlp.py on scikit-learn's digits, each rank on its own shard, averaging
with its neighbors (adapt-with-combine over neighbor_allreduce, exponential-2 graph).
At --kill-epoch, rank --kill-rank kills itself with SIGKILL in the middle of the epoch.
The survivors' next step raises starling.PeerFailedError; they call bf.repair() and go
on over the survivors (the shards are redrawn over the new size). At --join-epoch the
survivors call bf.grow(ranks=[kill_rank]): Open MPI starts this same script again, its
bf.init() enters the running job at the dead rank's old place (bf.joined() is True),
it learns the epoch and pulls the parameters of an in-neighbor in one broadcast, and
trains on. Needs Open MPI 5 with ULFM:

    starlingrun -np 8 --fault-tolerant python3 examples/python/fault_tolerant_training.py \\
        --out examples/python/results/fault_tolerant
    (--undisturbed: the same run without the failure and the join, for comparison)

Rank 0 writes OUT.csv (epoch, rank, worker, size, loss, accuracy: one row per rank and
epoch; worker = the rank a process started as, "r5'" for the replacement) and
OUT.json (the measured times: kill -> training continues, grow, join -> the
newcomer's first step; the final mean test accuracy). plot_fault_tolerant.py plots it.
With --check, every process prints a MEMBER line for tests/fault/run_grow_test.py.
"""

import time

PROCESS_STARTED = time.monotonic()  # before the imports: a newcomer's start-up is part of the join

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

import starling  # noqa: E402
import starling.torch as bf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import accuracy, load_data, make_model  # noqa: E402  (the same MLP and data)


def flat_parameters(model):
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach()


def pull_parameters(model, root, newcomer):
    """One broadcast from `root`: the newcomer takes the result, the others keep theirs."""
    pulled = bf.broadcast(flat_parameters(model), root_rank=root, name="pull parameters")
    if newcomer:
        torch.nn.utils.vector_to_parameters(pulled, model.parameters())


def source_of(rank):
    """The rank the newcomer at `rank` pulls from: its lowest in-neighbor (every rank
    computes the same from the topology)."""
    sources = sorted(r for r in bf.load_topology().predecessors(rank) if r != rank)
    return sources[0] if sources else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--kill-rank", type=int, default=5)
    parser.add_argument("--kill-epoch", type=int, default=10)
    parser.add_argument("--join-epoch", type=int, default=15)
    parser.add_argument("--undisturbed", action="store_true", help="no failure, no join (the reference run)")
    parser.add_argument("--limit", type=int, default=None, help="use only this many samples (tests)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--out", default=None, help="path prefix of the CSV and JSON results (rank 0 writes them)")
    parser.add_argument("--check", action="store_true", help="print MEMBER lines (tests/fault/run_grow_test.py)")
    parser.add_argument("--min-accuracy", type=float, default=0.0, help="with --check: fail below this final accuracy")
    args = parser.parse_args()

    started = time.monotonic()
    bf.init()
    initialized = time.monotonic()
    newcomer = bf.joined()
    if not bf.fault_tolerant() and not args.undisturbed:
        print("needs Open MPI 5 with ULFM: run it with `starlingrun --fault-tolerant`", file=sys.stderr)
        return 2
    worker = f"r{args.kill_rank}'" if newcomer else f"r{bf.rank()}"
    data = load_data(0, 1, args.limit)  # the whole training set; shards are drawn per epoch
    train_x, train_y, test_x, test_y = data
    torch.manual_seed(1234)
    model = make_model(args.hidden)
    times = {}
    if newcomer:
        # Started by the survivors' grow(): learn where the job is, then pull the model.
        state = bf.broadcast(torch.zeros(2, dtype=torch.float64), root_rank=0, name="join state")
        first_epoch, times["grow_started"] = int(state[0]), float(state[1])
        root = source_of(bf.rank())
        pull_parameters(model, root, newcomer=True)
        times["joined"] = time.monotonic()
    else:
        first_epoch = 0
        bf.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
        root = None
    optimizer = bf.DistributedAdaptWithCombineOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9),
                                                        model, bf.CommunicationType.neighbor_allreduce)
    rows, events = [], {}
    pulled_check = None
    if newcomer:
        pulled_check = float(flat_parameters(model).double().square().sum())

    def step(index):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(train_x[index]), train_y[index])
        loss.backward()
        optimizer.step()
        return loss.item()

    for epoch in range(first_epoch, args.epochs):
        disturbed = not args.undisturbed
        if disturbed and epoch == args.join_epoch and not newcomer:
            grow_started = time.monotonic()
            result = bf.grow(ranks=[args.kill_rank])
            events["grow_s"] = time.monotonic() - grow_started
            bf.broadcast(torch.tensor([float(epoch), grow_started], dtype=torch.float64), root_rank=0,
                         name="join state")
            root = source_of(result["joined"][0])
            pull_parameters(model, root, newcomer=False)
            if bf.rank() == root:
                pulled_check = float(flat_parameters(model).double().square().sum())
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(epoch))
        total, count, b = 0.0, 0, 0
        while True:
            rank, size = bf.rank(), bf.size()
            shard = order[rank::size]
            batches = max(1, len(shard) // args.batch_size)
            if b >= batches:
                break
            if disturbed and epoch == args.kill_epoch and worker == f"r{args.kill_rank}" and b == batches // 2:
                with open(f"{args.out or '/tmp/starling_ft'}.kill", "w") as f:
                    f.write(f"{time.monotonic():.6f}\n")
                os.kill(os.getpid(), signal.SIGKILL)
            try:
                total += step(shard[b * args.batch_size:(b + 1) * args.batch_size])
                count += 1
                if "repaired" in events and "continued" not in events:
                    events["continued"] = time.monotonic()
                if newcomer and "first_step" not in events:
                    events["first_step"] = time.monotonic()
            except starling.PeerFailedError as e:
                events["detected"] = time.monotonic()
                events["failed_ranks"] = e.ranks
                bf.repair()
                events["repaired"] = time.monotonic()
                # A step can complete on some survivors and fail on others: go on
                # together from the furthest one.
                b = int(bf.allgather(torch.tensor([float(b)]), name="resume").max())
                continue
            b += 1
        # Per epoch: every rank's mean loss and test accuracy, gathered by rank 0.
        row = torch.tensor([float(bf.rank()), total / max(count, 1), accuracy(model, test_x, test_y),
                            -1.0 if newcomer else float(worker[1:])], dtype=torch.float64)
        table = bf.allgather(row.unsqueeze(0), name="epoch log").view(-1, 4)
        if bf.rank() == 0:
            for r, loss, acc, who in table.tolist():
                rows.append((epoch, int(r), f"r{int(who)}" if who >= 0 else f"r{args.kill_rank}'", bf.size(), loss, acc))

    # The newcomer's pulled parameters were the source's, bit for bit (sum of squares).
    checks = bf.allgather(torch.tensor([[pulled_check if pulled_check is not None else -1.0,
                                         1.0 if newcomer else 0.0]], dtype=torch.float64), name="pull check")
    timing = bf.allgather(torch.tensor([[events.get("continued", -1.0), events.get("first_step", -1.0),
                                         events.get("grow_s", -1.0), times.get("grow_started", -1.0),
                                         events.get("detected", -1.0),
                                         PROCESS_STARTED if newcomer else -1.0,
                                         initialized if newcomer else -1.0]], dtype=torch.float64), name="timing")
    final_accuracy = float(bf.allreduce(torch.tensor([accuracy(model, test_x, test_y)]), name="final accuracy"))
    problems = []
    if not args.undisturbed:
        values = checks.tolist()
        pulled = [v for v, is_new in values if is_new == 1.0]
        source = [v for v, is_new in values if is_new == 0.0 and v >= 0]
        if len(pulled) != 1 or len(source) != 1 or pulled[0] != source[0]:
            problems.append(f"the newcomer's parameters differ from its source's: {values}")
    result = {"ranks_at_end": bf.size(), "final_mean_accuracy": final_accuracy, "epochs": args.epochs,
              "undisturbed": args.undisturbed}
    if bf.rank() == 0 and not args.undisturbed:
        t = timing.tolist()
        kill_file = f"{args.out or '/tmp/starling_ft'}.kill"
        killed = None
        if os.path.exists(kill_file):
            with open(kill_file) as f:
                killed = float(f.read())
        continued = max(v[0] for v in t)
        detected = max(v[4] for v in t)
        first_step = max(v[1] for v in t)
        grow_started = max(v[3] for v in t)
        result.update({
            "kill_rank": args.kill_rank, "kill_epoch": args.kill_epoch, "join_epoch": args.join_epoch,
            "kill_to_detect_s": detected - killed if killed else None,
            "kill_to_training_continues_s": continued - killed if killed else None,
            "grow_s": max(v[2] for v in t),
            "grow_start_to_newcomer_first_step_s": first_step - grow_started,
            # The grow's parts: the launcher starts the process; Python imports torch
            # and starling; bf.init() joins (the survivors wait in the grow meanwhile).
            "grow_start_to_newcomer_process_s": max(v[5] for v in t) - grow_started,
            "newcomer_imports_s": max(v[6] for v in t) - max(v[5] for v in t),
        })
        if killed is not None:
            os.remove(kill_file)
        if killed is None or not 0 < continued - killed < 30:
            problems.append(f"no recovery measured: {result}")
    if bf.rank() == 0:
        print(json.dumps(result), flush=True)
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(f"{args.out}.csv", "w") as f:
                f.write("epoch,rank,worker,size,loss,accuracy\n")
                for r in rows:
                    f.write(f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]:.6f},{r[5]:.6f}\n")
            with open(f"{args.out}.json", "w") as f:
                json.dump(result, f, indent=1)
    if final_accuracy < args.min_accuracy:
        problems.append(f"final mean accuracy {final_accuracy:.3f} < {args.min_accuracy}")
    if rows and not all(r[4] == r[4] for r in rows):  # NaN loss
        problems.append("a loss is NaN")
    rank = bf.rank()
    bf.shutdown()
    if args.check:
        status = "ok=1" if not problems else "ok=0 reason=" + "; ".join(problems).replace(" ", "_")
        print(f"MEMBER rank={rank} joined={int(newcomer)} {status} grow_s={events.get('grow_s', 0.0):.3f} "
              f"accuracy={final_accuracy:.4f} took={time.monotonic() - started:.2f}", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
