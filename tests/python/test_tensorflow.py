"""starling.tensorflow (the bluefog.tensorflow drop-in) against NumPy float64 references:
collectives, neighbor operations (static, dynamic), tf.function, variables, the
distributed tape and optimizers (a training step against an explicit-allreduce
reference), and bad input. Run by run_tensorflow_tests.py (exit 77 without TensorFlow).

Every rank makes the same calls in the same order and computes before it asserts."""

import numpy as np
import pytest
import tensorflow as tf

import starling
import starling.tensorflow as bf
from conftest import values  # deterministic per-rank data, exact in every dtype

bf.init()
RANK, SIZE = bf.rank(), bf.size()

DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8"]
TOLERANCE = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-12}


def tensor(rank, shape, dtype, salt=0):
    return tf.constant(values(rank, shape, dtype, salt).astype(dtype))


def check(actual, expected, dtype, tolerance=None):
    assert isinstance(actual, tf.Tensor), type(actual)
    assert actual.dtype.name == dtype, actual.dtype
    a = actual.numpy().astype(np.float64)
    assert a.shape == np.shape(expected), (a.shape, np.shape(expected))
    tol = TOLERANCE.get(dtype, 0.0) if tolerance is None else tolerance
    np.testing.assert_allclose(a, expected, rtol=0, atol=tol * max(1.0, float(np.abs(expected).max(initial=0))))


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_broadcast_allgather(dtype):
    x = tensor(RANK, (3, 5), dtype)
    everyone = [values(r, (3, 5), dtype) for r in range(SIZE)]
    total = bf.allreduce(x, average=False)
    root = bf.broadcast(x, SIZE - 1)
    rows = tensor(RANK, (RANK + 1, 2), dtype, salt=1)  # first dimensions differ between ranks
    gathered = bf.allgather(rows)
    mean = bf.allreduce(x) if dtype.startswith("float") else None
    check(total, sum(everyone), dtype)
    check(root, everyone[-1], dtype)
    check(gathered, np.concatenate([values(r, (r + 1, 2), dtype, salt=1) for r in range(SIZE)]), dtype)
    if mean is not None:
        check(mean, sum(everyone) / SIZE, dtype)


@pytest.mark.skipif(SIZE == 1, reason="the one-peer exchange needs a peer")
def test_neighbor_allreduce_static_and_dynamic():
    assert bf.set_topology(bf.RingGraph(SIZE))
    x = tensor(RANK, (4, 3), "float64")
    mine = values(RANK, (4, 3), "float64")
    sources = bf.in_neighbor_ranks()
    uniform = bf.neighbor_allreduce(x)
    weights = {s: 0.25 / len(sources) for s in sources}
    weighted = bf.neighbor_allreduce(x, self_weight=0.75, src_weights=weights)
    # Dynamic: a one-peer exchange, rank r sends to r+1 and receives from r-1.
    send_to, recv_from = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    dynamic = bf.neighbor_allreduce(x, self_weight=0.5, src_weights={recv_from: 0.5}, dst_weights=[send_to])
    gathered = bf.neighbor_allgather(x)
    gathered_dynamic = bf.neighbor_allgather(x, src_ranks=[recv_from], dst_ranks=[send_to])
    bf.set_topology(bf.ExponentialGraph(SIZE))
    check(uniform, (mine + sum(values(s, (4, 3), "float64") for s in sources)) / (len(sources) + 1), "float64")
    check(weighted, 0.75 * mine + sum(w * values(s, (4, 3), "float64") for s, w in weights.items()), "float64")
    check(dynamic, 0.5 * mine + 0.5 * values(recv_from, (4, 3), "float64"), "float64")
    check(gathered, np.concatenate([values(s, (4, 3), "float64") for s in sources]), "float64")
    check(gathered_dynamic, values(recv_from, (4, 3), "float64"), "float64")


