"""Gradient averaging with priority scheduling and per-layer updates (ByteScheduler).

``DistributedGradientAllreduceOptimizer(..., priority=True)``. Without it, each
gradient's allreduce starts as backward produces it and step() waits for all of them,
so the input layer's gradient, produced last, is averaged last while the next forward
pass needs it first. With it:

- gradients are cut into partitions of at most partition_bytes;
- during backward, partitions go as a release plan says (see _priority_plan): as many
  as keep the link busy; the rest wait for the end of the backward pass and then go
  input layers first;
- step() returns at once; each layer's update is applied in a forward pre-hook of the
  module that owns its parameters, after waiting for that layer's partitions only, so
  the next forward pass starts while the later layers' averages are still moving.

The plan comes from rank 0's timings: the first step agrees on the gradient order (as
without priority), the next CALIBRATION_STEPS run without priority and measure when
each gradient becomes ready and how fast the link moves them; then every rank builds
the same plan from the same numbers.

Each gradient is copied into a buffer of its own when it is ready, so the program may
zero or drop p.grad at any time (zero_grad before the next forward pass is the usual
place); the averaged gradient lives in the buffer until its update. Updates use the
hyperparameters the groups had at step() (a learning-rate scheduler stepped after
step() acts on the next step, as without priority).
"""

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import _state, mpi_ops
from ._priority_plan import partition, plan
from .optimizers import _dense, _GradientAllreduce, _install

CALIBRATION_STEPS = 3


def _same(a: List[torch.nn.Parameter], b: List[torch.nn.Parameter]) -> bool:
    """The same parameters in the same order (by identity: == on tensors compares values)."""
    return len(a) == len(b) and all(p is q for p, q in zip(a, b))


class _Plan:
    """What every rank submits, and when (see _priority_plan.plan)."""

    def __init__(self, params: List[torch.nn.Parameter], parts: List[Tuple[int, int, int]],
                 releases: List[List[int]], final: List[int]) -> None:
        self.params, self.parts, self.releases, self.final = params, parts, releases, final
        self.event_of = {p: k for k, p in enumerate(params)}
        self.parts_of: Dict[Any, List[int]] = {p: [] for p in params}
        for j, (i, _, _) in enumerate(parts):
            self.parts_of[params[i]].append(j)


