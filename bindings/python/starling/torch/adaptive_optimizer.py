"""KungFu's AdaptiveSGDOptimizer, and a switch driven by the gradient noise scale.

Training starts with synchronous model averaging (SMA: each step pulls the parameters
towards the average of all ranks', then applies the local gradient, as
SynchronousModelAveraging) and switches once, for good, to synchronous SGD (the
gradients averaged over all ranks before every update). At the switch rank 0's
parameters and optimizer state are broadcast, so from then on every replica is the
same. When to switch:

- change_step: at that step, as KungFu does (step k is the (k+1)-th call of step()).
- switch_when: a rule on the monitored gradient statistics (GradientMonitor, measured
  every monitor_interval steps during SMA): a callable taking the monitor and returning
  a bool, or "noise_scale", which switches once the smoothed gradient noise scale
  reaches the global batch (size * batch_size). The reason: while the noise scale is
  below the global batch, averaging the gradients of every rank adds samples that barely
  improve the step (McCandlish et al.'s critical batch size), so cheap local steps with
  model averaging lose little; once it is above, synchronous SGD uses every sample.

Both may be given: whichever comes first switches.
"""

from typing import Any, Callable, List, Optional, Union

import torch

from .. import metrics
from . import mpi_ops, utility
from .decentralized_optimizers import _checked, _check_positive_int, _Decentralized
from .monitor import GradientMonitor, measure_by_averaging
from .optimizers import _wrap

SwitchRule = Union[None, str, Callable[[GradientMonitor], Any]]


def _noise_scale_reached(monitor: GradientMonitor) -> bool:
    return monitor.noise_scale is not None and monitor.noise_scale >= mpi_ops.size() * monitor.batch_size


