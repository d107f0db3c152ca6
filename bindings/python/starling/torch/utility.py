"""BlueFog's parameter and optimizer-state helpers (bluefog.torch.utility)."""

import collections.abc
from typing import Any, Callable, List, Tuple

import torch

from . import mpi_ops


def _named_tensors(params: Any) -> List[Tuple[str, torch.Tensor]]:
    if isinstance(params, dict):
        return sorted(params.items())
    if isinstance(params, list):
        if all(isinstance(p, tuple) and len(p) == 2 for p in params):
            return [(str(name), p) for name, p in params]
        return [(f"param.{i}", p) for i, p in enumerate(params)]
    raise ValueError(f"invalid params of type: {type(params)}")


def broadcast_parameters(params: Any, root_rank: int) -> None:
    """Overwrites every tensor in params (a dict, a list of tensors or of (name, tensor),
    e.g. model.state_dict() or model.named_parameters()) with root_rank's, in place."""
    handles = [mpi_ops.broadcast_nonblocking_(p.data if isinstance(p, torch.nn.Parameter) else p, root_rank,
                                              f"broadcast.{name}")
               for name, p in _named_tensors(params)]
    for handle in handles:
        mpi_ops.synchronize(handle)


def allreduce_parameters(params: Any) -> None:
    """Replaces every tensor in params by its average over all ranks, in place."""
    handles = [mpi_ops.allreduce_nonblocking_(p.data if isinstance(p, torch.nn.Parameter) else p, average=True,
                                              name=f"allreduce.{name}")
               for name, p in _named_tensors(params)]
    for handle in handles:
        mpi_ops.synchronize(handle)


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
