"""Gradient noise scale and gradient variance while training, as KungFu's monitors.

With B = batch_size per rank, N ranks, g_i rank i's gradient and G their average:
  |G_small|^2 = mean_i |g_i|^2      (KungFu: the local |g_i|^2 only)
  |G_big|^2   = |G|^2
  G_biased = (N B |G_big|^2 - B |G_small|^2) / (N B - B)      (estimates |true gradient|^2)
  S_biased = (|G_small|^2 - |G_big|^2) / (1/B - 1/(N B))      (estimates trace(covariance))
each smoothed by an exponential moving average (the first value as is, then
alpha * old + (1 - alpha) * new), and noise_scale = S_ema / G_ema, the "simple noise
scale" B_simple of McCandlish et al., "An Empirical Model of Large-Batch Training".
variance = mean_i |g_i|^2 - |G|^2: the sum over elements of the variance of the
gradients across ranks (KungFu sums the per-tensor L2 norms of that variance, which
needs a full-size allreduce of the squared gradients; the sum needs only a scalar).

Averaging |g_i|^2 over the ranks makes every rank see the same value (KungFu's differ
per rank), so a decision taken on it is the same everywhere.
"""

from typing import Any, Callable, List, Optional

import torch

from .. import metrics
from ..errors import InvalidArgumentError
from . import _state as S
from . import mpi_ops

_monitor_names = iter(range(1, 1 << 62)).__next__


class GradientMonitor:
    """The monitor's state and latest values (optimizer.monitor)."""

    def __init__(self, batch_size: int, interval: int, alpha: float, name: Optional[str]) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"monitor_gradients: batch_size must be a positive int (the batch size "
                                       f"of one rank per step), got {batch_size!r}")
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise InvalidArgumentError(f"monitor_gradients: interval must be a positive int (monitor every "
                                       f"interval-th step), got {interval!r}")
        if not isinstance(alpha, (int, float)) or not 0.0 <= float(alpha) < 1.0:
            raise InvalidArgumentError(f"monitor_gradients: alpha must be in [0, 1) (the weight of the old "
                                       f"value in the moving average), got {alpha!r}")
        self.batch_size, self.interval, self.alpha = batch_size, interval, float(alpha)
        self.name = name if name is not None else f"monitor{_monitor_names()}"
        self.steps = 0              # step() calls so far
        self.monitored_steps = 0    # of those, measured ones
        self.noise_scale: Optional[float] = None   # S_ema / G_ema (None at 1 rank or before the first)
        self.variance: Optional[float] = None      # mean_i |g_i|^2 - |G|^2 at the last monitored step
        self.local_sq_norm: Optional[float] = None  # mean_i |g_i|^2 at the last monitored step
        self.average_sq_norm: Optional[float] = None  # |G|^2 at the last monitored step
        self.g_ema: Optional[float] = None
        self.s_ema: Optional[float] = None

    def _smooth(self, old: Optional[float], new: float) -> float:
        return new if old is None else self.alpha * old + (1.0 - self.alpha) * new

    def record(self, local_sq: float, average_sq: float, size: int) -> None:
        """Updates the values from one monitored step: local_sq, the ranks' mean squared
        gradient norm, and average_sq, the squared norm of their average gradient."""
        self.monitored_steps += 1
        self.local_sq_norm, self.average_sq_norm = local_sq, average_sq
        self.variance = local_sq - average_sq
        if size < 2:  # one batch size only: nothing to compare
            return
        small, big = float(self.batch_size), float(self.batch_size * size)
        g_biased = (big * average_sq - small * local_sq) / (big - small)
        s_biased = (local_sq - average_sq) / (1.0 / small - 1.0 / big)
        self.g_ema = self._smooth(self.g_ema, g_biased)
        self.s_ema = self._smooth(self.s_ema, s_biased)
        self.noise_scale = self.s_ema / self.g_ema if self.g_ema != 0.0 else float("inf")

    def __repr__(self) -> str:
        return (f"GradientMonitor(name={self.name!r}, noise_scale={self.noise_scale}, variance={self.variance}, "
                f"monitored_steps={self.monitored_steps})")


def _sq_norm(grads: List[torch.Tensor]) -> float:
    """The squared L2 norm of all of grads together, accumulated in float64."""
    if not grads:
        return 0.0
    norms = torch.stack([torch.linalg.vector_norm(g.detach(), dtype=torch.float64) for g in grads])
    return float(torch.dot(norms, norms).item())


def measure_by_averaging(m: GradientMonitor, grads: List[torch.Tensor], size: int) -> torch.Tensor:
    """One monitored step where nothing else averages the gradients: one allreduce of
    every gradient and |g_i|^2 (float64, beside them) records the values in m. Returns
    the average of the gradients, flattened in the order of grads (float64)."""
    local_sq = _sq_norm(grads)
    flat = torch.cat([g.detach().reshape(-1).to(torch.float64) for g in grads] +
                     [torch.tensor([local_sq], dtype=torch.float64)])
    total = mpi_ops.allreduce(flat, average=True, name=f"starling.monitor.{m.name}")
    average = total[:-1]
    m.record(float(total[-1].item()), float(torch.sum(average ** 2).item()), size)
    return average


