"""Decentralized optimizers beyond BlueFog's: KungFu's synchronous model averaging
(SMA) and asynchronous pair averaging (AD-PSGD, over windows), gradient tracking
(DIGing) and exact diffusion, each wrapping a torch optimizer.

Conventions are BlueFog's (see optimizers.py): a factory takes the torch optimizer and
the model (a module, a list of modules, or model.named_parameters()) and returns an
instance of a subclass of the optimizer's own class, so ``isinstance(opt,
torch.optim.SGD)`` still holds; the mixin classes below (SynchronousModelAveraging,
AsynchronousPairAveraging, GradientTracking, ExactDiffusion) are what isinstance can
also test. Use it as any optimizer: zero_grad(); loss.backward(); step(). Every rank
must call step() the same number of times (except AD-PSGD), and the parameters must be
changed only by step() while training. All communication happens inside step(): the
nonblocking operations of one step (one per parameter) are fused by the core.

The math is stated for plain SGD (x <- x - lr * d, d the direction step() hands to the
wrapped optimizer); with momentum, weight decay or Adam the wrapped optimizer turns the
direction into its own update, which is a heuristic for gradient tracking and exact
diffusion (their exactness results are for plain SGD).
"""

import math
import random
from typing import Any, Callable, Dict, List, Optional, Tuple

import networkx as nx
import numpy as np
import torch

from . import _state, mpi_ops
from ..topology_util import GetRecvWeights
from .optimizers import CommunicationType, _named_parameters, _wrap


def _resolve_named(model: Any) -> List[Tuple[str, torch.nn.Parameter]]:
    """(name, parameter) pairs from a module, a list of modules or named_parameters()."""
    if isinstance(model, torch.nn.Module) or (isinstance(model, (list, tuple)) and model
                                               and all(isinstance(m, torch.nn.Module) for m in model)):
        return _named_parameters(model)[1]
    try:
        named = list(model)
    except TypeError:
        raise ValueError("model must be a torch.nn.Module, a list of them, or model.named_parameters(); got "
                         + type(model).__name__) from None
    if not named or not all(isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                            and isinstance(item[1], torch.Tensor) for item in named):
        raise ValueError("model must be a torch.nn.Module, a list of them, or a non-empty model.named_parameters() "
                         "(pairs of name and parameter)")
    names = [name for name, _ in named]
    if len(set(names)) != len(names):
        raise ValueError("Parameter names in named_parameters must be unique.")
    return named


def _check_positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return value


def _check_learning_rates(optimizer: torch.optim.Optimizer) -> None:
    for i, group in enumerate(optimizer.param_groups):
        lr = group.get("lr")
        if lr is not None and (isinstance(lr, torch.Tensor) or not isinstance(lr, (int, float))
                               or not math.isfinite(lr) or lr < 0):
            raise ValueError(f"param_groups[{i}]['lr'] must be a finite number >= 0, got {lr!r}")


class _Decentralized:
    """What the four share: parameter names in a fixed order (every rank communicates
    the same parameters in the same order) and the argument checks."""

    def _setup(self, model: Any, prefix: str) -> None:
        named = _resolve_named(model)
        handled = {p for group in self.param_groups for p in group["params"]}
        if any(p not in {q for _, q in named} for p in handled):
            raise ValueError("Named parameters provided by model are mismatch with the parameters handled by "
                             "optimizer. Pass the model whose parameters the optimizer updates.")
        _check_learning_rates(self)
        # Only parameters that train take part, in name order: every rank communicates the
        # same parameters in the same order, even where its modules were registered in
        # another order (operations are matched by submission order).
        self._named: List[Tuple[str, torch.nn.Parameter]] = sorted(
            [(n, p) for n, p in named if p in handled and p.requires_grad], key=lambda item: item[0])
        for name, p in self._named:
            if not p.is_floating_point():
                raise ValueError(f"parameter {name} has dtype {p.dtype}; these optimizers average floating point "
                                 "parameters only")
        self._prefix = prefix
        self._active = mpi_ops.size() > 1
        self._repairs_seen = _state.repairs

    def _after_repair(self) -> bool:
        """True once after each starling.torch.repair() (a rank died; the survivors are
        renumbered and the topology is the one over them): the caller rebuilds what
        depends on ranks. What was in flight failed with the dead rank and is gone."""
        if self._repairs_seen == _state.repairs:
            return False
        self._repairs_seen = _state.repairs
        self._active = mpi_ops.size() > 1
        return True

    def _op_name(self, kind: str, name: str) -> str:
        return f"{self._prefix}.{kind}.{name}"


