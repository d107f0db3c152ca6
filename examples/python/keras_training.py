"""A small Keras 3 model trained data-parallel with Starling: each rank fits its own
shard of a synthetic regression problem; the ranks start from rank 0's weights
(BroadcastInitialVariables) and average them every few batches (ModelAveraging, any
Keras backend), or average gradients inside the step (--mode gradients:
starling.tensorflow.DistributedOptimizer, TensorFlow backend).

    starlingrun -np 4 python examples/python/keras_training.py [--mode weights|neighbors|gradients]
    KERAS_BACKEND=jax starlingrun -np 4 python examples/python/keras_training.py

Checks at the end that every rank holds the same weights (weights, gradients) and that
the loss on the whole data set fell; exits 1 otherwise.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:
    import keras
except ImportError as missing:
    # The test suite runs this example: skipped (77) where Keras is not installed, unless
    # STARLING_REQUIRE_TENSORFLOW=1 (tests/modern/run.sh installs it).
    if os.environ.get("STARLING_REQUIRE_TENSORFLOW") == "1":
        raise
    print(f"skipped: {missing} (pip install keras tensorflow-cpu)")
    sys.exit(77)
import numpy as np  # noqa: E402

import starling.keras as sk  # noqa: E402


def shard(rank, size, rows=512):
    """Rows rank::size of y = x @ w_true + noise (every rank can recompute all of it)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(rows, 8)).astype(np.float32)
    y = (x @ rng.normal(size=(8, 1)) + 0.01 * rng.normal(size=(rows, 1))).astype(np.float32)
    return x[rank::size], y[rank::size], x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["weights", "neighbors", "gradients"], default="weights")
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    optimizer = keras.optimizers.SGD(learning_rate=0.05)
    callbacks = [sk.BroadcastInitialVariables(0)]
    if args.mode == "gradients":
        import starling.tensorflow as bf  # the TensorFlow backend's step averages gradients
        bf.init()
        optimizer = bf.DistributedOptimizer(optimizer)
    else:
        callbacks.append(sk.ModelAveraging(every=2, neighbors=args.mode == "neighbors"))
    ctx = sk.context()
    rank, size = ctx.rank, ctx.size
    x, y, x_all, y_all = shard(rank, size)
    keras.utils.set_random_seed(rank)  # different initial weights: the broadcast must fix them
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
    before = float(model.evaluate(x_all, y_all, verbose=0))
    model.fit(x, y, batch_size=16, epochs=args.epochs, shuffle=False, verbose=0, callbacks=callbacks)
    after = float(model.evaluate(x_all, y_all, verbose=0))
    flat = np.concatenate([keras.ops.convert_to_numpy(w).ravel() for w in model.weights]).astype(np.float64)
    spread = float(np.abs(ctx.allreduce(flat, "max") - ctx.allreduce(flat, "min")).max())
    if rank == 0:
        print(f"{keras.backend.backend()} backend, {size} ranks, {args.mode}: loss {before:.4f} -> {after:.4f}, "
              f"largest difference between ranks' weights {spread:.2e}")
    same = spread == 0.0 if args.mode != "neighbors" else True
    ok = after < 0.5 * before and same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
