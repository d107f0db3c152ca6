"""KungFu's three TensorFlow optimizers over Starling, for Keras 3 optimizers on the
TensorFlow backend (eagerly or inside tf.function, where the communication is one
tf.py_function op per step). Each returns an optimizer of the same class and
configuration (wrap it before training: its state is not carried over).

- SynchronousSGDOptimizer (S-SGD): the gradients are averaged over every rank before
  they are applied; the same as DistributedOptimizer.
- SynchronousAveragingOptimizer (SMA): before each update every variable moves a
  fraction alpha towards the average of every rank's copy, v <- v + alpha (mean(v) - v),
  then this rank's own gradient (computed at the old v) is applied.
- PairAveragingOptimizer (AD-PSGD): no rank waits for another. Each step a rank puts its
  variables into the window buffer of one out-neighbor (round robin over the topology's
  out-neighbors when the optimizer first steps), then averages its variables uniformly
  with the models that arrived from its in-neighbors since its last step (none arrived:
  it keeps its own). KungFu pulls a random peer's model; pushing keeps every read whole
  (an arriving model is swapped in under the window's lock) and costs no mutex.
"""

import itertools
from typing import Any, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from .mpi_ops import S, _ctx, average_group, size
from .optimizers import DistributedOptimizer, _keras_optimizer_class, _value, _with_apply

_names = itertools.count()


def _keras(optimizer: Any, who: str) -> type:
    keras_optimizer = _keras_optimizer_class()
    if keras_optimizer is None or not isinstance(optimizer, keras_optimizer):
        raise ValueError(f"{who} takes a Keras 3 optimizer (keras.optimizers.SGD, ...), got {optimizer!r}")
    return type(optimizer)


def _variables(optimizer: Any, trainable_variables: Any) -> List[Any]:
    if trainable_variables is not None:
        return list(trainable_variables)
    return list(optimizer._trainable_variables)  # Keras's own default in apply()


def SynchronousSGDOptimizer(optimizer: Any) -> Any:  # noqa: N802 (KungFu's name)
    """S-SGD: gradients averaged over every rank (DistributedOptimizer)."""
    _keras(optimizer, "SynchronousSGDOptimizer")
    return DistributedOptimizer(optimizer)


def SynchronousAveragingOptimizer(optimizer: Any, alpha: float = 0.1) -> Any:  # noqa: N802
    """SMA: v <- v + alpha (mean over the ranks of v - v), then the local update."""
    base = _keras(optimizer, "SynchronousAveragingOptimizer")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha is {alpha!r}; give a number in (0, 1] (the step towards the average)")
    alpha = float(alpha)

    def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
        grads = list(grads)
        variables = _variables(self, trainable_variables)
        if size() > 1 and variables:
            values = [_value(v) for v in variables]
            for variable, value, mean in zip(variables, values, average_group(values)):
                variable.assign(value + alpha * (mean - value))
        return base.apply(self, grads, trainable_variables)

    return _with_apply(optimizer, apply)


class _PairAveraging:
    """The window and schedule of one PairAveragingOptimizer: all variables flattened
    into one NumPy array of their common dtype (created at the first step, on every rank
    at once, as windows are)."""

    def __init__(self) -> None:
        self.window = None
        self.flat: Optional[np.ndarray] = None
        self.out_ranks: List[int] = []
        self.step = 0

    def average(self, *values: Any) -> List[Any]:
        arrays = [np.asarray(v) for v in values]
        if self.window is None:
            dtype = np.result_type(*arrays)
            self.flat = np.concatenate([a.ravel() for a in arrays]).astype(dtype)
            self.window = _ctx().window(self.flat, f"starling.tensorflow.pair_averaging.{next(_names)}")
            self.out_ranks = sorted(S.out_ranks)
        else:
            self.flat[...] = np.concatenate([a.ravel() for a in arrays])
        if self.out_ranks:
            peer = self.out_ranks[self.step % len(self.out_ranks)]
            self.window.put(dst_weights={peer: 1.0})
        self.step += 1
        # The models that arrived since the last update (one landing between the query
        # and the update is skipped: its sender's next put replaces it).
        fresh = [r for r, version in self.window.versions().items() if version > 0]
        share = 1.0 / (len(fresh) + 1)
        self.window.update(self_weight=share, neighbor_weights={r: share for r in fresh})
        out, first = [], 0
        for a in arrays:
            out.append(self.flat[first:first + a.size].reshape(a.shape).astype(a.dtype))
            first += a.size
        return out


def PairAveragingOptimizer(optimizer: Any) -> Any:  # noqa: N802 (KungFu's name)
    """AD-PSGD: asynchronous pairwise model averaging (see the module's text)."""
    base = _keras(optimizer, "PairAveragingOptimizer")
    state = _PairAveraging()

    def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
        grads = list(grads)
        variables = _variables(self, trainable_variables)
        if size() > 1 and variables:
            values = [tf.convert_to_tensor(_value(v)) for v in variables]
            for v in values:
                if not v.dtype.is_floating:
                    raise ValueError(f"PairAveragingOptimizer averages floating-point variables, got {v.dtype.name}")
            if tf.executing_eagerly():
                averaged: Sequence[Any] = state.average(*[v.numpy() for v in values])
            else:
                averaged = tf.py_function(lambda *ts: state.average(*[t.numpy() for t in ts]), values,
                                          Tout=[v.dtype for v in values])
            for variable, value, new in zip(variables, values, averaged):
                variable.assign(tf.reshape(tf.cast(new, value.dtype), value.shape))
        return base.apply(self, grads, trainable_variables)

    return _with_apply(optimizer, apply)