def _mixing_matrix() -> np.ndarray:
    """W[i, j]: the weight rank i gives rank j's tensor in neighbor_allreduce with the
    topology's default weights (the topology's if weighted, else uniform over the
    in-neighbors and self). Every rank holds the whole graph, so every rank computes
    the same matrix without communicating."""
    topology, n = mpi_ops.load_topology(), mpi_ops.size()
    W = np.zeros((n, n))
    for i in range(n):
        if mpi_ops.is_topo_weighted():
            self_weight, weights = GetRecvWeights(topology, i)
        else:
            sources = [r for r in topology.predecessors(i) if r != i]
            self_weight = 1.0 / (len(sources) + 1)
            weights = {r: self_weight for r in sources}
        W[i, i] = self_weight
        for r, w in weights.items():
            W[i, r] += w
    return W


def _check_topology(method: str, W: np.ndarray, symmetric: bool) -> None:
    """Refuses mixing matrices for which the method's convergence result does not hold."""
    n = W.shape[0]
    hint = ("Use a topology whose default weights are symmetric and doubly stochastic, e.g. "
            "set_topology(RingGraph(size())), SymmetricExponentialGraph(size()) or FullyConnectedGraph(size()), "
            "or a weighted topology with such weights.")
    rows, columns = W.sum(axis=1), W.sum(axis=0)
    if not np.allclose(rows, 1.0, atol=1e-9) or np.any(W < 0):
        raise ValueError(f"{method} needs a row-stochastic mixing matrix with nonnegative weights; the current "
                         f"topology's rows sum to {np.round(rows, 6).tolist()}. {hint}")
    if symmetric and not np.allclose(W, W.T, atol=1e-9):
        i, j = np.unravel_index(np.argmax(np.abs(W - W.T)), W.shape)
        raise ValueError(f"{method} needs a symmetric mixing matrix (W_bar = (I + W) / 2 must be symmetric "
                         f"positive semidefinite); the current topology gives W[{i},{j}] = {W[i, j]:.6g} but "
                         f"W[{j},{i}] = {W[j, i]:.6g}. {hint}")
    if not np.allclose(columns, 1.0, atol=1e-9):
        raise ValueError(f"{method} needs a doubly stochastic mixing matrix (columns summing to 1 keep the "
                         f"average of the tracked quantities); the current topology's columns sum to "
                         f"{np.round(columns, 6).tolist()}. {hint}")
    if n > 1 and not nx.is_strongly_connected(nx.from_numpy_array(W, create_using=nx.DiGraph)):
        raise ValueError(f"{method} needs a connected topology: the ranks cannot reach consensus otherwise. {hint}")


