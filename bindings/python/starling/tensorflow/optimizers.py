"""broadcast_variables, DistributedGradientTape and DistributedOptimizer for TensorFlow
(BlueFog's, Horovod-style): gradients are averaged over every rank before they are
applied. Each group of gradients goes out as nonblocking allreduces in one fixed order,
then is waited for (one tf.py_function op for the group inside tf.function)."""

from typing import Any, List, Optional, Sequence

import tensorflow as tf

from .mpi_ops import _ctx, _tensor, average_group, size


def _dense(gradient: Any) -> Any:
    """tf.IndexedSlices (embedding gradients) as a dense tensor: Starling averages dense
    tensors."""
    return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


def _average(gradients: Sequence[Any]) -> List[Any]:
    if size() == 1:
        return list(gradients)
    return average_group([_dense(g) for g in gradients])


def _value(variable: Any) -> Any:
    """A tf.Variable as is; a Keras 3 variable's backend value (its .value property)."""
    if isinstance(variable, tf.Variable):
        return variable
    value = getattr(variable, "value", None)
    return variable if value is None or callable(value) else value


def broadcast_variables(variables: Sequence[Any], root_rank: int) -> None:
    """Sets every variable (tf.Variable or Keras 3 variable) to root_rank's value, all
    broadcasts in flight together, in the order given (the same list on every rank).
    Eager mode."""
    context, root = _ctx(), int(root_rank)
    variables = list(variables)
    values = [_tensor(_value(v), "broadcast_variables") for v in variables]
    requests = [context.broadcast_nonblocking(x, root) for x in values]
    for variable, request in zip(variables, requests):
        variable.assign(request.wait())


class DistributedGradientTape:
    """Wraps a tf.GradientTape: gradient() returns the gradients averaged over every
    rank. Everything else is the wrapped tape's (with-statement, watch, ...).

        with tf.GradientTape() as tape:
            loss = ...
        tape = bf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
    """

    def __init__(self, gradtape: tf.GradientTape, device: str = "", **_: Any) -> None:
        if not isinstance(gradtape, tf.GradientTape):
            raise TypeError(f"DistributedGradientTape wraps a tf.GradientTape, got {type(gradtape).__name__}")
        self._tape = gradtape

    def __enter__(self) -> "DistributedGradientTape":
        self._tape.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._tape.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tape, name)

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None, **kwargs: Any) -> Any:
        gradients = self._tape.gradient(target, sources, output_gradients, **kwargs)
        flat = tf.nest.flatten(gradients, expand_composites=False)
        return tf.nest.pack_sequence_as(gradients, _average(flat))


def _keras_optimizer_class() -> Optional[type]:
    try:
        import keras
        return keras.optimizers.Optimizer
    except ImportError:
        return None


def _with_apply(optimizer: Any, apply: Any) -> Any:
    """The same Keras 3 optimizer (class, configuration; wrap it before training, its
    state is not carried over) with apply() (which apply_gradients() calls) replaced."""
    return type(type(optimizer).__name__, (type(optimizer),), {"apply": apply}).from_config(optimizer.get_config())


def _distributed_keras(optimizer: Any) -> Any:
    """optimizer whose apply() and apply_gradients() average the gradients first."""
    base = type(optimizer)

    def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
        return base.apply(self, _average(list(grads)), trainable_variables)

    return _with_apply(optimizer, apply)


def _distributed_legacy(optimizer: Any, name: Optional[str], use_locking: bool) -> Any:
    """A tf.compat.v1.train.Optimizer whose compute_gradients() averages them."""
    legacy = tf.compat.v1.train.Optimizer

    class _DistributedOptimizer(legacy):
        def __init__(self) -> None:
            super().__init__(name=name or f"Distributed{type(optimizer).__name__}", use_locking=use_locking)
            self._optimizer = optimizer

        def compute_gradients(self, *args: Any, **kwargs: Any) -> Any:
            pairs = self._optimizer.compute_gradients(*args, **kwargs)
            grads, variables = zip(*pairs) if pairs else ((), ())
            return list(zip(_average(grads), variables))

        def apply_gradients(self, *args: Any, **kwargs: Any) -> Any:
            return self._optimizer.apply_gradients(*args, **kwargs)

        def get_slot(self, *args: Any, **kwargs: Any) -> Any:
            return self._optimizer.get_slot(*args, **kwargs)

        def get_slot_names(self, *args: Any, **kwargs: Any) -> Any:
            return self._optimizer.get_slot_names(*args, **kwargs)

        def variables(self, *args: Any, **kwargs: Any) -> Any:
            return self._optimizer.variables(*args, **kwargs)

    return _DistributedOptimizer()


def DistributedOptimizer(optimizer: Any, name: Optional[str] = None, use_locking: bool = False,
                         device: str = "") -> Any:
    """An optimizer that averages the gradients over every rank before applying them.
    Takes a Keras 3 optimizer (keras.optimizers.SGD, ...: returns one of the same class
    and configuration; BlueFog raised NotImplementedError) or a
    tf.compat.v1.train.Optimizer (BlueFog's form: compute_gradients averages)."""
    keras_optimizer = _keras_optimizer_class()
    if keras_optimizer is not None and isinstance(optimizer, keras_optimizer):
        return _distributed_keras(optimizer)
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        return _distributed_legacy(optimizer, name, use_locking)
    raise ValueError(f"Provided optimizer doesn't inherit from either legacy TensorFlow or Keras optimizer: "
                     f"{optimizer}")