def test_nonblocking_forms_and_handles():
    """Every nonblocking form in flight at once (issued in one order on every rank),
    then synchronized in another; the results against the blocking references."""
    x = tensor(RANK, (3, 4), "float64")
    mine = values(RANK, (3, 4), "float64")
    everyone = [values(r, (3, 4), "float64") for r in range(SIZE)]
    sources = bf.in_neighbor_ranks()
    send_to, recv_from = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    handles = [
        bf.allreduce_nonblocking(x),
        bf.allreduce_nonblocking(tensor(RANK, (5,), "int32"), average=False),
        bf.broadcast_nonblocking(x, SIZE - 1),
        bf.allgather_nonblocking(tensor(RANK, (RANK + 1, 2), "float32", salt=1)),
        bf.neighbor_allreduce_nonblocking(x),
        bf.neighbor_allreduce_nonblocking(x, self_weight=0.5, src_weights={recv_from: 0.5}, dst_weights=[send_to]),
        bf.neighbor_allgather_nonblocking(x),
    ]
    assert len(set(handles)) == len(handles) and all(isinstance(h, int) for h in handles)
    results = [bf.synchronize(h) for h in reversed(handles[1:])][::-1]
    while not bf.poll(handles[0]):
        pass
    results.insert(0, bf.wait(handles[0]))
    check(results[0], sum(everyone) / SIZE, "float64")
    check(results[1], sum(values(r, (5,), "int32") for r in range(SIZE)), "int32")
    check(results[2], everyone[-1], "float64")
    check(results[3], np.concatenate([values(r, (r + 1, 2), "float32", salt=1) for r in range(SIZE)]), "float32")
    check(results[4], (mine + sum(everyone[s] for s in sources)) / (len(sources) + 1), "float64")
    check(results[5], 0.5 * mine + 0.5 * everyone[recv_from], "float64")
    check(results[6], np.concatenate([everyone[s] for s in sources]), "float64")
    for h in handles:  # released by synchronize
        with pytest.raises(ValueError, match="synchronize"):
            bf.synchronize(h)
        with pytest.raises(ValueError, match="not created"):
            bf.poll(h)
    with pytest.raises(starling.UnsupportedError, match="floating-point"):
        bf.allreduce_nonblocking(tensor(RANK, (2,), "int32"))  # average=True on integers
    with pytest.raises(ValueError, match="at the same time"):
        bf.neighbor_allreduce_nonblocking(x, self_weight=0.5)

    @tf.function
    def graph(t):
        return bf.allreduce_nonblocking(t)

    with pytest.raises(Exception, match="InvalidUsageError: allreduce_nonblocking runs eagerly only"):
        graph(x)  # TensorFlow's autograph re-raises it as its StagingError


def test_inside_tf_function():
    @tf.function
    def step(t):
        return bf.allreduce(t * 2.0) + 1.0, bf.allgather(t), bf.average_group([t, None, t * 3.0])

    x = tensor(RANK, (2, 3), "float32")
    mean = sum(values(r, (2, 3), "float32") for r in range(SIZE)) / SIZE
    (reduced, gathered, group), again = step(x), step(x + 1.0)  # the traced graph runs twice
    check(reduced, 2 * mean + 1, "float32")
    check(gathered, np.concatenate([values(r, (2, 3), "float32") for r in range(SIZE)]), "float32")
    assert group[1] is None
    check(group[0], mean, "float32")
    check(group[2], 3 * mean, "float32")
    check(again[0], 2 * (mean + 1) + 1, "float32")


def test_variables_and_broadcast_variables():
    import keras
    v = tf.Variable(values(RANK, (3,), "float32").astype(np.float32))
    k = keras.Variable(values(RANK, (2, 2), "float64"), dtype="float64")
    total = bf.allreduce(v, average=False)  # a Variable is read as its value
    bf.broadcast_variables([v, k], root_rank=0)
    check(total, sum(values(r, (3,), "float32") for r in range(SIZE)), "float32")
    np.testing.assert_array_equal(v.numpy(), values(0, (3,), "float32").astype(np.float32))
    np.testing.assert_array_equal(np.asarray(k.numpy()), values(0, (2, 2), "float64"))


def _least_squares(rank):
    a = values(rank, (8, 3), "float32", salt=2).astype(np.float32)
    b = values(rank, (8, 1), "float32", salt=3).astype(np.float32)
    return a, b


def _reference_gradient(w):
    """The average over ranks of each rank's mean-squared-error gradient, in float64."""
    grads = []
    for r in range(SIZE):
        a, b = (m.astype(np.float64) for m in _least_squares(r))
        grads.append(2.0 / len(a) * a.T @ (a @ w - b))
    return sum(grads) / SIZE