def consensus_distance(tensor: torch.Tensor, name: Optional[str] = None) -> float:
    """How far the ranks' copies of tensor are from agreeing: sqrt(mean_i norm(x_i - xbar)^2),
    xbar the average over the ranks (the quantity decentralized SGD's analysis tracks;
    0 when every rank holds the same values). Computed in float64 from one allreduce of
    the tensor and one of a scalar; collective, the same value on every rank."""
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"consensus_distance: expected a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        raise InvalidArgumentError(f"consensus_distance: the tensor must be floating point, got {tensor.dtype}")
    if name is not None and not isinstance(name, str):
        raise InvalidArgumentError(f"consensus_distance: name must be a str or None, got {name!r}")
    label = name if name is not None else f"consensus{_monitor_names()}"
    x = tensor.detach().to(torch.float64)
    mean = mpi_ops.allreduce(x, average=True, name=f"starling.consensus.{label}.mean")
    local = torch.sum((x - mean) ** 2).reshape(1)
    spread = mpi_ops.allreduce(local, average=True, name=f"starling.consensus.{label}.spread")
    return float(torch.sqrt(spread[0]).item())


def _grads(optimizer: Any) -> List[torch.Tensor]:
    """The gradients of every parameter (zeros where a rank has none, as the gradient
    allreduce does), in parameter-group order: the same on every rank."""
    return [p.grad if p.grad is not None else torch.zeros_like(p)
            for group in optimizer.param_groups for p in group["params"] if p.requires_grad]


def _averaging_kind(optimizer: Any) -> Optional[str]:
    """"starling"/"horovod" where step() averages the gradients over all ranks (the
    monitor then adds one scalar allreduce), None otherwise (it averages them itself)."""
    from .optimizers import _GradientAllreduce
    if isinstance(optimizer, _GradientAllreduce):
        if optimizer._num_steps != 1:
            raise InvalidArgumentError("monitor_gradients: num_steps_per_communication must be 1 (the monitor "
                                       "reads the local and the averaged gradient of one step)")
        return "starling"
    if hasattr(optimizer, "_hvd_setup"):
        from . import horovod as H
        if optimizer._hvd_process_set is not H.global_process_set:
            raise InvalidArgumentError("monitor_gradients: a DistributedOptimizer over a process set other than "
                                       "the global one is not supported (the monitor averages over every rank)")
        return "horovod"
    return None


class _Monitored:
    """Mixed in front of the optimizer's class: step() measures every interval-th step."""

    monitor: GradientMonitor
    _monitor_kind: Optional[str]

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        m = self.monitor
        measure = m.steps % m.interval == 0
        m.steps += 1
        if not measure or S.context is None:
            return super().step(closure)  # type: ignore[misc]
        size = mpi_ops.size()
        grads = _grads(self)
        if size > 1 and self._monitor_kind is None:
            measure_by_averaging(m, grads, size)
            return super().step(closure)  # type: ignore[misc]
        local_sq = _sq_norm(grads)
        if size == 1:  # the local gradient is the average
            m.record(local_sq, local_sq, size)
            return super().step(closure)  # type: ignore[misc]
        # The optimizer averages the gradients: let it, read the average, then one
        # scalar allreduce for mean_i |g_i|^2.
        self.synchronize()  # type: ignore[attr-defined]
        average_sq = _sq_norm(_grads(self))
        if self._monitor_kind == "horovod" and self._hvd_op != _horovod_average():  # type: ignore[attr-defined]
            average_sq /= float(size) ** 2  # op=Sum: the sum of the gradients
        mean_local = mpi_ops.allreduce(torch.tensor([local_sq], dtype=torch.float64), average=True,
                                       name=f"starling.monitor.{m.name}")
        m.record(float(mean_local[0].item()), average_sq, size)
        with self.skip_synchronize():  # type: ignore[attr-defined]
            return super().step(closure)  # type: ignore[misc]


def _horovod_average() -> Any:
    from . import horovod as H
    return H.Average


def monitor_gradients(optimizer: torch.optim.Optimizer, batch_size: int, interval: int = 1, alpha: float = 0.9,
                      name: Optional[str] = None) -> torch.optim.Optimizer:
    """Measures the gradient noise scale and variance (KungFu's monitors) every
    interval-th step() of optimizer, a starling.torch optimizer or any torch optimizer,
    and returns it (the same object, whose class gains the monitoring step; its hooks
    and state stay). batch_size: the samples of one rank per step; alpha: the moving
    average's weight of the old value. optimizer.monitor holds the values (noise_scale,
    variance, monitored_steps), which the metrics endpoint also exports (as name).

    Cost per monitored step: over DistributedGradientAllreduceOptimizer or
    hvd.DistributedOptimizer one extra allreduce of one float64; over any other
    optimizer (decentralized ones average parameters, not gradients) one allreduce of
    every gradient, since the average gradient exists nowhere else. Collective: every
    rank wraps its optimizer alike and calls step() as often."""
    if isinstance(optimizer, _Monitored):
        raise InvalidArgumentError("monitor_gradients: this optimizer is monitored already (optimizer.monitor)")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidArgumentError(f"monitor_gradients: expected a torch.optim.Optimizer, got "
                                   f"{type(optimizer).__name__}")
    monitor = GradientMonitor(batch_size, interval, alpha, name)
    kind = _averaging_kind(optimizer)
    base = type(optimizer)
    optimizer.__class__ = type(base.__name__, (_Monitored, base), {"__module__": base.__module__,
                                                                   "__qualname__": base.__qualname__})
    optimizer.monitor = monitor  # type: ignore[attr-defined]
    optimizer._monitor_kind = kind  # type: ignore[attr-defined]
    metrics.register_monitor(monitor)
    return optimizer
