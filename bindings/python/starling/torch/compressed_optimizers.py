"""Optimizers that communicate compressed tensors (issue 12), with BlueFog's
constructor conventions: each factory wraps a torch optimizer and returns an instance
of a subclass of its class.

- ``DistributedCompressedGradientAllreduceOptimizer``: gradient allreduce where every
  gradient travels compressed (any starling.compression compressor; use
  ``error_feedback=True`` with the biased ones: top-k, random-k, sign). All ranks get
  bit-identical averages, so the replicas stay identical.
- ``DistributedChocoSGDOptimizer``: CHOCO-SGD (Koloskova, Stich, Jaggi 2019): a local
  step, then one CHOCO gossip step per parameter over the static topology: only
  compressed differences to the public copies travel, and the ranks still reach
  consensus. The step size is the compression's ``gamma``.

State lives in the context under the parameter's name with a prefix
("compressed_grad." or "choco."); ``starling.torch.compression_reset()`` drops it.
"""

from typing import Any, Callable, Dict, Optional

import torch

from . import mpi_ops
from ..compression import Compression
from .optimizers import _BACKWARD_WARNING, _Distributed, _GradientAllreduce, _dense, _install, _wrap


def _check_compression(compression: Any) -> Compression:
    if not isinstance(compression, Compression):
        raise TypeError("compression must be a starling.compression.Compression (e.g. TopK(0.01, "
                        f"error_feedback=True)), not {type(compression).__name__}")
    return compression


class _CompressedGradientAllreduce(_GradientAllreduce):
    def __init__(self, params: Any, model: Any, compression: Compression, num_steps_per_communication: int) -> None:
        self._compression = _check_compression(compression)
        super().__init__(params, model, num_steps_per_communication)

    def _launch(self, p: torch.nn.Parameter) -> int:
        return mpi_ops.allreduce_nonblocking(_dense(p.grad), average=True, name="compressed_grad." + self._names[p],
                                             compression=self._compression)


class _ChocoSGD(_Distributed):
    _counting_message = _BACKWARD_WARNING

    def __init__(self, params: Any, model: Any, compression: Compression, num_steps_per_communication: int) -> None:
        self._compression = _check_compression(compression)
        super().__init__(params)
        self._setup(model, num_steps_per_communication)
        self._steps = 0

    def synchronize(self) -> None:
        """One CHOCO gossip step on every parameter (all launched, then awaited)."""
        handles: Dict[torch.nn.Parameter, int] = {}
        with torch.no_grad():
            for p in self._by_name():
                if p.requires_grad:
                    handles[p] = mpi_ops.neighbor_allreduce_nonblocking(_dense(p.data), name="choco." + self._names[p],
                                                                        compression=self._compression)
            for p, handle in handles.items():
                _install(p, mpi_ops.synchronize(handle))

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        self._after_repair()  # the repair dropped the CHOCO copies: they restart from zero
        loss = super().step(closure)  # x_{t+1/2} = x_t - lr * grad
        self._steps += 1
        if self._active and self._should_synchronize and self._steps % self._num_steps == 0:
            self.synchronize()  # x_{t+1} = x_{t+1/2} + gamma * sum_j w_ij (x_hat_j - x_hat_i)
        return loss


def DistributedCompressedGradientAllreduceOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                                                    compression: Compression,
                                                    num_steps_per_communication: int = 1) -> torch.optim.Optimizer:
    """Averages compressed gradients over all ranks before each local update, e.g.
    compression=TopK(0.01, error_feedback=True)."""
    return _wrap(optimizer, _CompressedGradientAllreduce, model, compression, num_steps_per_communication)


def DistributedChocoSGDOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                                 compression: Compression,
                                 num_steps_per_communication: int = 1) -> torch.optim.Optimizer:
    """CHOCO-SGD: a local step, then a CHOCO gossip step (compressed, with public copies)
    over the static topology every num_steps_per_communication steps; the step size is
    compression.gamma (e.g. TopK(0.1, gamma=0.4))."""
    return _wrap(optimizer, _ChocoSGD, model, compression, num_steps_per_communication)


__all__ = ["DistributedCompressedGradientAllreduceOptimizer", "DistributedChocoSGDOptimizer"]