def test_gradient_tape_and_optimizers_step():
    import keras
    w0 = np.array([[0.5], [-0.25], [1.0]], dtype=np.float32)
    a, b = (tf.constant(m) for m in _least_squares(RANK))
    w = tf.Variable(w0)

    def loss():
        return tf.reduce_mean((a @ w - b) ** 2)

    # DistributedGradientTape against an explicit allreduce of the plain tape's gradient.
    with tf.GradientTape() as plain:
        plain_loss = loss()
    explicit = bf.allreduce(plain.gradient(plain_loss, w))
    with bf.DistributedGradientTape(tf.GradientTape()) as tape:
        tape_loss = loss()
    averaged = tape.gradient(tape_loss, [w])[0]

    # A Keras 3 optimizer step, eager and inside tf.function.
    optimizer = bf.DistributedOptimizer(keras.optimizers.SGD(learning_rate=0.1))
    with tf.GradientTape() as local:
        local_loss = loss()
    optimizer.apply_gradients([(local.gradient(local_loss, w), w)])
    after_eager = w.numpy().copy()

    @tf.function
    def train_step():
        with tf.GradientTape() as t:
            value = loss()
        optimizer.apply(t.gradient(value, [w]), [w])

    train_step()
    after_graph = w.numpy().copy()

    # BlueFog's form: a tf.compat.v1 optimizer whose compute_gradients averages.
    legacy = bf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    w.assign(w0)
    legacy.apply_gradients(legacy.compute_gradients(loss, var_list=[w]))
    after_legacy = w.numpy().copy()

    g0 = _reference_gradient(w0.astype(np.float64))
    w1 = w0 - 0.1 * g0
    check(explicit, g0, "float32", tolerance=1e-5)
    check(averaged, explicit.numpy().astype(np.float64), "float32", tolerance=0)
    assert isinstance(optimizer, keras.optimizers.SGD) and optimizer.learning_rate.numpy() == pytest.approx(0.1)
    np.testing.assert_allclose(after_eager, w1, rtol=0, atol=1e-5)
    np.testing.assert_allclose(after_graph, w1 - 0.1 * _reference_gradient(w1), rtol=0, atol=1e-5)
    np.testing.assert_allclose(after_legacy, w1, rtol=0, atol=1e-5)