class _StaticMixing(_Decentralized):
    """Gradient tracking and exact diffusion: neighbor averaging with fixed weights.
    The weights are read from the topology at construction and checked; a later
    set_topology() makes step() refuse (the methods' correction terms assume one W)."""

    _symmetric = False
    _method = ""

    def _setup_mixing(self, model: Any, prefix: str) -> None:
        self._setup(model, prefix)
        self._setup_mixing_matrix()
        self._steps = 0

    def _setup_mixing_matrix(self) -> None:
        self._topology = mpi_ops.load_topology()
        W = _mixing_matrix()
        _check_topology(self._method, W, self._symmetric)
        self._mixing = W
        rank = mpi_ops.rank()
        self._self_weight, self._src_weights = self._weights(W, rank)

    def _weights(self, W: np.ndarray, rank: int) -> Tuple[float, Dict[int, float]]:
        return float(W[rank, rank]), {int(j): float(W[rank, j]) for j in np.nonzero(W[rank])[0] if j != rank}

    def _restart_after_repair(self) -> None:
        """After a repair: the mixing matrix of the topology over the survivors (checked
        as at construction), and the method restarts from the current parameters (its
        correction state referred to the old ranks' average, which the dead rank's share
        no longer belongs to)."""
        if self._after_repair():
            self._setup_mixing_matrix()
            self._restart()

    def _restart(self) -> None:
        raise NotImplementedError

    def _check_unchanged(self) -> None:
        self._restart_after_repair()
        if mpi_ops.load_topology() is not self._topology:
            raise ValueError(f"{self._method}: the topology changed since the optimizer was created. Its correction "
                             "terms assume one fixed mixing matrix (a dynamic topology is not supported); create a "
                             "new optimizer after set_topology().")

    def _launch(self, kind: str, name: str, tensor: torch.Tensor) -> int:
        return mpi_ops.neighbor_allreduce_nonblocking(tensor, self_weight=self._self_weight,
                                                      src_weights=self._src_weights, name=self._op_name(kind, name))

    @property
    def mixing_matrix(self) -> np.ndarray:
        """The matrix the averaging applies (a copy): W for gradient tracking,
        W_bar = (I + W) / 2 for exact diffusion."""
        return self._mixing.copy()


class GradientTracking(_StaticMixing):
    """Gradient tracking (DIGing; Nedic, Olshevsky and Shi, 2017). Each rank keeps y, its
    estimate of the average gradient over all ranks, and moves along it:

        x_{k+1} = W x_k - lr * y_k
        y_{k+1} = W y_k + grad f_i(x_{k+1}) - grad f_i(x_k),     y_0 = grad f_i(x_0)

    Since W is doubly stochastic, mean_i y_k = mean_i grad f_i(x_k) at every step, so
    with a constant learning rate the ranks converge to the exact minimizer of
    sum_i f_i (plain decentralized SGD stops at a point biased by the differences
    between the local gradients). step() averages x_k and y_{k-1} with the neighbors
    (two neighbor_allreduce per parameter, issued together), sets y_k, and lets the
    wrapped optimizer step from W x_k along y_k (p.grad is y_k during that call and is
    restored afterwards). Two parameter-sized tensors of state per parameter."""

    _method = "gradient tracking"

    def __init__(self, params: Any, model: Any, prefix: str) -> None:
        super().__init__(params)
        self._setup_mixing(model, prefix)
        self._restart()

    def _restart(self) -> None:
        # y restarts as the local gradient (y_0 = grad f_i(x_0)).
        self._tracker: Dict[Any, torch.Tensor] = {}
        self._previous_gradient: Dict[Any, torch.Tensor] = {}

    @property
    def trackers(self) -> Dict[str, torch.Tensor]:
        """{parameter name: y}, this rank's estimate of the average gradient."""
        return {name: self._tracker[p] for name, p in self._named if p in self._tracker}

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One step: the wrapped optimizer's update and this method's communication (see the class). Returns the closure's loss, if any."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._check_unchanged()
        gradients = {p: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
                     for _, p in self._named}
        handles = {}
        if self._active:
            for name, p in self._named:
                handles[p] = (self._launch("x", name, p.data),
                              self._launch("y", name, self._tracker[p]) if p in self._tracker else None)
        saved = {}
        with torch.no_grad():
            for _, p in self._named:
                g = gradients[p]
                hx, hy = handles.get(p, (None, None))
                if p in self._tracker:
                    mixed_y = mpi_ops.synchronize(hy) if hy is not None else self._tracker[p]
                    self._tracker[p] = mixed_y + g - self._previous_gradient[p]
                else:
                    self._tracker[p] = g.clone()
                self._previous_gradient[p] = g
                if hx is not None:
                    p.data.copy_(mpi_ops.synchronize(hx))
                saved[p] = p.grad
                p.grad = self._tracker[p].clone()
        try:
            super().step()
        finally:
            for p, grad in saved.items():
                p.grad = grad
        self._steps += 1
        return loss


