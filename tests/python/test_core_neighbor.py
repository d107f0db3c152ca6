"""starling.Context neighbor operations: static (default, weighted topology, explicit
weights), dynamic (with per-destination weights), neighbor_allgather, hierarchical,
against float64 references computed from BlueFog's definitions."""

import numpy as np
import pytest

import starling
from conftest import DTYPES, NUMPY_DTYPES, RANK, SIZE, assert_close, make, values

SHAPE = (4, 3)


def exp2_in_neighbors(rank, size):
    """In-neighbors in the exponential-2 graph: rank - 2^k for 2^k < size."""
    ranks, d = set(), 1
    while d < size:
        ranks.add((rank - d) % size)
        d *= 2
    ranks.discard(rank)
    return sorted(ranks)


def rounded(x, dtype):
    """Starling rounds integer results to nearest (ties away from zero) and saturates."""
    if dtype.startswith("float") or dtype == "bfloat16":
        return x
    info = np.iinfo(dtype)
    return np.clip(np.sign(x) * np.floor(np.abs(x) + 0.5), info.min, info.max)


@pytest.mark.parametrize("framework,dtype", [("numpy", d) for d in NUMPY_DTYPES] + [("torch", d) for d in DTYPES])
def test_static_default_is_uniform_average(ctx, framework, dtype):
    x = make(framework, RANK, SHAPE, dtype)
    y = ctx.neighbor_allreduce(x)
    sources = exp2_in_neighbors(RANK, SIZE)
    expected = (values(RANK, SHAPE, dtype) + sum(values(j, SHAPE, dtype) for j in sources)) / (len(sources) + 1)
    assert type(y) is type(x) and y.dtype == x.dtype
    assert_close(y, rounded(expected, dtype), dtype)
    assert ctx.in_neighbors == sources


def test_weighted_topology_and_explicit_weights(ctx):
    star = starling.Topology.star(SIZE)
    w = star.to_matrix()
    try:
        ctx.set_topology(star, weighted=True)
        assert ctx.topology_weighted and ctx.topology == star
        x = make("torch", RANK, SHAPE, "float64")
        y = ctx.neighbor_allreduce(x)
        # Edge i -> j with weight W[i, j]: rank j receives sum_i W[i, j] x_i.
        expected = sum(w[i, RANK] * values(i, SHAPE, "float64") for i in range(SIZE))
        assert_close(y, expected, "float64")

        # Explicit weights for a subset of the in-neighbors: the others count 0.
        sources = ctx.in_neighbors
        chosen = {j: 0.125 * (j + 1) for j in sources[:1]}
        z = ctx.neighbor_allreduce(x, self_weight=0.5, src_weights=chosen)
        expected = 0.5 * values(RANK, SHAPE, "float64") + sum(v * values(j, SHAPE, "float64")
                                                              for j, v in chosen.items())
        assert_close(z, expected, "float64")
    finally:
        ctx.set_topology(starling.Topology.exponential_two(SIZE))
    assert not ctx.topology_weighted


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_dynamic_one_peer_with_destination_weights(ctx, framework):
    dst, src = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    x = make(framework, RANK, SHAPE, "float32")
    if SIZE == 1:
        y = ctx.neighbor_allreduce(x, self_weight=0.5, src_weights={}, dst_weights=[])
        assert_close(y, 0.5 * values(RANK, SHAPE, "float32"), "float32")
        return
    # The sender scales what it sends by 2 * (sender + 1); receivers weight by 0.25.
    y = ctx.neighbor_allreduce(x, self_weight=0.5, src_weights={src: 0.25}, dst_weights={dst: 2.0 * (RANK + 1)},
                               check_topology=True)
    expected = 0.5 * values(RANK, SHAPE, "float32") + 0.25 * 2.0 * (src + 1) * values(src, SHAPE, "float32")
    assert_close(y, expected, "float32")


@pytest.mark.skipif(SIZE < 2, reason="needs a peer")
def test_dynamic_mismatch_is_reported_on_every_rank(ctx):
    x = np.ones(3)
    with pytest.raises(starling.MismatchError) as info:
        # Everyone sends to the next rank, but nobody expects to receive.
        ctx.neighbor_allreduce(x, self_weight=1.0, src_weights={}, dst_weights=[(RANK + 1) % SIZE],
                               check_topology=True)
    assert "rank" in str(info.value)


def test_nonblocking_calls_fuse_and_stay_exact(ctx):
    before = ctx.stats()["fused_operations"]
    xs = [make("numpy", RANK, (64,), "float64", salt=k) for k in range(16)]
    requests = [ctx.neighbor_allreduce_nonblocking(x) for x in xs]
    sources = exp2_in_neighbors(RANK, SIZE)
    for k, request in enumerate(requests):
        expected = (values(RANK, (64,), "float64", k) + sum(values(j, (64,), "float64", k) for j in sources))
        assert_close(request.wait(), expected / (len(sources) + 1), "float64")
    if SIZE > 1:
        assert ctx.stats()["fused_operations"] >= before  # fusion is allowed, never required


def test_in_place(ctx):
    x = make("torch", RANK, SHAPE, "float64")
    sources = exp2_in_neighbors(RANK, SIZE)
    assert ctx.neighbor_allreduce(x, out=x) is x
    expected = (values(RANK, SHAPE, "float64") + sum(values(j, SHAPE, "float64") for j in sources))
    assert_close(x, expected / (len(sources) + 1), "float64")


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_neighbor_allgather_static_and_dynamic(ctx, framework):
    x = make(framework, RANK, (RANK + 1, 2), "int32")
    y = ctx.neighbor_allgather(x)
    sources = exp2_in_neighbors(RANK, SIZE)
    expected = np.concatenate([values(j, (j + 1, 2), "int32") for j in sources]) if sources else np.zeros((0, 2))
    assert_close(y, expected, "int32")
    # Dynamic: everyone receives from every other rank, in descending order.
    others = [r for r in reversed(range(SIZE)) if r != RANK]
    z = ctx.neighbor_allgather_nonblocking(x, src_ranks=others, dst_ranks=others, check_topology=True).wait()
    expected = np.concatenate([values(j, (j + 1, 2), "int32") for j in others]) if others else np.zeros((0, 2))
    assert_close(z, expected, "int32")


