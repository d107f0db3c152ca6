"""decentralize(): DDP without the global gradient allreduce. Each rank averages its
parameters with its neighbors (adapt-with-combine, the update D-PSGD analyses):

    x_{k+1} = sum_j w_ij x_j,k  -  lr * g_i,k      (here: local step, plus W x_k - x_k)

Why a communication hook and an optimizer step hook together: a DDP communication hook
sees each gradient bucket as soon as backward has produced it, so it can start the
neighbor exchange of that bucket's parameters while backward goes on (the overlap DDP
users expect); but it must not change the parameters, which autograd still needs. The
hook therefore returns the local gradients unchanged (no allreduce) and starts a
nonblocking neighbor_allreduce of the bucket's parameters; the step hook, after the
local update, adds each parameter's W x_k - x_k.
"""

from typing import Any, List, Optional, Tuple

import torch
import torch.distributed as dist

from ...context import Context, as_topology
from ...topology_util import GetDynamicOnePeerSendRecvRanks


class _Averaging:
    def __init__(self, context: Context, dynamic: bool) -> None:
        self.context = context
        self.pending: List[Tuple[List[torch.Tensor], torch.Tensor, Any]] = []
        self.peers: Optional[dict] = None  # this step's dynamic weights
        self.schedule = (GetDynamicOnePeerSendRecvRanks(context.topology.to_networkx(), context.rank)
                         if dynamic else None)

    def weights(self) -> dict:
        if self.schedule is None:
            return {}
        if self.peers is None:
            send, recv = next(self.schedule)
            share = 1.0 / (len(recv) + 1)
            self.peers = {"self_weight": share, "src_weights": {r: share for r in recv}, "dst_weights": list(send)}
        return self.peers

    def hook(self, _state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        params = [p for p in bucket.parameters()]
        flat = torch.cat([p.detach().reshape(-1) for p in params])
        request = self.context.neighbor_allreduce_nonblocking(flat, **self.weights())
        self.pending.append((params, flat, request))
        future: torch.futures.Future = torch.futures.Future()
        future.set_result(bucket.buffer())
        return future

    def after_step(self, *_: Any) -> None:
        pending, self.pending, self.peers = self.pending, [], None
        with torch.no_grad():
            for params, flat, request in pending:
                averaged = request.wait()
                offset = 0
                for p in params:
                    n = p.numel()
                    p.add_((averaged[offset:offset + n] - flat[offset:offset + n]).view_as(p))
                    offset += n


def decentralize(model: Any, optimizer: torch.optim.Optimizer, *, topology: Any = None,
                 dynamic: bool = False) -> None:
    """Makes a DistributedDataParallel model train decentralized: no gradient
    allreduce; after each optimizer step every rank averages its parameters with its
    in-neighbors (topology: a networkx.DiGraph or starling.Topology over the ranks,
    set collectively; None: the context's, exponential-2 by default). dynamic=True
    averages with one peer per step, cycling through the topology's out-neighbors.
    Call it on every rank, after building the model and the optimizer."""
    from . import StarlingProcessGroup, world_context
    group = getattr(model, "process_group", None)
    context = group.context if isinstance(group, StarlingProcessGroup) else world_context()
    if topology is not None:
        context.set_topology(as_topology(topology))
    averaging = _Averaging(context, dynamic)
    def hook(state: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        return averaging.hook(state, bucket)  # DDP checks a hook's annotations
    model.register_comm_hook(None, hook)
    if hasattr(optimizer, "register_step_post_hook"):  # PyTorch >= 2.0
        optimizer.register_step_post_hook(averaging.after_step)
    else:
        step = optimizer.step

        def step_then_average(*args: Any, **kwargs: Any) -> Any:
            result = step(*args, **kwargs)
            averaging.after_step()
            return result
        optimizer.step = step_then_average  # type: ignore[assignment]