class ExactDiffusion(_StaticMixing):
    """Exact diffusion (Yuan, Ying, Zhao and Sayed, 2019): adapt, correct, combine with
    W_bar = (I + W) / 2, W symmetric and doubly stochastic:

        psi_{k+1} = x_k - lr * grad f_i(x_k)          (adapt: the wrapped optimizer's step)
        phi_{k+1} = psi_{k+1} + x_k - psi_k           (correct; psi_0 = x_0)
        x_{k+1}   = W_bar phi_{k+1}                   (combine: one neighbor_allreduce)

    The correction cancels the bias of adapt-then-combine diffusion: with a constant
    learning rate (small enough for sum_i f_i, e.g. lr < 1/L for L-smooth f_i) the
    ranks converge to the exact minimizer of sum_i f_i. One neighbor_allreduce per
    parameter per step, with self weight (1 + w_ii) / 2 and neighbor weights w_ij / 2;
    one parameter-sized tensor of state (psi) per parameter."""

    _method = "exact diffusion"
    _symmetric = True

    def __init__(self, params: Any, model: Any, prefix: str) -> None:
        super().__init__(params)
        self._setup_mixing(model, prefix)
        self._restart()

    def _setup_mixing_matrix(self) -> None:
        super()._setup_mixing_matrix()
        n = self._mixing.shape[0]
        self._mixing = (np.eye(n) + self._mixing) / 2.0
        self._self_weight, self._src_weights = self._weights(self._mixing, mpi_ops.rank())

    def _restart(self) -> None:
        self._psi: Dict[Any, torch.Tensor] = {}  # psi_0 = x_0

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One step: the wrapped optimizer's update and this method's communication (see the class). Returns the closure's loss, if any."""
        self._check_unchanged()
        with torch.no_grad():
            before = {p: p.data.clone() for _, p in self._named}
        loss = super().step(closure)  # adapt: p = psi_{k+1}
        handles = {}
        with torch.no_grad():
            for name, p in self._named:
                x = before[p]
                psi_old = self._psi.get(p, x)
                psi_new = p.data.clone()
                p.data.add_(x).sub_(psi_old)  # phi_{k+1}
                self._psi[p] = psi_new
                if self._active:
                    handles[p] = self._launch("phi", name, p.data)
            for p, handle in handles.items():
                p.data.copy_(mpi_ops.synchronize(handle))
        self._steps += 1
        return loss