@pytest.mark.skipif(SIZE % 2 != 0, reason="needs machines of 2 ranks")
def test_hierarchical_neighbor_allreduce_over_simulated_machines():
    with starling.Context(nodes_per_machine=2) as machines:
        m, count = machines.machine_rank, machines.machine_size
        assert (machines.local_size, count) == (2, SIZE // 2)
        machines.set_machine_topology(starling.Topology.ring(count))
        x = make("torch", RANK, SHAPE, "float64")
        means = [(values(2 * k, SHAPE, "float64") + values(2 * k + 1, SHAPE, "float64")) / 2 for k in range(count)]
        y = machines.hierarchical_neighbor_allreduce(x)
        ring = starling.Topology.ring(count)
        sources = ring.in_neighbors(m)
        expected = (means[m] + sum(means[j] for j in sources)) / (len(sources) + 1)
        assert_close(y, expected, "float64")
        if count > 1:
            nxt, prv = (m + 1) % count, (m - 1) % count
            z = machines.hierarchical_neighbor_allreduce_nonblocking(
                x, self_weight=0.75, src_machine_weights={prv: 0.25}, dst_machine_weights=[nxt]).wait()
            assert_close(z, 0.75 * means[m] + 0.25 * means[prv], "float64")


def test_fast_pairs_from_probed_links_average_exactly(ctx):
    """link_latencies gives every rank the same matrix; averaging along the fast-pair
    schedule (a link declared slow) matches a float64 simulation of every rank."""
    links = ctx.link_latencies(repetitions=2)
    assert links.shape == (SIZE, SIZE) and links.dtype == np.float64
    assert np.all(np.diag(links) == 0) and np.all(links + np.eye(SIZE) > 0)
    spread = ctx.allreduce(links, op="max") - ctx.allreduce(links, op="min")
    assert np.all(spread == 0), "ranks got different matrices"
    threshold = 2 * float(links.max()) + 1.0
    if SIZE >= 3:
        links[0, 1] = 2 * threshold  # rank 0's link to rank 1 declared slow
    schedules = [starling.topology_util.GetFastPairSendRecvRanks(links, r, threshold) for r in range(SIZE)]
    states = np.stack([values(r, SHAPE, "float64") for r in range(SIZE)])
    x = states[RANK].copy()
    for _ in range(2 * SIZE):
        steps = [next(s) for s in schedules]
        send, recv = steps[RANK]
        if SIZE >= 3:
            assert steps[0][0] != [1], "the slow link was used"
        x = ctx.neighbor_allreduce(x, self_weight=0.5 if recv else 1.0, src_weights={r: 0.5 for r in recv},
                                   dst_weights=send)
        w = np.eye(SIZE)
        for r, (s, _) in enumerate(steps):
            if s:
                w[r, r], w[r, s[0]] = 0.5, 0.5
        states = w @ states.reshape(SIZE, -1)
        states = states.reshape((SIZE,) + SHAPE)
        np.testing.assert_allclose(x, states[RANK], rtol=0, atol=1e-12)
    # Mixing keeps the mean (doubly stochastic) and moves every rank towards it.
    mean = np.mean([values(r, SHAPE, "float64") for r in range(SIZE)], axis=0)
    np.testing.assert_allclose(states.mean(axis=0), mean, atol=1e-12)


def test_adaptive_fast_pairs_remeasure_and_average_exactly(ctx):
    """The adaptive schedule measures with link_latencies (collective) before the first
    step and every 3 steps; every rank's copy of every schedule, fed the same matrices,
    gives a float64 simulation that the exchange must match."""
    latest = []

    def measure():
        latest.append(ctx.link_latencies(repetitions=2))
        return latest[-1]

    own = starling.topology_util.GetAdaptiveFastPairSendRecvRanks(measure, RANK, every=3)
    others = {r: starling.topology_util.GetAdaptiveFastPairSendRecvRanks(lambda: latest[-1], r, every=3)
              for r in range(SIZE) if r != RANK}
    states = np.stack([values(r, SHAPE, "float64") for r in range(SIZE)])
    x = states[RANK].copy()
    steps = 3 * SIZE + 1
    for _ in range(steps):
        own_step = next(own)  # first: it measures for the others too
        step = {RANK: own_step, **{r: next(s) for r, s in others.items()}}
        send, recv = step[RANK]
        x = ctx.neighbor_allreduce(x, self_weight=0.5 if recv else 1.0, src_weights={r: 0.5 for r in recv},
                                   dst_weights=send)
        w = np.eye(SIZE)
        for r, (s, _) in step.items():
            if s:
                assert step[s[0]][0] == [r], "unpaired step"
                w[r, r], w[r, s[0]] = 0.5, 0.5
        states = (w @ states.reshape(SIZE, -1)).reshape((SIZE,) + SHAPE)
        np.testing.assert_allclose(x, states[RANK], rtol=0, atol=1e-12)
    assert own.measurements == len(latest) == -(-steps // 3)
    if SIZE > 1:
        assert own.threshold_seconds == pytest.approx(8.0 * np.median(latest[-1][~np.eye(SIZE, dtype=bool)]))
    else:
        assert own.threshold_seconds == 1.0
