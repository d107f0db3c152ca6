"""Keras 3 callbacks for data-parallel and decentralized training, on any Keras backend
(TensorFlow, JAX, PyTorch): the weights travel as NumPy arrays through the core
starling.Context between batches, so nothing enters the backend's compiled step.

    model.fit(x, y, callbacks=[starling.keras.BroadcastInitialVariables(0),
                               starling.keras.ModelAveraging()])

Gradient averaging inside the step is starling.tensorflow.DistributedOptimizer (the
TensorFlow backend, with jit_compile=False: the averaging is a tf.py_function).
"""

import sys
from typing import Any, List, Optional

import keras
import numpy as np

from .context import Context

_own_context: Optional[Context] = None


def context() -> Context:
    """The context the callbacks use: starling.tensorflow's or starling.torch's when
    initialized, else one of this module's own (created on first use: collective)."""
    global _own_context
    for module, attribute in (("starling.tensorflow.mpi_ops", "S"), ("starling.torch._state", None)):
        state = sys.modules.get(module)
        if state is not None:
            ctx = getattr(getattr(state, attribute), "context") if attribute else state.context
            if ctx is not None:
                return ctx
    if _own_context is None:
        _own_context = Context()
    return _own_context


def _arrays(variables: List[Any]) -> List[np.ndarray]:
    return [np.ascontiguousarray(keras.ops.convert_to_numpy(v.value)) for v in variables]


class BroadcastInitialVariables(keras.callbacks.Callback):
    """At the start of training every rank takes root_rank's model weights."""

    def __init__(self, root_rank: int = 0) -> None:
        super().__init__()
        self.root_rank = int(root_rank)

    def on_train_begin(self, logs: Any = None) -> None:
        ctx = context()
        variables = self.model.weights
        requests = [ctx.broadcast_nonblocking(a, self.root_rank) for a in _arrays(variables)]
        for variable, request in zip(variables, requests):
            variable.assign(request.wait())


class ModelAveraging(keras.callbacks.Callback):
    """Every `every` batches each rank replaces its trainable weights by their average:
    over every rank (neighbors=False), or with its in-neighbors on the current topology
    (neighbors=True: decentralized averaging, neighbor_allreduce)."""

    def __init__(self, every: int = 1, neighbors: bool = False) -> None:
        super().__init__()
        if int(every) < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every, self.neighbors = int(every), bool(neighbors)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if (batch + 1) % self.every:
            return
        ctx = context()
        variables = self.model.trainable_weights
        arrays = _arrays(variables)
        for a in arrays:
            if a.dtype.kind != "f":
                raise TypeError(f"ModelAveraging averages floating-point weights; got {a.dtype}")
        if self.neighbors:
            requests = [ctx.neighbor_allreduce_nonblocking(a) for a in arrays]
        else:
            requests = [ctx.allreduce_nonblocking(a, "average") for a in arrays]
        for variable, request in zip(variables, requests):
            variable.assign(request.wait())
