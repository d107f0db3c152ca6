"""Horovod's DistributedOptimizer over Starling (hvd.DistributedOptimizer).

The wrapped optimizer's class is subclassed on the fly, so isinstance() checks,
state_dict() and param_groups behave as the original. Gradients are averaged (op) over
the process set when step() or synchronize() runs, after backward_passes_per_step
backward passes have accumulated them: all reductions are started at once (Starling
fuses them) and waited for together. (DDP over backend="starling" overlaps the
reduction with backward instead.)
"""

import contextlib
from typing import Any, Iterator, List, Optional

import torch

from . import horovod as H


class _DistributedOptimizer:
    def _hvd_setup(self, named_parameters: Any, compression: Any, backward_passes_per_step: int, op: Any,
                   gradient_predivide_factor: float, process_set: Any) -> None:
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            names = [name for name, _ in named]
            if len(set(names)) != len(names):
                raise ValueError("named_parameters has duplicate names: each parameter needs a unique name")
            known = {id(p) for _, p in named}
            missing = [i for i, p in enumerate(params) if id(p) not in known]
            if missing:
                raise ValueError(f"named_parameters lacks {len(missing)} of the optimizer's parameters "
                                 f"(positions {missing[:5]}): pass model.named_parameters() of the optimized model")
            self._hvd_names = {id(p): name for name, p in named}
        else:
            self._hvd_names = {id(p): f"allreduce.noname.{i}" for i, p in enumerate(params)}
        if backward_passes_per_step < 1:
            raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
        op = H._op(op, None)
        if op not in (H.Average, H.Sum):
            raise ValueError("DistributedOptimizer takes op=hvd.Average or hvd.Sum (or Adasum in Horovod)")
        if gradient_predivide_factor != 1.0 and op != H.Average:
            raise ValueError("gradient_predivide_factor needs op=hvd.Average")
        self._hvd_op, self._hvd_compression = op, compression
        self._hvd_passes = backward_passes_per_step
        self._hvd_predivide = gradient_predivide_factor
        self._hvd_process_set = process_set
        self._hvd_synchronized = False
        self._hvd_skip = False

    def synchronize(self) -> None:
        """Reduces the accumulated gradients now (step() then does not again)."""
        params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
        size = self._hvd_process_set.size()
        pre = 1.0 / self._hvd_predivide if self._hvd_predivide != 1.0 else 1.0
        op, post = self._hvd_op, 1.0
        if self._hvd_predivide != 1.0:  # Horovod: divide by f before, by size/f after
            op, post = H.Sum, self._hvd_predivide / size
        started = [H._start_allreduce(p.grad, None, op, pre, post, self._hvd_process_set, self._hvd_compression,
                                      self._hvd_names[id(p)]) for p in params]
        for p, pending in zip(params, started):
            p.grad.copy_(pending.wait())
        self._hvd_synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """For step() after an explicit synchronize() (e.g. to clip gradients between)."""
        self._hvd_skip = True
        try:
            yield
        finally:
            self._hvd_skip = False

    def step(self, closure: Optional[Any] = None) -> Any:
        if not self._hvd_skip and not self._hvd_synchronized:
            self.synchronize()
        self._hvd_synchronized = False
        return self._hvd_base.step(self, closure)

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        self._hvd_synchronized = False
        return self._hvd_base.zero_grad(self, *args, **kwargs)


def DistributedOptimizer(optimizer: torch.optim.Optimizer, named_parameters: Any = None,  # noqa: N802
                         compression: Any = H.Compression.none, backward_passes_per_step: int = 1,
                         op: Any = H.Average, gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                         groups: Optional[List[Any]] = None, sparse_as_dense: bool = False,
                         process_set: Any = H.global_process_set) -> torch.optim.Optimizer:
    """Horovod's DistributedOptimizer: wraps optimizer so that step() first averages
    (op=hvd.Average; or sums, op=hvd.Sum) each gradient over every rank (or
    process_set). compression=hvd.Compression.fp16 sends float16. With
    backward_passes_per_step=N call step() after N backward passes (the gradients
    accumulate locally between; the reduction happens once). num_groups/groups only
    grouped Horovod's fusion; Starling fuses on its own."""
    if op == H.Adasum:
        H._op(op, None)  # raises: Adasum is not available
    if any(p.is_sparse for group in optimizer.param_groups for p in group["params"]) and not sparse_as_dense:
        raise ValueError("sparse parameters: pass sparse_as_dense=True (Starling reduces dense tensors)")
    # _hvd_base, not super(self.__class__, ...): the class may be subclassed again
    # (starling.torch.monitor_gradients), where that would recurse.
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(
        {k: v for k, v in _DistributedOptimizer.__dict__.items() if not k.startswith("__")},
        _hvd_base=optimizer.__class__))
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)  # the same param_groups, state, defaults and hooks
    wrapped._hvd_setup(named_parameters, compression, backward_passes_per_step, op, gradient_predivide_factor,
                       process_set)
    return wrapped