class SynchronousModelAveraging(_Decentralized):
    """KungFu's synchronous model averaging (SMA; Koliousis et al., Crossbow, 2019, and
    KungFu's SynchronousAveragingOptimizer). Every num_steps_per_communication steps,
    before the local update, each rank pulls its parameters towards the average of all
    ranks' parameters, then applies its own gradient (computed at the parameters before
    the pull, as KungFu does):

        x_{k+1} = x_k + alpha * (mean_j x_k^j - x_k) - lr * grad f_i(x_k)

    alpha = 1 is model averaging (all ranks equal after each pull); smaller alpha lets
    the replicas explore apart (elastic averaging). communication_type
    neighbor_allreduce replaces the global mean by the neighbors' weighted average
    (sum_j W_ij x^j), a lazy gossip. One allreduce (or neighbor_allreduce) per
    parameter per communicating step."""

    def __init__(self, params: Any, model: Any, alpha: float, communication_type: CommunicationType,
                 num_steps_per_communication: int, prefix: str) -> None:
        super().__init__(params)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0.0 < alpha <= 1.0):
            raise ValueError(f"alpha must be a number in (0, 1] (the pull towards the average), got {alpha!r}")
        if communication_type not in (CommunicationType.allreduce, CommunicationType.neighbor_allreduce):
            raise ValueError("communication_type must be CommunicationType.allreduce or "
                             f"CommunicationType.neighbor_allreduce for model averaging, got {communication_type!r}")
        self._num_steps = _check_positive_int(num_steps_per_communication, "num_steps_per_communication")
        self._setup(model, prefix)
        self.alpha = float(alpha)
        self._communication_type = communication_type
        self._steps = 0

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One step: the wrapped optimizer's update and this method's communication (see the class). Returns the closure's loss, if any."""
        if self._after_repair():
            self._steps = 0  # the first step after a repair averages over the survivors
        if self._active and self._steps % self._num_steps == 0:
            handles = {}
            for name, p in self._named:
                if self._communication_type == CommunicationType.allreduce:
                    handles[p] = mpi_ops.allreduce_nonblocking(p.data, average=True, name=self._op_name("x", name))
                else:
                    handles[p] = mpi_ops.neighbor_allreduce_nonblocking(p.data, name=self._op_name("x", name))
            with torch.no_grad():
                for p, handle in handles.items():
                    average = mpi_ops.synchronize(handle)
                    p.data.add_(average - p.data, alpha=self.alpha)
        self._steps += 1
        return super().step(closure)


