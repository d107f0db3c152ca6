"""BlueFog's distributed optimizers (bluefog.torch.optimizers) over Starling.

Each factory wraps a torch optimizer: the result is an instance of a subclass of the
optimizer's own class (so ``isinstance(opt, torch.optim.SGD)`` holds) whose hooks
launch nonblocking communication during forward or backward and whose ``step()``
finishes it. Hooks exist only with more than one rank.

- Adapt-with-combine (AWC): forward hooks average the parameters with neighbors while
  the gradient is computed; step() = combine, then the local update.
- Adapt-then-combine (ATC): gradient hooks apply the local update per parameter as soon
  as its gradient is ready, then average; step() finishes the averaging.
- Gradient allreduce: Horovod-style averaging of gradients.
- Window put / pull get / push-sum: one-sided updates over windows.
"""

import contextlib
import math
import time
import warnings
from enum import Enum
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

from . import _state, mpi_ops
from ..topology_util import GetRecvWeights
from ._parameter_updates import STEP_FUNCTIONS

_FORWARD_WARNING = ("Unexpected behavior:\n  After num_steps_per_communication times of forward computation "
                    "`y=model(x)` are called,\n  an optimizer step() function must be called.\n  It does not "
                    "matter if you call other functions in between, such as zero_grad().")
_BACKWARD_WARNING = ("Unexpected behavior:\n  After num_steps_per_communication times of backward computation "
                     "`loss.backward()` are called,\n  an optimizer step() function must be called.\n  It does "
                     "not matter if you call other functions in between, such as zero_grad().")


class CommunicationType(Enum):
    """How the optimizers of starling.torch average: over the neighbors, hierarchically
    (inside each machine, then between machines), with a global allreduce, or not at all."""
    neighbor_allreduce = "neighbor.allreduce"
    hierarchical_neighbor_allreduce = "hierarchical.neighbor.allreduce"
    allreduce = "allreduce"
    empty = "empty"


def _named_parameters(model: Any) -> Tuple[List[torch.nn.Module], List[Tuple[str, torch.nn.Parameter]]]:
    if isinstance(model, torch.nn.Module):
        models = [model]
    elif isinstance(model, (list, tuple)) and model and all(isinstance(m, torch.nn.Module) for m in model):
        models = list(model)
    else:
        raise ValueError("model must be a torch.nn.Module or a list of them, got " + type(model).__name__)
    named = [item for m in models for item in m.named_parameters()]
    seen, duplicates = set(), set()
    for name, _ in named:
        (duplicates if name in seen else seen).add(name)
    if duplicates:
        raise ValueError("Parameter names in named_parameters must be unique. Found duplicates: "
                         + ", ".join(sorted(duplicates)))
    return models, named


def _dense(t: torch.Tensor) -> torch.Tensor:
    """t, or a contiguous copy of it (channels-last and other strided parameters, whose
    gradients and optimizer state share their layout): Starling moves contiguous memory,
    and every rank must send elements in the same (logical) order whatever its layout."""
    return t if t.is_contiguous() else t.contiguous()


def _install(target: torch.Tensor, result: torch.Tensor) -> None:
    """Puts a communication result into target: takes its storage when target is
    contiguous (no copy), else copies into it, keeping target's memory layout."""
    if target.is_contiguous():
        target.set_(result)
    else:
        target.copy_(result)