def test_keras_callbacks_broadcast_then_average():
    """One SGD step of a linear Keras model on each rank's data, started from rank 0's
    weights and averaged by ModelAveraging: w0 - lr * (average of the ranks' gradients)."""
    import keras
    import starling.keras as sk
    a, b = _least_squares(RANK)
    w0 = np.array([[0.5], [-0.25], [1.0]], dtype=np.float32)
    keras.utils.set_random_seed(RANK)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    if RANK == 0:
        model.set_weights([w0, np.array([0.125], np.float32)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse")
    model.fit(a, b, batch_size=len(a), epochs=1, verbose=0,
              callbacks=[sk.BroadcastInitialVariables(0), sk.ModelAveraging()])
    kernel, bias = (np.asarray(w, np.float64) for w in model.get_weights())
    grads_w, grads_b = [], []
    for r in range(SIZE):
        ar, br = (m.astype(np.float64) for m in _least_squares(r))
        residual = ar @ w0.astype(np.float64) + 0.125 - br
        grads_w.append(2.0 / len(ar) * ar.T @ residual)
        grads_b.append(2.0 / len(ar) * residual.sum(axis=0))
    np.testing.assert_allclose(kernel, w0 - 0.1 * sum(grads_w) / SIZE, rtol=0, atol=1e-5)
    np.testing.assert_allclose(bias, 0.125 - 0.1 * sum(grads_b) / SIZE, rtol=0, atol=1e-5)


def test_bad_input_is_a_clear_error():
    with pytest.raises(starling.UnsupportedError, match="dtype string"):
        bf.allreduce(tf.constant(["a", "b"]))  # TensorFlow's own to_dlpack would abort the process
    with pytest.raises(starling.UnsupportedError, match="dtype bool"):
        bf.broadcast(tf.constant([True]), 0)
    with pytest.raises(starling.UnsupportedError, match="bfloat16"):
        bf.allgather(tf.ones(3, tf.bfloat16))
    with pytest.raises(starling.UnsupportedError, match="floating-point"):
        bf.allreduce(tf.constant([1, 2]))  # average=True on integers
    with pytest.raises(ValueError, match="IndexedSlices"):
        bf.allreduce(tf.IndexedSlices(tf.ones((1, 2)), tf.constant([0]), tf.constant([3, 2])))
    with pytest.raises(TypeError, match="expected a TensorFlow tensor"):
        bf.allreduce(object())
    with pytest.raises(ValueError, match="at the same time"):
        bf.neighbor_allreduce(tf.ones(2), self_weight=0.5)
    # The core Context refuses string tensors too, instead of aborting inside TensorFlow.
    with pytest.raises(starling.UnsupportedError, match="dtype string"):
        starling.Context.allreduce(bf.mpi_ops.S.context, tf.constant(["x"]))
    if SIZE > 1:
        # Disagreeing shapes and dtypes between ranks: an error on every rank, no hang.
        with pytest.raises(starling.MismatchError):
            bf.allreduce(tf.ones(RANK + 2))
        with pytest.raises(starling.MismatchError):
            bf.allreduce(tf.ones(3, tf.float32 if RANK == 0 else tf.float64))
    after = bf.allreduce(tf.ones(2), average=False)  # and the next call works
    check(after, np.full(2, SIZE), "float32")


# ---- KungFu's optimizers ---------------------------------------------------------------------------
def _local_gradient(w, rank):
    a, b = (m.astype(np.float64) for m in _least_squares(rank))
    return 2.0 / len(a) * a.T @ (a @ w - b)


def _start(rank):
    """Each rank its own starting weights (SMA and pair averaging must bring them together)."""
    return np.array([[0.5], [-0.25], [1.0]]) + 0.125 * rank


def test_kungfu_synchronous_optimizers():
    """S-SGD is DistributedOptimizer. SMA, one step eager and one inside tf.function:
    w <- w + alpha (mean of the ranks' w - w) - lr * (own gradient at the old w),
    against float64 NumPy."""
    import keras
    assert isinstance(bf.SynchronousSGDOptimizer(keras.optimizers.SGD(learning_rate=0.1)), keras.optimizers.SGD)
    w = tf.Variable(_start(RANK).astype(np.float32))
    a, b = (tf.constant(m) for m in _least_squares(RANK))

    def loss():
        return tf.reduce_mean((a @ w - b) ** 2)

    sma = bf.SynchronousAveragingOptimizer(keras.optimizers.SGD(learning_rate=0.1), alpha=0.25)
    assert isinstance(sma, keras.optimizers.SGD)
    with tf.GradientTape() as tape:
        value = loss()
    sma.apply_gradients([(tape.gradient(value, w), w)])
    after_eager = w.numpy().copy()

    @tf.function
    def step():
        with tf.GradientTape() as t:
            v = loss()
        sma.apply(t.gradient(v, [w]), [w])

    step()
    after_graph = w.numpy().copy()
    ws = [_start(r) for r in range(SIZE)]
    expected = []
    for _ in range(2):
        mean = sum(ws) / SIZE
        ws = [w_r + 0.25 * (mean - w_r) - 0.1 * _local_gradient(w_r, r) for r, w_r in enumerate(ws)]
        expected.append(ws[RANK])
    np.testing.assert_allclose(after_eager, expected[0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(after_graph, expected[1], rtol=0, atol=1e-5)


def _pair_averaging_run(steps, averaging, lr):
    """steps of SGD (learning rate lr) on this rank's least squares from its own start,
    with PairAveragingOptimizer or without; a barrier after each step bounds how far
    ranks drift apart. Returns (the final w, the loss on every rank's data)."""
    import keras
    w = tf.Variable(_start(RANK).astype(np.float32))
    a, b = (tf.constant(m) for m in _least_squares(RANK))
    sgd = keras.optimizers.SGD(learning_rate=lr)
    optimizer = bf.PairAveragingOptimizer(sgd) if averaging else sgd

    @tf.function
    def graph_step():
        with tf.GradientTape() as t:
            v = tf.reduce_mean((a @ w - b) ** 2)
        optimizer.apply(t.gradient(v, [w]), [w])

    for i in range(steps):
        if i % 2:  # eager and inside tf.function in turn
            graph_step()
        else:
            with tf.GradientTape() as tape:
                value = tf.reduce_mean((a @ w - b) ** 2)
            optimizer.apply_gradients([(tape.gradient(value, w), w)])
        bf.barrier()
    final = w.numpy().astype(np.float64)
    everything = [_least_squares(r) for r in range(SIZE)]
    loss = np.mean([np.mean((x.astype(np.float64) @ final - y) ** 2) for x, y in everything])
    return final, loss


def _spread(w):
    """The largest difference between two ranks' copies of w."""
    context = bf.mpi_ops.S.context
    return float(np.abs(np.asarray(context.allreduce(w, "max")) - np.asarray(context.allreduce(w, "min"))).max())


@pytest.mark.skipif(SIZE == 1, reason="pair averaging needs a peer")
def test_kungfu_pair_averaging_reaches_consensus_and_trains():
    """Asynchronous, so no exact reference. With a zero learning rate (gossip alone) the
    ranks' different starts must meet inside their range; training, the copies must end
    closer together, and their mean loss on all the data lower, than plain SGD's from the
    same starts (measured at 3 ranks: mean loss 5.6-6.2 against 7.1)."""
    gossip, _ = _pair_averaging_run(40, averaging=True, lr=0.0)
    starts = np.stack([_start(r) for r in range(SIZE)])
    assert _spread(gossip) < 1e-3 * 0.125 * (SIZE - 1), gossip
    assert np.all(starts.min(axis=0) <= gossip) and np.all(gossip <= starts.max(axis=0)), gossip
    w_alone, alone = _pair_averaging_run(40, averaging=False, lr=0.05)
    w_paired, paired = _pair_averaging_run(40, averaging=True, lr=0.05)
    # Asynchronous: one rank's model may have just taken a local step when the run
    # ends, so the checks are on all ranks together. Pairing pulls the copies together,
    # which training alone does not, and the mean loss on all the data ends lower.
    context = bf.mpi_ops.S.context
    mean = lambda x: float(np.asarray(context.allreduce(np.array([x]), "average"))[0])  # noqa: E731
    assert _spread(w_paired) < _spread(w_alone), (_spread(w_paired), _spread(w_alone))  # 0.25-0.64 < 0.95
    assert mean(paired) < mean(alone), (mean(paired), mean(alone))


def test_kungfu_optimizers_bad_input():
    import keras
    with pytest.raises(ValueError, match="alpha"):
        bf.SynchronousAveragingOptimizer(keras.optimizers.SGD(), alpha=0)
    with pytest.raises(ValueError, match="alpha"):
        bf.SynchronousAveragingOptimizer(keras.optimizers.SGD(), alpha="0.1")
    for factory in (bf.SynchronousSGDOptimizer, bf.SynchronousAveragingOptimizer, bf.PairAveragingOptimizer):
        with pytest.raises(ValueError, match="Keras 3 optimizer"):
            factory(tf.compat.v1.train.GradientDescentOptimizer(0.1))


# ---- one-sided windows (starling.torch's win_* names and semantics) ------------------------------
def _sources(graph, r):  # in-neighbors of r in a topology graph (whose self-loops carry self weights)
    return sorted(j for j in graph.predecessors(r) if j != r)


def _destinations(graph, r):
    return sorted(j for j in graph.successors(r) if j != r)


@pytest.mark.skipif(SIZE == 1, reason="windows need a peer")
def test_windows_follow_a_variable():
    sources, dests = bf.in_neighbor_ranks(), bf.out_neighbor_ranks()
    mine = values(RANK, (3, 2), "float64")
    v = tf.Variable(mine)
    assert bf.win_create(v, "tw") and not bf.win_create(v, "tw")  # a taken name gives False
    assert bf.get_current_created_window_names() == ["tw"]
    assert bf.get_win_version("tw") == {j: 0 for j in sources}
    bf.barrier()
    assert bf.win_put(v, "tw") is True
    bf.barrier()
    assert bf.get_win_version("tw") == {j: 1 for j in sources}
    y = bf.win_update("tw")
    expected = (mine + sum(values(j, (3, 2), "float64") for j in sources)) / (len(sources) + 1)
    check(y, expected, "float64")
    check(tf.convert_to_tensor(v), expected, "float64")  # the variable follows the window
    assert bf.get_win_version("tw") == {j: 0 for j in sources}
    # Changed by the user, the variable is what the next put sends (None: the window's
    # value); self_weight then scales the variable, once the nonblocking put is waited on.
    v.assign(tf.fill((3, 2), tf.constant(RANK + 1.0, tf.float64)))
    bf.barrier()
    h = bf.win_put_nonblocking(None, "tw", self_weight=0.5, dst_weights={d: 2.0 for d in dests})
    assert isinstance(h, int) and bf.win_wait(h) is True and bf.win_wait(h) is False
    check(tf.convert_to_tensor(v), np.full((3, 2), 0.5 * (RANK + 1)), "float64")
    bf.barrier()
    z = bf.win_update("tw", self_weight=1.0, neighbor_weights={j: 1.0 for j in sources}, clone=True)
    check(z, np.full((3, 2), 0.5 * (RANK + 1) + sum(2.0 * (j + 1) for j in sources)), "float64")
    check(tf.convert_to_tensor(v), np.full((3, 2), 0.5 * (RANK + 1)), "float64")  # clone: left alone
    bf.barrier()
    assert bf.win_free("tw") and bf.get_current_created_window_names() == []


@pytest.mark.skipif(SIZE == 1, reason="windows need a peer")
def test_windows_accumulate_collect_and_get_on_a_tensor():
    graph = bf.load_topology()
    sources, dests = bf.in_neighbor_ranks(), bf.out_neighbor_ranks()

    def collected(r):  # rank r's value after accumulate (weight 0.5) and collect
        return values(r, (5,), "float32") + sum(0.5 * values(j, (5,), "float32") for j in _sources(graph, r))

    x = tf.constant(values(RANK, (5,), "float32").astype("float32"))
    assert bf.win_create(x, "ta", zero_init=True)
    bf.barrier()
    assert bf.win_accumulate(x, "ta", dst_weights={d: 0.5 for d in dests}) is True
    bf.barrier()
    check(bf.win_update_then_collect("ta"), collected(RANK), "float32")
    check(bf.win_update_then_collect("ta"), collected(RANK), "float32")  # the buffers were zeroed
    bf.barrier()
    h = bf.win_get_nonblocking("ta", src_weights={j: 1.0 for j in sources})
    while not bf.win_poll(h):
        pass
    assert bf.win_wait(h)
    bf.barrier()
    y = bf.win_update("ta", self_weight=0.0, neighbor_weights={j: 1.0 / len(sources) for j in sources})
    check(y, sum(collected(j) for j in sources) / len(sources), "float32")
    bf.barrier()
    assert bf.win_free()


def test_windows_bad_input():
    with pytest.raises(starling.NotFoundError, match="does not exist"):
        bf.win_update("nope")
    with pytest.raises(starling.InvalidUsageError, match="floating-point"):
        bf.win_create(tf.constant([1, 2]), "ints")
    with pytest.raises(TypeError, match="str"):
        bf.win_create(tf.constant([1.0]), 3)
    x = tf.constant([1.0, 2.0])
    assert bf.win_create(x, "bad")
    try:
        with pytest.raises(ValueError, match="tf.Variable"):
            bf.win_put(x, "bad", self_weight=0.5)  # a tf.Tensor cannot be scaled in place
        with pytest.raises(ValueError, match=r"holds float32\[2\]"):
            bf.win_put(tf.constant([1.0, 2.0, 3.0]), "bad")
        with pytest.raises(ValueError, match=r"holds float32\[2\]"):
            bf.win_accumulate(tf.constant([1.0, 2.0], dtype=tf.float64), "bad")
        with pytest.raises(ValueError, match="out-neighbors"):
            bf.win_put(x, "bad", dst_weights={RANK: 1.0})
        with pytest.raises(ValueError, match="at the same time"):
            bf.win_update("bad", self_weight=0.5)
        with pytest.raises(ValueError, match="not created"):
            bf.win_poll(12345)
        assert bf.win_wait(12345) is False
    finally:
        bf.barrier()
        assert bf.win_free("bad")


@pytest.mark.skipif(SIZE == 1, reason="windows need a peer")
def test_windows_push_sum_carries_p():
    """docs/snippets/tensorflow_windows.py's step: accumulate with self_weight 0.5 and
    0.5 / out-degree to each out-neighbor, p alongside, then collect."""
    graph = bf.load_topology()
    out = bf.out_neighbor_ranks()
    v = tf.Variable(tf.fill([7], float(RANK)))
    assert bf.win_create(v, "ps", zero_init=True)
    bf.turn_on_win_ops_with_associated_p()
    try:
        bf.barrier()
        assert bf.win_accumulate(v, "ps", self_weight=0.5, dst_weights={d: 0.5 / len(out) for d in out})
        check(tf.convert_to_tensor(v), np.full(7, 0.5 * RANK), "float32")
        bf.barrier()
        y = bf.win_update_then_collect("ps")
        share = {j: 0.5 / len(_destinations(graph, j)) for j in _sources(graph, RANK)}
        check(y, np.full(7, 0.5 * RANK + sum(w * j for j, w in share.items())), "float32")
        check(tf.convert_to_tensor(v), y.numpy(), "float32")
        assert abs(bf.win_associated_p("ps") - (0.5 + sum(share.values()))) < 1e-12
    finally:
        bf.turn_off_win_ops_with_associated_p()
        bf.barrier()
        bf.win_free("ps")