class AdaptiveSGD(_Decentralized):
    """SMA until the switch, then synchronous SGD (see the module). After the switch,
    switched_at is the step it happened at and phase is "ssgd"; monitor (when
    switch_when is given) holds the statistics of the last monitored step, which stop
    being measured at the switch.

    Per step: during SMA one allreduce of the parameters, plus, every monitor_interval
    steps with switch_when, one allreduce of the gradients (the average gradient exists
    nowhere else) and a one-element broadcast of rank 0's decision; at the switch one
    broadcast of the parameters and of the optimizer state; afterwards one allreduce of
    the gradients. A gradient that is None counts as zeros."""

    def __init__(self, params: Any, model: Any, change_step: Optional[int], alpha: float, switch_when: SwitchRule,
                 batch_size: Optional[int], monitor_interval: int, prefix: str) -> None:
        super().__init__(params)
        if change_step is not None and (isinstance(change_step, bool) or not isinstance(change_step, int)
                                        or change_step < 0):
            raise ValueError(f"change_step must be None or an int >= 0 (the step at which to switch), "
                             f"got {change_step!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0.0 < alpha <= 1.0):
            raise ValueError(f"alpha must be a number in (0, 1] (SMA's pull towards the average), got {alpha!r}")
        if switch_when is not None and switch_when != "noise_scale" and not callable(switch_when):
            raise ValueError(f"switch_when must be None, \"noise_scale\" or a callable taking the GradientMonitor, "
                             f"got {switch_when!r}")
        if change_step is None and switch_when is None:
            raise ValueError("give change_step, switch_when or both: without either, training never switches "
                             "(use DistributedSynchronousModelAveragingOptimizer for SMA alone)")
        self._interval = _check_positive_int(monitor_interval, "monitor_interval")
        self.monitor: Optional[GradientMonitor] = None
        if switch_when is not None:
            if batch_size is None:
                raise ValueError("switch_when needs batch_size (the samples of one rank per step), which the "
                                 "gradient noise scale is measured in")
            self.monitor = GradientMonitor(_check_positive_int(batch_size, "batch_size"), self._interval, 0.9,
                                           f"{prefix}.monitor")
            metrics.register_monitor(self.monitor)
        self._setup(model, prefix)
        self.alpha = float(alpha)
        self.change_step = change_step
        self._rule: Optional[Callable[[GradientMonitor], Any]] = (
            _noise_scale_reached if switch_when == "noise_scale" else switch_when)  # type: ignore[assignment]
        self.switched_at: Optional[int] = None
        self._steps = 0

    @property
    def phase(self) -> str:
        """"sma" before the switch, "ssgd" after it."""
        return "sma" if self.switched_at is None else "ssgd"

    def _grads(self) -> List[torch.Tensor]:
        return [p.grad if p.grad is not None else torch.zeros_like(p) for _, p in self._named]

    def _rank0_decides(self) -> bool:
        """Rank 0 applies the rule; every rank gets its answer (a rule may read values
        that differ between ranks, and the ranks must switch at the same step). If the
        rule raises on rank 0, every rank raises."""
        verdict = 0.0
        failure: Optional[BaseException] = None
        if mpi_ops.rank() == 0:
            try:
                verdict = 1.0 if self._rule(self.monitor) else 0.0  # type: ignore[misc]
            except Exception as error:  # told to every rank below, then raised here
                failure, verdict = error, -1.0
        answer = mpi_ops.broadcast(torch.tensor([verdict], dtype=torch.float64), 0,
                                   name=self._op_name("switch", "decision"))
        if failure is not None:
            raise failure
        if answer[0].item() < 0:
            raise RuntimeError("switch_when raised an exception on rank 0 (see rank 0's error)")
        return bool(answer[0].item() > 0)

    def _switch(self) -> None:
        """From rank 0's parameters and optimizer state on, synchronous SGD."""
        self.switched_at = self._steps
        if self._active:
            self._take_rank0s()

    def _take_rank0s(self) -> None:
        """Rank 0's parameters and optimizer state, everywhere."""
        utility.broadcast_parameters([(name, p.data) for name, p in self._named], 0)
        utility.broadcast_optimizer_state(self, 0)

    def _average_gradients(self, average: Optional[torch.Tensor]) -> None:
        """p.grad = the average over ranks (average: already computed, flat, in
        self._named order)."""
        grads = self._grads()
        if average is None:
            handles = [mpi_ops.allreduce_nonblocking(g, average=True, name=self._op_name("g", name))
                       for (name, _), g in zip(self._named, grads)]
            averaged = [mpi_ops.synchronize(h) for h in handles]
        else:
            averaged, offset = [], 0
            for g in grads:
                averaged.append(average[offset:offset + g.numel()].reshape(g.shape).to(g.dtype))
                offset += g.numel()
        for (_, p), a in zip(self._named, averaged):
            p.grad = a

    def _pull_towards_average(self) -> None:
        handles = {p: mpi_ops.allreduce_nonblocking(p.data, average=True, name=self._op_name("x", name))
                   for name, p in self._named}
        with torch.no_grad():
            for p, handle in handles.items():
                p.data.add_(mpi_ops.synchronize(handle) - p.data, alpha=self.alpha)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One step of the current phase (see the class). Returns the closure's loss, if any."""
        if self._after_repair() and self.switched_at is not None and self._active:
            self._take_rank0s()  # a rank died mid-step: the survivors may differ by that step
        average = None
        if self.switched_at is None:
            switch = self.change_step is not None and self._steps >= self.change_step
            m = self.monitor
            if not switch and m is not None and self._active and self._steps % self._interval == 0:
                m.steps = self._steps + 1
                average = measure_by_averaging(m, self._grads(), mpi_ops.size())
                switch = self._rank0_decides()
            if switch:
                self._switch()
            elif self._active:
                self._pull_towards_average()
        if self.switched_at is not None and self._active:
            self._average_gradients(average)
        self._steps += 1
        return super().step(closure)


def DistributedAdaptiveSGDOptimizer(  # noqa: N802
        optimizer: torch.optim.Optimizer, model: Any, change_step: Optional[int] = None, alpha: float = 0.1,
        switch_when: SwitchRule = None, batch_size: Optional[int] = None, monitor_interval: int = 10,
        name_prefix: str = "adaptive") -> torch.optim.Optimizer:
    """KungFu's AdaptiveSGDOptimizer: SMA (pull alpha towards the average) until
    change_step, then synchronous SGD from rank 0's parameters; or switch when the rule
    switch_when says so ("noise_scale", or a callable on the GradientMonitor, measured
    every monitor_interval steps with batch_size samples per rank). See AdaptiveSGD."""
    return _wrap(_checked(optimizer), AdaptiveSGD, model, change_step, alpha, switch_when, batch_size,
                 monitor_interval, name_prefix)


__all__ = ["AdaptiveSGD", "DistributedAdaptiveSGDOptimizer"]