class AsynchronousPairAveraging(_Decentralized):
    """Asynchronous decentralized SGD with pair averaging (AD-PSGD; Lian et al., 2018), as
    KungFu's PairAveragingOptimizer does it, over windows. No step waits for another
    rank: each rank runs at its own speed. Every num_steps_per_communication steps,
    after its local optimizer step, rank i reads the parameters of one in-neighbor j
    drawn at random (win_get) and averages with them:

        x_i <- x_i - lr * grad f_i(x_i)                  (the wrapped optimizer)
        s = x_j (a snapshot, however far j has got);  x_i <- (x_i + s) / 2

    Only x_i changes: j is never written, so a slow or finished peer is never pushed
    around and nothing is left pending. The price is that the average over ranks is not
    preserved exactly by an averaging (symmetric pair averaging would need j to take
    part in the same atomic step); the ranks still reach consensus on a strongly
    connected topology, at a point inside the convex hull of their parameters.

    Fresh peers only (only_fresh_peers, the default): j is drawn among the in-neighbors
    that have stepped since this rank last averaged with them or are at most one step
    behind it (ranks in step average at every step). Each rank announces its
    steps with a one-element put to its out-neighbors (a window of its own beside the
    parameters'), and a rank reads the announcements locally (window versions), so the
    choice costs no round trip. Without it (KungFu's rule), a fast rank that draws a
    slow one averages again and again with the same old parameters and is pulled back
    half-way each time: in the straggler benchmark with one rank 10 times slower,
    AD-PSGD never reached 95% test accuracy. When no in-neighbor qualifies, the rank
    skips the averaging (last_peer is None) and takes its next local step.

    What is atomic: the snapshot s is taken under j's window lock, and this rank's
    averaging is an update of its own window under its window lock, so a snapshot never
    sees an averaging half done; but a snapshot may be taken while j's optimizer step
    is writing its parameters (some elements before, some after that step): bounded
    staleness, which AD-PSGD's analysis allows.

    One window per parameter, over the parameter itself, and the announcements' window
    (window_prefix names them all; the topology must not change while they exist).
    free() (collective) frees them."""

    def __init__(self, params: Any, model: Any, num_steps_per_communication: int, window_prefix: str,
                 seed: int, only_fresh_peers: bool) -> None:
        super().__init__(params)
        self._num_steps = _check_positive_int(num_steps_per_communication, "num_steps_per_communication")
        if not isinstance(window_prefix, str) or not window_prefix:
            raise ValueError(f"window_prefix must be a non-empty str, got {window_prefix!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        if not isinstance(only_fresh_peers, bool):
            raise ValueError(f"only_fresh_peers must be a bool, got {only_fresh_peers!r}")
        self._setup(model, window_prefix)
        self._steps = 0
        self._windows: List[Tuple[Any, str]] = []
        self.last_peer: Optional[int] = None
        self._seed = seed
        # The announcements: this rank's step count, put to the out-neighbors after each
        # step; a version > 0 in this rank's buffer for j means j stepped.
        self._steps_window = f"{window_prefix}:steps" if only_fresh_peers else None
        self._step_count = torch.zeros(1, dtype=torch.float64)
        self._announcement: Optional[int] = None
        if not self._active:
            return
        self._choose_peers()
        existing = set(mpi_ops.get_current_created_window_names())
        windows = [(p, f"{window_prefix}.{name}") for name, p in self._named]
        for (name, p), (_, window) in zip(self._named, windows):
            if not p.is_contiguous():
                raise ValueError(f"parameter {name} is not contiguous; a window needs contiguous memory")
            if window in existing:
                raise ValueError(f"window {window!r} exists already: free it or pass another window_prefix")
        if self._steps_window in existing:
            raise ValueError(f"window {self._steps_window!r} exists already: free it or pass another window_prefix")
        for p, window in windows:
            mpi_ops.win_create(p.data, window)  # the window borrows the parameter's memory
        if self._steps_window is not None:
            mpi_ops.win_create(self._step_count, self._steps_window, zero_init=True)
        self._windows = windows

    def _choose_peers(self) -> None:
        """The in-neighbors to draw from (after a repair: the survivors' numbering over
        the topology over them; the windows were reshaped by the repair)."""
        topology = mpi_ops.load_topology()
        if not nx.is_strongly_connected(topology):
            raise ValueError("asynchronous pair averaging needs a strongly connected topology (each rank averages "
                             "with in-neighbors only, so the ranks reach consensus only if every rank is reachable "
                             "from every other); the current one is not")
        self._peers = list(mpi_ops.in_neighbor_ranks())
        self._fresh = set(self._peers)  # nothing averaged with yet
        self._seen: Dict[int, int] = {}  # the announcements' window version last seen, per in-neighbor
        self._announcement = None  # what was in flight failed with the dead rank
        self._random = random.Random(self._seed * 1000003 + mpi_ops.rank() + 7919 * _state.repairs)

    def _collect_announcements(self) -> None:
        """Adds the in-neighbors that announced a step since the last call to the fresh
        set. Local. The versions only grow (nothing updates this window), so comparing
        with the last ones seen misses no announcement; resetting them with win_update
        lost the one that landed between the query and the reset: at 2 ranks stepping
        in lockstep, up to 35 of 200 averagings were skipped."""
        for r, version in mpi_ops.get_win_version(self._steps_window).items():
            if version > self._seen.get(r, 0):
                self._fresh.add(r)
                self._seen[r] = version

    def _candidates(self) -> List[int]:
        """The in-neighbors that stepped since this rank last averaged with them, or that
        are at most one step behind it (a version counts a peer's steps: one announcement
        each). Without the second rule, ranks in step (a per-step allreduce of the loss, a
        barrier) skipped up to half their averagings: a peer that announced step n just
        before this rank's collect at n had not announced n + 1 by its collect at n + 1,
        and the rank that averaged less often pulled the consensus toward its own optimum
        (0.29-0.48 of the spread at 2 ranks, where 0.01-0.24 without skips)."""
        if self._steps_window is None:
            return self._peers
        return [r for r in self._peers if r in self._fresh or self._seen.get(r, 0) >= self._steps - 1]

    def _announce(self) -> None:
        if self._announcement is not None:
            mpi_ops.win_wait(self._announcement)  # at most one in flight
        self._step_count.fill_(self._steps)
        self._announcement = mpi_ops.win_put_nonblocking(self._step_count, self._steps_window)

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        """One step: the wrapped optimizer's update and this method's communication (see the class). Returns the closure's loss, if any."""
        if self._after_repair() and self._windows:
            self._choose_peers()
        loss = super().step(closure)
        self._steps += 1
        if not (self._windows and self._active):
            return loss
        if self._steps_window is not None:
            self._collect_announcements()
        if self._steps % self._num_steps == 0:
            candidates = self._candidates()
            peer = self._random.choice(candidates) if candidates else None
            if peer is not None:
                handles = [mpi_ops.win_get_nonblocking(window, src_weights={peer: 1.0}) for _, window in self._windows]
                for handle in handles:
                    mpi_ops.win_wait(handle)
                with torch.no_grad():
                    for _, window in self._windows:
                        mpi_ops.win_update(window, self_weight=0.5, neighbor_weights={peer: 0.5})  # x = (x + s) / 2
                self._fresh.discard(peer)
            self.last_peer = peer
        if self._steps_window is not None:
            self._announce()
        return loss

    def free(self) -> None:
        """Collective: frees this optimizer's windows (afterwards step() is the wrapped
        optimizer's alone)."""
        if self._announcement is not None:
            mpi_ops.win_wait(self._announcement)
            self._announcement = None
        for _, window in self._windows:
            mpi_ops.win_free(window)
        if self._windows and self._steps_window is not None:
            mpi_ops.win_free(self._steps_window)
        self._windows = []


# ---- factories -------------------------------------------------------------------------------
def _checked(optimizer: Any) -> torch.optim.Optimizer:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    return optimizer


def DistributedSynchronousModelAveragingOptimizer(  # noqa: N802
        optimizer: torch.optim.Optimizer, model: Any, alpha: float = 0.1,
        communication_type: CommunicationType = CommunicationType.allreduce,
        num_steps_per_communication: int = 1, name_prefix: str = "sma") -> torch.optim.Optimizer:
    """KungFu's synchronous model averaging: x += alpha * (mean x - x), then the local
    step (see SynchronousModelAveraging)."""
    return _wrap(_checked(optimizer), SynchronousModelAveraging, model, alpha, communication_type,
                 num_steps_per_communication, name_prefix)


def DistributedPairAveragingOptimizer(  # noqa: N802
        optimizer: torch.optim.Optimizer, model: Any, num_steps_per_communication: int = 1,
        window_prefix: str = "adpsgd", seed: int = 0, only_fresh_peers: bool = True) -> torch.optim.Optimizer:
    """AD-PSGD: after each local step, average with one random in-neighbor's parameters,
    read over a window, without waiting for anyone; by default only with an in-neighbor
    that has stepped since this rank last averaged with it (see AsynchronousPairAveraging).
    Construction is collective (it creates windows)."""
    return _wrap(_checked(optimizer), AsynchronousPairAveraging, model, num_steps_per_communication, window_prefix,
                 seed, only_fresh_peers)


def DistributedGradientTrackingOptimizer(  # noqa: N802
        optimizer: torch.optim.Optimizer, model: Any, name_prefix: str = "gt") -> torch.optim.Optimizer:
    """Gradient tracking (DIGing) over neighbor_allreduce on the static topology (see
    GradientTracking)."""
    return _wrap(_checked(optimizer), GradientTracking, model, name_prefix)


def DistributedExactDiffusionOptimizer(  # noqa: N802
        optimizer: torch.optim.Optimizer, model: Any, name_prefix: str = "ed") -> torch.optim.Optimizer:
    """Exact diffusion (adapt, correct, combine with (I + W) / 2) over neighbor_allreduce
    on the static, symmetric topology (see ExactDiffusion)."""
    return _wrap(_checked(optimizer), ExactDiffusion, model, name_prefix)


__all__ = [
    "SynchronousModelAveraging", "AsynchronousPairAveraging", "GradientTracking", "ExactDiffusion",
    "DistributedSynchronousModelAveragingOptimizer", "DistributedPairAveragingOptimizer",
    "DistributedGradientTrackingOptimizer", "DistributedExactDiffusionOptimizer",
]