def _leaf_modules(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    for m in module.modules():
        if next(m.children(), None) is None:
            yield m


class _Distributed:
    """What every wrapper shares: parameter names, the counting rule, skip_synchronize
    and timeline hooks. Placed before the torch optimizer class in the MRO."""

    _counting_message = _FORWARD_WARNING

    def _setup(self, model: Any, num_steps_per_communication: int) -> None:
        self._models, named = _named_parameters(model)
        handled = {p for group in self.param_groups for p in group["params"]}
        known = {p for _, p in named}
        if any(p not in known for p in handled):
            raise ValueError("Named parameters provided by model are mismatch with the parameters handled by "
                             "optimizer. Pass the model whose parameters the optimizer updates.")
        self._names: Dict[torch.nn.Parameter, str] = {p: name for name, p in named if p in handled}
        self._num_steps = int(num_steps_per_communication)
        self._should_synchronize = True
        self._warned = False
        self._hooks: List[Any] = []
        self._timeline_hooks: List[Any] = []
        self._active = mpi_ops.size() > 1
        self._repairs_seen = _state.repairs
        if _state.timeline_on:
            self.turn_on_timeline()

    def _after_repair(self) -> None:
        """After starling.torch.repair() (a rank died): what was in flight is gone, so
        the next step communicates afresh, over the survivors."""
        if self._repairs_seen == _state.repairs:
            return
        self._repairs_seen = _state.repairs
        self._active = mpi_ops.size() > 1
        getattr(self, "_handles", {}).clear()
        getattr(self, "_ready", set()).clear()
        if hasattr(self, "_next"):
            self._next = 0
            self._fired = []
        for name in ("_reduce_delay", "_allreduce_delay", "_delay"):
            counters = getattr(self, name, {})
            for p in counters:  # in place: a caller may hold the dict
                counters[p] = self._num_steps
        self._reset_weights()

    def _reset_weights(self) -> None:
        """Weights name ranks, which a repair renumbers: back to the defaults of the
        topology over the survivors (a program that sets its own sets them again)."""

    def _count(self, counters: Dict[Any, int], p: Any) -> bool:
        """Decrements p's counter; True when it reaches 0 (time to communicate)."""
        self._after_repair()  # hooks of the first step after a repair count afresh
        if counters[p] <= 0:
            if not self._warned:
                self._warned = True
                warnings.warn(self._counting_message)
            return False
        counters[p] -= 1
        return counters[p] == 0

    def _training_parameters(self, module: torch.nn.Module) -> List[torch.nn.Parameter]:
        """The parameters a forward hook communicates, by name: every rank submits the
        same operations in the same order even where modules were registered in another
        order (operations are matched by submission order)."""
        found = [p for leaf in _leaf_modules(module) if leaf.training for p in leaf.parameters(recurse=False)
                 if p.requires_grad and p in self._names]
        return sorted(found, key=self._names.__getitem__)

    def _by_name(self) -> List[torch.nn.Parameter]:
        """The parameters in name order (see _training_parameters)."""
        return sorted(self._names, key=self._names.__getitem__)

    @contextlib.contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """step() inside this block does not synchronize (call synchronize() yourself)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def turn_on_timeline(self) -> None:
        """Records FORWARD and GRADIENT COMPT. per parameter on the timeline."""
        if self._timeline_hooks:
            return
        for model in self._models:
            for leaf in _leaf_modules(model):
                params = [p for p in leaf.parameters(recurse=False) if p in self._names]
                if not params:
                    continue
                self._timeline_hooks.append(leaf.register_forward_pre_hook(self._timeline_forward_start(params)))
                self._timeline_hooks.append(leaf.register_forward_hook(self._timeline_forward_end(params)))
        for p, name in self._names.items():
            if p.requires_grad:
                self._timeline_hooks.append(p.register_hook(self._timeline_backward_end(name)))

    def turn_off_timeline(self) -> None:
        for hook in self._timeline_hooks:
            hook.remove()
        self._timeline_hooks = []

    def _timeline_forward_start(self, params: List[Any]) -> Callable[..., None]:
        def hook(module: Any, inputs: Any) -> None:
            for p in params:
                mpi_ops.timeline_start_activity(self._names[p], "FORWARD")
        return hook

    def _timeline_forward_end(self, params: List[Any]) -> Callable[..., None]:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            for p in params:
                mpi_ops.timeline_end_activity(self._names[p])
                mpi_ops.timeline_start_activity(self._names[p], "GRADIENT COMPT.")
        return hook

    def _timeline_backward_end(self, name: str) -> Callable[[Any], None]:
        def hook(grad: Any) -> None:
            mpi_ops.timeline_end_activity(name)
        return hook


class _Combining(_Distributed):
    """Parameter averaging shared by AWC and ATC: the communication knobs (attributes a
    program may change every step, e.g. for dynamic topologies) and synchronize()."""

    def _setup_combine(self, communication_type: CommunicationType) -> None:
        self._communication_type = communication_type
        self._handles: Dict[Any, Optional[int]] = {}
        self._reduce_delay = {p: self._num_steps for p in self._names}
        self._reset_weights()
        self.enable_topo_check = False

    def _reset_weights(self) -> None:
        self.self_weight: Optional[float] = None
        self.src_weights: Optional[Dict[int, float]] = None
        self.dst_weights: Any = None
        self.src_machine_weights: Optional[Dict[int, float]] = None
        self.dst_machine_weights: Any = None

    @property
    def communication_type(self) -> CommunicationType:
        return self._communication_type

    @communication_type.setter
    def communication_type(self, value: CommunicationType) -> None:
        if not isinstance(value, CommunicationType):
            raise ValueError(f"communication_type must be a CommunicationType, got {value!r}")
        self._communication_type = value

    def _communicate(self, p: torch.nn.Parameter) -> Optional[int]:
        name, kind, data = self._names[p], self._communication_type, _dense(p.data)
        if kind == CommunicationType.neighbor_allreduce:
            return mpi_ops.neighbor_allreduce_nonblocking(
                data, name=name, self_weight=self.self_weight, src_weights=self.src_weights,
                dst_weights=self.dst_weights, enable_topo_check=self.enable_topo_check)
        if kind == CommunicationType.hierarchical_neighbor_allreduce:
            return mpi_ops.hierarchical_neighbor_allreduce_nonblocking(
                data, name=name, self_weight=self.self_weight, src_machine_weights=self.src_machine_weights,
                dst_machine_weights=self.dst_machine_weights, enable_topo_check=self.enable_topo_check)
        if kind == CommunicationType.allreduce:
            return mpi_ops.allreduce_nonblocking(data, average=True, name=name)
        return None

    def synchronize(self) -> None:
        """Waits for the averaging launched by the hooks and installs the results."""
        self._after_repair()
        with torch.no_grad():
            for p, handle in self._handles.items():
                if handle is not None:
                    _install(p, mpi_ops.synchronize(handle))
                self._reduce_delay[p] = self._num_steps
        self._handles.clear()


class _AdaptWithCombine(_Combining):
    def __init__(self, params: Any, model: Any, communication_type: CommunicationType,
                 num_steps_per_communication: int) -> None:
        super().__init__(params)
        self._setup(model, num_steps_per_communication)
        self._setup_combine(communication_type)
        if self._active:
            self._hooks = [m.register_forward_hook(self._forward_hook) for m in self._models]

    def _forward_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        for p in self._training_parameters(module):
            if self._count(self._reduce_delay, p):
                self._handles[p] = self._communicate(p)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        self._after_repair()
        if self._active and self._should_synchronize:
            self.synchronize()
        return super().step(closure)


class _AdaptThenCombine(_Combining):
    _counting_message = _BACKWARD_WARNING

    def __init__(self, params: Any, model: Any, communication_type: CommunicationType,
                 num_steps_per_communication: int) -> None:
        super().__init__(params)
        self._setup(model, num_steps_per_communication)
        self._setup_combine(communication_type)
        self._step_delay = {p: self._num_steps for p in self._names}
        self._groups = {p: group for group in self.param_groups for p in group["params"]}
        self._step_function: Optional[Callable[..., None]] = None
        if self._active:
            self._hooks = [p.register_hook(self._gradient_hook(p)) for p in self._names if p.requires_grad]

    def register_step_function(self, step_function: Callable[[Any, torch.Tensor, torch.Tensor, Dict[str, Any]],
                                                             None]) -> None:
        """Sets the parameter-wise update func(optimizer, p, grad, param_group) used for
        optimizers other than SGD, Adam, AdamW, RMSprop, Adagrad and Adadelta."""
        self._step_function = step_function

    def _gradient_hook(self, p: torch.nn.Parameter) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            if self._count(self._step_delay, p):
                with torch.no_grad():
                    self._adapt(p, grad)
            if self._count(self._reduce_delay, p):
                self._handles[p] = self._communicate(p)
        return hook

    def _adapt(self, p: torch.nn.Parameter, grad: torch.Tensor) -> None:
        group = self._groups[p]
        if self._step_function is not None:
            self._step_function(self, p, grad, group)
            return
        for kind, update in STEP_FUNCTIONS:
            if isinstance(self, kind):
                update(self.state[p], p, grad, group)
                return
        raise ValueError(f"{type(self).__name__} has no parameter-wise update for the adapt-then-combine optimizer; "
                         "register one with optimizer.register_step_function(func(optimizer, p, grad, group))")

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        self._after_repair()
        if not (self._active and self._handles):
            return super().step(closure)  # a local step between communications
        delays = [self._step_delay[p] for p in self._names if p.requires_grad]
        if any(d != 0 for d in delays):
            raise ValueError("We do not support partial step update in ATC yet.")
        for p in self._step_delay:
            self._step_delay[p] = self._num_steps
        if self._should_synchronize:
            self.synchronize()
        return None


class _GradientAllreduce(_Distributed):
    """Horovod-style gradient averaging. Starling matches operations by submission
    order, so every rank must launch the gradients in one order, whatever order its
    hooks fire in (a parameter unused on some ranks fires there never; modules may be
    registered in another order). The first synchronize() launches every gradient in
    name order and agrees on rank 0's hook order for the later steps; from then on a
    hook launches its gradient, and those after it that are ready, as soon as every
    gradient before it in that order has been launched (the usual case, the same order
    everywhere, overlaps each allreduce with the rest of the backward pass), and
    synchronize() launches what is left."""

    _counting_message = _BACKWARD_WARNING

    def __init__(self, params: Any, model: Any, num_steps_per_communication: int) -> None:
        super().__init__(params)
        self._setup(model, num_steps_per_communication)
        self._allreduce_delay = {p: self._num_steps for p in self._names}
        self._handles: Dict[Any, int] = {}
        self._order: Optional[List[Any]] = None  # the agreed launch order (after the first step)
        self._fired: List[Any] = []              # this rank's hook order, until then
        self._ready: set = set()
        self._next = 0                           # _order[:_next] are launched
        self._accumulators: List[Any] = []
        if self._active:
            for p in self._names:
                if p.requires_grad:
                    # The hook of the gradient accumulator fires once p.grad holds the sum.
                    accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                    self._hooks.append(accumulator.register_hook(self._accumulated_hook(p)))
                    self._accumulators.append(accumulator)

    def _launch(self, p: torch.nn.Parameter) -> int:
        return mpi_ops.allreduce_nonblocking(_dense(p.grad), average=True, name=self._names[p])

    def _accumulated_hook(self, p: torch.nn.Parameter) -> Callable[..., None]:
        def hook(*unused: Any) -> None:
            if self._count(self._allreduce_delay, p):
                if self._order is None:
                    self._fired.append(p)
                else:
                    self._ready.add(p)
                    self._launch_ready()
        return hook

    def _launch_ready(self) -> None:
        """Launches the ready gradients at the front of the agreed order."""
        order = self._order
        while self._next < len(order):
            p = order[self._next]
            if not p.requires_grad:  # frozen since (on every rank alike): not averaged
                self._next += 1
                continue
            if p not in self._ready:
                return
            self._handles[p] = self._launch(p)
            self._next += 1

    def _agree_on_order(self) -> List[Any]:
        """Rank 0's hook order of the first step (then the rest by name), as positions
        in the name order, which every rank shares. Frozen parameters are in it too, so
        one unfrozen later is averaged (launches skip those that do not require grad)."""
        by_name = self._by_name()
        members = set(by_name)  # (tensors hash by identity; `in` on a list would compare values)
        fired = [p for p in self._fired if p in members]
        mine = fired + [p for p in by_name if p not in set(fired)]
        position = {p: i for i, p in enumerate(by_name)}
        agreed = mpi_ops.broadcast(torch.tensor([position[p] for p in mine], dtype=torch.int64), root_rank=0,
                                   name="gradient order")
        return [by_name[i] for i in agreed.tolist()]

    def synchronize(self) -> None:
        """Launches the gradients not launched yet (zeros where a gradient is None), in
        the agreed order, then waits for every allreduce and installs the averages."""
        self._after_repair()
        self._launch_rest()
        self._wait_all()

    def _launch_rest(self) -> None:
        if self._order is None:
            for p in self._by_name():  # the first step: in name order
                if p.requires_grad:
                    self._ensure_grad(p)
                    self._handles[p] = self._launch(p)
            self._order = self._agree_on_order() if self._active else []
            self._fired = []
        else:
            for p in self._order[self._next:]:
                if p.requires_grad:
                    self._ensure_grad(p)
                    self._handles[p] = self._launch(p)

    def _wait_all(self, finished: Optional[List[Tuple[Any, bool, float]]] = None) -> None:
        """Waits in launch order; appends (p, done before the wait, time.perf_counter()
        after it) to finished, if given."""
        with torch.no_grad():
            for p, handle in self._handles.items():
                done = finished is not None and mpi_ops.poll(handle)
                _install(p.grad, mpi_ops.synchronize(handle))
                if finished is not None:
                    finished.append((p, done, time.perf_counter()))
                self._allreduce_delay[p] = self._num_steps
        self._handles.clear()
        self._ready.clear()
        self._next = 0

    @staticmethod
    def _ensure_grad(p: torch.nn.Parameter) -> None:
        if p.grad is None:  # unused on this rank, or zero_grad(set_to_none=True): zeros (as Horovod)
            p.grad = torch.zeros_like(p)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        self._after_repair()
        if self._active and self._should_synchronize:
            self.synchronize()
        return super().step(closure)

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        self._after_repair()
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                                 "cause a race condition.")
        return super().zero_grad(*args, **kwargs)


class _Windowed(_Distributed):
    """What the window-based optimizers share: one window per parameter, created at
    construction (with more than one rank); step() optionally waits for every rank,
    then synchronizes, then updates."""

    force_barrier = False

    def _create_windows(self, tensors: Dict[Any, torch.Tensor], names: Dict[Any, str], zero_init: bool) -> None:
        self._windows = names
        self._delay = {p: self._num_steps for p in self._names}
        self._handles: Dict[Any, int] = {}
        if not self._active:
            return
        for p, window in sorted(names.items(), key=lambda item: item[1]):  # collective: the same order everywhere
            if not mpi_ops.win_create(tensors[p], window, zero_init=zero_init):
                raise ValueError(f"Cannot allocate MPI window for the parameter {self._names[p]}: the window "
                                 f"name {window!r} is taken (pass a distinct window_prefix)")
        self._hooks = [m.register_forward_hook(self._forward_hook) for m in self._models]

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        self._after_repair()
        if self._active and self._should_synchronize:
            if self.force_barrier:
                mpi_ops.barrier()
            self.synchronize()
        return super().step(closure)

    def unregister_window(self) -> None:
        """Frees this optimizer's windows (collective; shutdown() also frees them)."""
        existing = set(mpi_ops.get_current_created_window_names())
        for window in sorted(self._windows.values()):
            if window in existing:
                mpi_ops.win_free(window)


class _WindowOptimizer(_Windowed):
    """Put style: each forward ends with a nonblocking put of the parameters to the
    out-neighbors; step() waits, averages the window with what arrived, then updates.
    Pull style: the forward hook gets the in-neighbors' parameters instead.

    The average takes only the in-neighbor buffers that received something since the
    previous step (their window versions), with the default weights (the topology's if
    weighted, else uniform) renormalized over them and this rank. BlueFog averaged every
    buffer every step: with dynamic dst_weights / src_weights (one peer per step) or
    ranks out of step, a buffer that did not change was averaged in again and again,
    pulling the parameters back towards old values, and training stalled. When every
    buffer is fresh (a static topology in lockstep) the result is BlueFog's."""

    def __init__(self, params: Any, model: Any, num_steps_per_communication: int, window_prefix: Optional[str],
                 pull_style: bool) -> None:
        super().__init__(params)
        self._setup(model, num_steps_per_communication)
        self._pull_style = pull_style
        self._reset_weights()
        self._create_windows({p: p.data for p in self._names},
                             {p: f"{window_prefix}.{name}" if window_prefix else name for p, name in self._names.items()},
                             zero_init=False)

    def _reset_weights(self) -> None:
        self.dst_weights: Optional[Dict[int, float]] = None
        self.src_weights: Optional[Dict[int, float]] = None
        # win_update's default weights; the topology changes only through a repair
        # while windows exist.
        if mpi_ops.is_topo_weighted():
            self._self_weight, self._neighbor_weights = GetRecvWeights(mpi_ops.load_topology(), mpi_ops.rank())
        else:
            in_ranks = mpi_ops.in_neighbor_ranks()
            self._self_weight = 1.0 / (len(in_ranks) + 1)
            self._neighbor_weights = {r: self._self_weight for r in in_ranks}

    def _forward_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        for p in self._training_parameters(module):
            if self._count(self._delay, p):
                if self._pull_style:
                    self._handles[p] = mpi_ops.win_get_nonblocking(self._windows[p], src_weights=self.src_weights,
                                                                   require_mutex=True)
                else:
                    self._handles[p] = mpi_ops.win_put_nonblocking(p.data, self._windows[p],
                                                                   dst_weights=self.dst_weights, require_mutex=False)

    def synchronize(self) -> None:
        self._after_repair()
        with torch.no_grad():
            for p, handle in self._handles.items():
                mpi_ops.win_wait(handle)
                p.set_(self._combine(self._windows[p]))
                self._delay[p] = self._num_steps
        self._handles.clear()

    def _combine(self, window: str) -> torch.Tensor:
        """Averages the window's tensor with the buffers that changed since the last
        update (see the class comment)."""
        fresh = [r for r, version in mpi_ops.get_win_version(window).items() if version > 0]
        if len(fresh) == len(self._neighbor_weights):
            return mpi_ops.win_update(window, require_mutex=True)
        # A put landing between the version query and the update has its version reset
        # unused: that one message is skipped (the sender's next put replaces it).
        weights = {r: self._neighbor_weights[r] for r in fresh}
        total = self._self_weight + sum(weights.values())
        if total <= 0.0:  # nothing arrived (and no self-loop weight): keep the parameters
            return mpi_ops.win_update(window, self_weight=1.0, neighbor_weights={}, require_mutex=True)
        return mpi_ops.win_update(window, self_weight=self._self_weight / total,
                                  neighbor_weights={r: w / total for r, w in weights.items()}, require_mutex=True)


class _PushSum(_Windowed):
    """Push-sum (gradient push): each parameter travels as [x, w] (numerator and
    weight); the estimate is x / w. Forward hooks accumulate a share into the
    out-neighbors' windows; step() keeps self_weight of the rest, collects what arrived
    and divides.

    No step waits for another rank (BlueFog's push-sum took a barrier every step, so
    every rank ran at the pace of the slowest): accumulates land in the targets' buffers
    and are collected atomically under the window mutex whenever the target steps, so
    the total mass sum(w) is conserved however far the ranks drift apart, and x / w
    stays an average of the ranks' parameters (asynchronous push-sum, as in Stochastic
    Gradient Push). force_barrier = True (or the factory's argument) restores lockstep.

    A rank that hears nothing from its in-neighbors keeps halving (at one out-neighbor)
    its weight w each step; after about 150 such steps in float32 (25 in float16) w
    would reach zero and x / w turn into NaN. So when w falls below sqrt(smallest normal)
    (where x = estimate * w stops being exact for small parameters) the rank resets w to
    1: mass is created, and the consensus becomes a weighted average of the ranks in
    which this rank's progress since it ran ahead still counts (with its weight near
    zero, that progress was otherwise all but lost)."""

    def __init__(self, params: Any, model: Any, num_steps_per_communication: int, force_barrier: bool) -> None:
        super().__init__(params)
        if not isinstance(force_barrier, bool):
            raise ValueError(f"force_barrier must be a bool, got {force_barrier!r}")
        self.force_barrier = force_barrier
        self._setup(model, num_steps_per_communication)
        self._reset_weights()
        self._extended = {p: torch.cat([p.data.flatten(), torch.ones(1, dtype=p.dtype, device=p.device)])
                          for p in self._names}
        self._create_windows(self._extended, dict(self._names), zero_init=True)
        # The weight below which synchronize() resets it to 1 (see the class's text).
        self._weight_floor = {p: math.sqrt(torch.finfo(p.dtype).tiny) for p in self._names}

    def _reset_weights(self) -> None:
        # Column-stochastic: this rank keeps one share of its mass and pushes one share
        # to each out-neighbor, so the survivors' total mass stays what they held.
        out_ranks = mpi_ops.out_neighbor_ranks()
        share = 1.0 / (len(out_ranks) + 1)
        self.dst_weights = {r: share for r in out_ranks}
        self.self_weight = share

    def _forward_hook(self, module: torch.nn.Module, inputs: Any, output: Any) -> None:
        for p in self._training_parameters(module):
            if self._count(self._delay, p):
                extended = self._extended[p]
                with torch.no_grad():
                    extended[:-1].copy_(p.data.flatten()).mul_(extended[-1])  # x = estimate * w
                self._handles[p] = mpi_ops.win_accumulate_nonblocking(extended, self._windows[p],
                                                                      dst_weights=self.dst_weights,
                                                                      require_mutex=True)

    def synchronize(self) -> None:
        self._after_repair()
        with torch.no_grad():
            for p, handle in self._handles.items():
                mpi_ops.win_wait(handle)
                extended = self._extended[p]
                extended.mul_(self.self_weight)
                mpi_ops.win_update_then_collect(self._windows[p])
                p.copy_((extended[:-1] / extended[-1]).view_as(p))
                # Without a branch: on a GPU, reading w on the host would wait for the stream.
                # The next forward hook sets x = estimate * w.
                weight = extended[-1:]
                weight.masked_fill_(weight < self._weight_floor[p], 1.0)
                self._delay[p] = self._num_steps
        self._handles.clear()


# ---- factories -------------------------------------------------------------------------------
def _wrap(optimizer: torch.optim.Optimizer, mixin: type, *args: Any) -> torch.optim.Optimizer:
    """An instance of a subclass of optimizer's class, over the same parameter groups."""
    base = type(optimizer)
    cls = type(base.__name__, (mixin, base), {"__module__": __name__, "__qualname__": base.__qualname__})
    return cls(optimizer.param_groups, *args)


def DistributedAdaptWithCombineOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                                         communication_type: CommunicationType =
                                         CommunicationType.neighbor_allreduce,
                                         num_steps_per_communication: int = 1) -> torch.optim.Optimizer:
    """Adapt-with-combine: w+ = Combine(w) - lr * grad f(w); the averaging overlaps the
    forward and backward passes."""
    return _wrap(optimizer, _AdaptWithCombine, model, communication_type, num_steps_per_communication)


def DistributedAdaptThenCombineOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                                         communication_type: CommunicationType =
                                         CommunicationType.neighbor_allreduce,
                                         num_steps_per_communication: int = 1) -> torch.optim.Optimizer:
    """Adapt-then-combine: w+ = Combine(w - lr * grad f(w)); each parameter's update and
    averaging start as soon as its gradient is ready."""
    return _wrap(optimizer, _AdaptThenCombine, model, communication_type, num_steps_per_communication)


def DistributedGradientAllreduceOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                                          num_steps_per_communication: int = 1, priority: bool = False,
                                          partition_bytes: int = 1 << 20) -> torch.optim.Optimizer:
    """Averages gradients over all ranks (Horovod style) before each local update.

    priority=True schedules the averaging as ByteScheduler does: gradients cut into
    partitions of at most partition_bytes, the input layers' partitions first once the link is
    backed up, and each layer's update applied just before its next forward use, so the
    next forward pass overlaps the rest of the averaging. step() then returns before
    the parameters are updated; call synchronize() before reading them other than
    through the model's forward pass (a checkpoint, say). See docs/performance.md."""
    if not isinstance(priority, bool):
        raise ValueError(f"priority must be True or False, got {priority!r}")
    if isinstance(partition_bytes, bool) or not isinstance(partition_bytes, int) or partition_bytes < 1:
        raise ValueError(f"partition_bytes must be a positive integer, got {partition_bytes!r}")
    if not priority:
        return _wrap(optimizer, _GradientAllreduce, model, num_steps_per_communication)
    from ._priority_allreduce import _PriorityGradientAllreduce  # (it builds on _GradientAllreduce)
    return _wrap(optimizer, _PriorityGradientAllreduce, model, num_steps_per_communication, partition_bytes)


def DistributedWinPutOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                               num_steps_per_communication: int = 1,
                               window_prefix: Optional[str] = None) -> torch.optim.Optimizer:
    """Puts the parameters into the out-neighbors' windows after each forward pass and
    averages with what arrived before each update (one window per parameter)."""
    return _wrap(optimizer, _WindowOptimizer, model, num_steps_per_communication, window_prefix, False)


def DistributedPullGetOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                                num_steps_per_communication: int = 1,
                                window_prefix: Optional[str] = None) -> torch.optim.Optimizer:
    """As the window put optimizer, but each rank gets its in-neighbors' parameters."""
    return _wrap(optimizer, _WindowOptimizer, model, num_steps_per_communication, window_prefix, True)


def DistributedPushSumOptimizer(optimizer: torch.optim.Optimizer, model: Any,  # noqa: N802
                                num_steps_per_communication: int = 1,
                                force_barrier: bool = False) -> torch.optim.Optimizer:
    """Push-sum over windows: converges on directed graphs that are not doubly stochastic.
    Asynchronous: no step waits for a slow rank, unless force_barrier (BlueFog's default)
    puts a barrier before every step's averaging."""
    return _wrap(optimizer, _PushSum, model, num_steps_per_communication, force_barrier)


def _deprecated(name: str, kind: CommunicationType) -> Callable[..., torch.optim.Optimizer]:
    def factory(optimizer: torch.optim.Optimizer, model: Any,
                num_steps_per_communication: int = 1) -> torch.optim.Optimizer:
        warnings.warn(f"{name} is deprecated; use DistributedAdaptWithCombineOptimizer with "
                      f"communication_type=CommunicationType.{kind.name}", PendingDeprecationWarning)
        return DistributedAdaptWithCombineOptimizer(optimizer, model, kind, num_steps_per_communication)
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"Deprecated: DistributedAdaptWithCombineOptimizer with CommunicationType.{kind.name}."
    return factory


DistributedAllreduceOptimizer = _deprecated("DistributedAllreduceOptimizer", CommunicationType.allreduce)
DistributedNeighborAllreduceOptimizer = _deprecated("DistributedNeighborAllreduceOptimizer",
                                                    CommunicationType.neighbor_allreduce)
DistributedHierarchicalNeighborAllreduceOptimizer = _deprecated("DistributedHierarchicalNeighborAllreduceOptimizer",
                                                                CommunicationType.hierarchical_neighbor_allreduce)

__all__ = [
    "CommunicationType", "DistributedAdaptThenCombineOptimizer", "DistributedAdaptWithCombineOptimizer",
    "DistributedGradientAllreduceOptimizer", "DistributedWinPutOptimizer", "DistributedAllreduceOptimizer",
    "DistributedNeighborAllreduceOptimizer", "DistributedHierarchicalNeighborAllreduceOptimizer",
    "DistributedPushSumOptimizer", "DistributedPullGetOptimizer",
]
