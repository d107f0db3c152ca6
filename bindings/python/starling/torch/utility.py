"""BlueFog's parameter and optimizer-state helpers (bluefog.torch.utility)."""

import collections.abc
from typing import Any, Callable, List, Tuple

import torch

from . import mpi_ops


def _named_tensors(params: Any) -> List[Tuple[str, torch.Tensor]]:
    """(name, tensor) in name order where there are names (a dict, or a list of (name,
    tensor)): operations are matched by submission order, and ranks may list the same
    parameters in another order (modules registered in another order)."""
    if isinstance(params, dict):
        return sorted(params.items(), key=lambda item: str(item[0]))
    if isinstance(params, list):
        if all(isinstance(p, tuple) and len(p) == 2 for p in params):
            return sorted(((str(name), p) for name, p in params), key=lambda item: item[0])
        return [(f"param.{i}", p) for i, p in enumerate(params)]
    raise ValueError(f"invalid params of type: {type(params)}")


def _in_place(params: Any, launch: Callable[[torch.Tensor, str], int]) -> None:
    """launch(tensor, name) for every tensor of params, in place, then waits. Tensors
    that are not contiguous (channels-last parameters and their optimizer state) travel
    as a contiguous copy, copied back in their own layout."""
    pending = []
    for name, p in _named_tensors(params):
        target = p.data if isinstance(p, torch.nn.Parameter) else p
        dense = target if target.is_contiguous() else target.contiguous()
        pending.append((target, dense, launch(dense, name)))
    for target, dense, handle in pending:
        mpi_ops.synchronize(handle)
        if dense is not target:
            with torch.no_grad():
                target.copy_(dense)


def broadcast_parameters(params: Any, root_rank: int) -> None:
    """Overwrites every tensor in params (a dict, a list of tensors or of (name, tensor),
    e.g. model.state_dict() or model.named_parameters()) with root_rank's, in place."""
    _in_place(params, lambda t, name: mpi_ops.broadcast_nonblocking_(t, root_rank, f"broadcast.{name}"))


def allreduce_parameters(params: Any) -> None:
    """Replaces every tensor in params by its average over all ranks, in place."""
    _in_place(params, lambda t, name: mpi_ops.allreduce_nonblocking_(t, average=True, name=f"allreduce.{name}"))


def _base_step(optimizer: torch.optim.Optimizer) -> None:
    """The wrapped optimizer's own step (BlueFog wrappers communicate in step())."""
    base = next(cls for cls in type(optimizer).__mro__
                if not cls.__module__.startswith("starling.") and "step" in cls.__dict__)
    base.step(optimizer)


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int) -> None:
    """Makes every rank's optimizer state (hyperparameters and per-parameter buffers)
    equal to root_rank's. An empty state is first created by one step with zero
    gradients; the parameters are left as they were."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if not optimizer.state:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        saved = [(p, p.data.clone(), p.grad) for p in params]
        with torch.no_grad():
            for p in params:
                p.grad = torch.zeros_like(p)
            _base_step(optimizer)
            for p, data, grad in saved:
                p.data.copy_(data)
                p.grad = grad

    tensors: List[Tuple[str, torch.Tensor]] = []
    restore: List[Callable[[], None]] = []

    def add_scalar(key: str, value: Any, assign: Callable[[Any], None]) -> None:
        t = torch.tensor([float(v) for v in value] if isinstance(value, tuple) else [float(value)],
                         dtype=torch.float64)
        kind = type(value)
        tensors.append((key, t))
        if kind is tuple:
            element = type(value[0]) if value else float
            restore.append(lambda: assign(tuple(element(v) for v in t.tolist())))
        else:
            restore.append(lambda: assign(kind(t.item())))

    for index, group in enumerate(optimizer.param_groups):
        for option in sorted(k for k in group if k != "params"):
            value = group[option]
            if torch.is_tensor(value):  # PyTorch 2: a tensor learning rate (lr=torch.tensor(...))
                tensors.append((f"{option}.{index}", value))
                continue
            if isinstance(value, bool) or not (isinstance(value, (int, float)) or
                                               (isinstance(value, tuple) and all(isinstance(v, (int, float))
                                                                                 for v in value))):
                continue  # flags and non-numeric options (foreach, maximize...) are not broadcast
            add_scalar(f"{option}.{index}", value, lambda v, g=group, o=option: g.__setitem__(o, v))
        for position, p in enumerate(group["params"]):
            state = optimizer.state.get(p, {})
            for key in sorted(state):
                value = state[key]
                name = f"{key}.{index}.{position}"
                if torch.is_tensor(value):
                    tensors.append((name, value))
                elif isinstance(value, (int, float)) and not isinstance(value, bool):
                    add_scalar(name, value, lambda v, s=state, k=key: s.__setitem__(k, v))
                elif isinstance(value, collections.abc.Iterable):
                    raise ValueError(f"cannot broadcast optimizer state {key!r} of type {type(value).__name__}")
    broadcast_parameters(tensors, root_rank)
    for assign in restore:
        assign()