class _PriorityGradientAllreduce(_GradientAllreduce):
    def __init__(self, params: Any, model: Any, num_steps_per_communication: int, partition_bytes: int) -> None:
        super().__init__(params, model, num_steps_per_communication)
        self._partition_bytes = partition_bytes
        self._plan: Optional[_Plan] = None
        self._samples: List[List[float]] = []       # calibration: rank's [s/byte, end, ready times...]
        self._sampled: List[torch.nn.Parameter] = []  # of these parameters
        self._ready_times: Dict[Any, float] = {}
        self._backward_start: Optional[float] = None  # calibration: this step's first gradient, and
        self._backward_end = 0.0                       # step(), in seconds after it
        self._buffers: Dict[Any, torch.Tensor] = {}  # p -> the buffer its gradient is averaged in
        self._part_handles: Dict[int, int] = {}
        self._pending: set = set()                   # averaged, update not applied yet
        self._groups_at_step: List[Dict[str, Any]] = []
        self._assumed_seconds_per_byte: Optional[float] = None  # tests: a link slower than measured
        if self._active:
            for m in self._models:
                for module in m.modules():
                    owned = [p for p in module.parameters(recurse=False) if p in self._names]
                    if owned:
                        self._hooks.append(module.register_forward_pre_hook(self._before_forward(owned)))

    # ---- the plan -------------------------------------------------------------------------
    def _launchable(self) -> List[torch.nn.Parameter]:
        return [p for p in (self._order or []) if p.requires_grad]

    @property
    def schedule(self) -> Optional[Dict[str, Any]]:
        """The release plan, by parameter name (None until calibrated): 'during' lists,
        for each gradient in backward order, the partitions submitted when it is ready;
        'after', those held until the backward pass ends, in their order."""
        plan_ = self._plan
        if plan_ is None:
            return None

        def label(j: int) -> str:
            i, start, stop = plan_.parts[j]
            return f"{self._names[plan_.params[i]]}[{start}:{stop}]"
        return {"during": [(self._names[p], [label(j) for j in plan_.releases[k]]) for k, p in enumerate(plan_.params)],
                "after": [label(j) for j in plan_.final]}

    def _link_seconds_per_byte(self, finished: List[Tuple[Any, bool, float]]) -> float:
        """The link's pace while it was backed up: after the first allreduce still moving
        when step() waited, the others finished one after another (the engine runs them
        in order), so their bytes over their time. 0 (keeps up) if under a partition."""
        first = next((i for i, (_, done, _) in enumerate(finished) if not done), None)
        if first is None:
            return 0.0
        after = finished[first + 1:]
        moved = sum(p.numel() * p.element_size() for p, _, _ in after)
        if moved < self._partition_bytes:
            return 0.0
        return (after[-1][2] - finished[first][2]) / moved

    def _sample(self, seconds_per_byte: float, end: float) -> None:
        params = self._launchable()
        if not _same(params, self._sampled):
            self._samples, self._sampled = [], params  # (un)frozen during calibration: start again
        self._samples.append([seconds_per_byte, end] + [self._ready_times.get(p, end) for p in params])
        self._ready_times.clear()
        self._backward_start = None
        if len(self._samples) < CALIBRATION_STEPS:
            return
        mine = torch.tensor(self._samples, dtype=torch.float64).median(dim=0).values
        self._samples = []
        self._make_plan(params, mpi_ops.broadcast(mine, root_rank=0, name="priority plan timings").tolist())

    def _make_plan(self, params: List[torch.nn.Parameter], numbers: List[float]) -> None:
        """The plan from rank 0's medians: [s/byte, end, ready time of each of params]."""
        seconds_per_byte, end, times = numbers[0], numbers[1], numbers[2:]
        if self._assumed_seconds_per_byte is not None:
            seconds_per_byte = self._assumed_seconds_per_byte
        for k in range(1, len(times)):  # event k: the first k + 1 gradients are ready
            times[k] = max(times[k], times[k - 1])
        parts = partition([p.numel() for p in params], [p.element_size() for p in params], self._partition_bytes)
        sizes = [(stop - start) * params[i].element_size() for i, start, stop in parts]
        keys = [(-i, start) for i, start, _ in parts]  # produced later = nearer the input = sooner needed
        releases, final = plan(sizes, [i for i, _, _ in parts], keys, times, max(end, times[-1] if times else 0.0),
                               seconds_per_byte, self._partition_bytes * seconds_per_byte / 2)
        self._plan = _Plan(params, parts, releases, final)
        self._buffers = {p: torch.zeros_like(p, memory_format=torch.contiguous_format) for p in params}

    # ---- during backward ------------------------------------------------------------------
    def _launch_ready(self) -> None:
        if self._plan is None:
            launched = self._next
            super()._launch_ready()
            if self._next > launched:
                now = time.perf_counter()
                if self._backward_start is None:
                    self._backward_start = now
                for p in self._order[launched:self._next]:
                    self._ready_times[p] = now - self._backward_start
            return
        order = self._order
        while self._next < len(order):
            p = order[self._next]
            if p in self._plan.event_of:
                if p not in self._ready:
                    return
                self._stage(p)
            self._next += 1

    def _stage(self, p: torch.nn.Parameter) -> None:
        """Copies p's gradient into its buffer and submits what the plan says for it."""
        if p in self._pending:
            raise RuntimeError(
                f"starling: parameter '{self._names[p]}' got a new gradient before its last update was applied: the "
                "forward pass used it outside a call of a module that owns it (priority=True applies each update in "
                "a forward pre-hook of its module). Use priority=False for this model.")
        self._ensure_grad(p)
        with torch.no_grad():
            self._buffers[p].copy_(p.grad)
        self._submit(self._plan.releases[self._plan.event_of[p]])

    def _submit(self, parts: List[int]) -> None:
        plan_ = self._plan
        for j in parts:
            i, start, stop = plan_.parts[j]
            p = plan_.params[i]
            if not p.requires_grad:  # frozen since the plan (on every rank alike): not averaged
                continue
            view = self._buffers[p].view(-1)[start:stop]
            self._part_handles[j] = mpi_ops.allreduce_nonblocking_(view, average=True,
                                                                   name=f"{self._names[p]}[{start}:{stop}]")

    def _submit_rest(self) -> None:
        """The end of the backward pass: the gradients not ready yet, then the held partitions."""
        for p in self._order[self._next:]:
            if p in self._plan.event_of and p.requires_grad:
                self._stage(p)
        self._submit(self._plan.final)
        for p in self._plan.params:
            self._allreduce_delay[p] = self._num_steps
        self._next = 0
        self._ready.clear()

    # ---- updates --------------------------------------------------------------------------
    def _before_forward(self, owned: List[torch.nn.Parameter]) -> Callable[..., None]:
        def hook(module: Any, inputs: Any) -> None:
            self._after_repair()
            if self._pending:
                self._apply(owned)
        return hook

    def _apply(self, params: List[torch.nn.Parameter]) -> None:
        """Waits for the partitions of params' pending gradients, then updates them with
        the torch optimizer's own step, run over those parameters only."""
        todo = [p for p in params if p in self._pending]
        if not todo:
            return
        for p in todo:
            for j in self._plan.parts_of[p]:
                handle = self._part_handles.pop(j, None)
                if handle is not None:
                    mpi_ops.synchronize(handle)
        self._step_only(todo, self._groups_at_step, self._buffers)
        self._pending.difference_update(todo)

    def _step_only(self, params: List[torch.nn.Parameter], groups: List[Dict[str, Any]],
                   grads: Optional[Dict[Any, torch.Tensor]] = None) -> None:
        """The torch optimizer's own step over params only, with groups' hyperparameters
        and, where given, the gradients in grads instead of p.grad."""
        members = set(params)
        saved_groups, saved_grads = self.param_groups, [(p, p.grad) for p in params]
        try:
            self.param_groups = [dict(g, params=[q for q in g["params"] if q in members])
                                 for g in groups if any(q in members for q in g["params"])]
            if grads is not None:
                for p in params:
                    p.grad = grads[p]
            super(_GradientAllreduce, self).step()
        finally:
            self.param_groups = saved_groups
            for p, grad in saved_grads:
                p.grad = grad

    def _after_repair(self) -> None:
        repaired = self._repairs_seen != _state.repairs
        super()._after_repair()
        if repaired:  # what was in flight is gone: calibrate again over the survivors
            self._part_handles.clear()
            self._pending.clear()
            self._plan, self._samples = None, []
            self._ready_times.clear()
            self._backward_start = None

    # ---- the optimizer's interface ----------------------------------------------------------
    def synchronize(self) -> None:
        """Applies the updates still pending; if a backward pass ran since the last
        step(), finishes averaging its gradients into p.grad (then step() inside
        skip_synchronize() updates as without priority)."""
        self._after_repair()
        self._apply(list(self._pending))
        if self._plan is None:
            calibrating = self._active and self._order is not None
            self._launch_rest()
            finished: List[Tuple[Any, bool, float]] = []
            self._wait_all(finished)
            if calibrating:
                self._sample(self._link_seconds_per_byte(finished), self._backward_end)
                self._backward_end = 0.0
            return
        if self._next == 0 and not self._ready:
            return  # no backward pass since the last step
        self._finish_now()

    def _finish_now(self) -> None:
        """Submits what the plan has left, waits for all of it and installs the averages
        in p.grad. Parameters trainable since the plan was made are averaged whole, in
        the agreed order, and the next steps calibrate again."""
        self._submit_rest()
        for handle in self._part_handles.values():
            mpi_ops.synchronize(handle)
        self._part_handles.clear()
        with torch.no_grad():
            for p in self._order:
                if not p.requires_grad:
                    continue
                self._ensure_grad(p)
                if p in self._plan.event_of:
                    p.grad.copy_(self._buffers[p].view_as(p))
                else:
                    _install(p.grad, mpi_ops.allreduce(_dense(p.grad), average=True, name=self._names[p]))
                    self._allreduce_delay[p] = self._num_steps
        if self._trainable_changed():
            self._plan, self._buffers = None, {}

    def _trainable_changed(self) -> bool:
        return not _same(self._launchable(), self._plan.params)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        self._after_repair()
        if self._plan is None or closure is not None or not (self._active and self._should_synchronize):
            if self._plan is None and self._backward_start is not None:
                self._backward_end = time.perf_counter() - self._backward_start
            return super().step(closure)
        self._apply(list(self._pending))  # parameters the last forward pass did not use
        if self._trainable_changed():  # (un)frozen since the plan: a step without it, then calibrate again
            self._finish_now()
            return super(_GradientAllreduce, self).step()
        self._submit_rest()
        self._groups_at_step = [dict(g) for g in self.param_groups]
        self._pending = set(self._plan.params)
        # The rest (frozen parameters that still hold a gradient) step now, as without priority.
        local = [p for g in self.param_groups for p in g["params"] if p not in self._pending and p.grad is not None]
        if local:
            self._step_only(local, self.param_groups)
        return None
