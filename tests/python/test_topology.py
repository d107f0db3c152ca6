"""Topologies and schedules: the C++ generators (through starling.Topology and
starling.topology_util) against independent NumPy versions of BlueFog's definitions."""

import itertools

import networkx as nx
import numpy as np
import pytest

import starling
import starling.topology_util as tu

SIZES = [1, 2, 3, 4, 5, 8, 12, 16, 24]


# ---- independent references (BlueFog's definitions, written out in NumPy) ----
def is_power(x, base):
    while x % base == 0:
        x //= base
    return x == 1


def circulant(first_row):
    x = np.asarray(first_row, dtype=np.float64)
    x = x / x.sum()
    return np.stack([np.roll(x, i) for i in range(len(x))])


def ref_exponential(size, base=2):
    return circulant([1.0] + [1.0 if is_power(i, base) else 0.0 for i in range(1, size)])


def ref_symmetric_exponential(size, base=4):
    row = [1.0]
    for i in range(1, size):
        index = i if i <= size // 2 else size - i
        row.append(1.0 if is_power(index, base) else 0.0)
    return circulant(row)


def ref_mesh(size, shape=None):
    if shape is None:
        rows = int(np.sqrt(size))
        while size % rows != 0:
            rows -= 1
        shape = (rows, size // rows)
    cols = shape[1]
    adjacency = np.eye(size)
    for i in range(size):
        if (i + 1) % cols != 0 and i + 1 < size:
            adjacency[i, i + 1] = adjacency[i + 1, i] = 1
        if i + cols < size:
            adjacency[i, i + cols] = adjacency[i + cols, i] = 1
    degree = (adjacency != 0).sum(axis=1)
    w = np.zeros((size, size))
    for i, j in zip(*np.nonzero(adjacency)):
        if i != j:
            w[i, j] = 1.0 / max(degree[i], degree[j])
    for i in range(size):
        w[i, i] = 1.0 - w[i].sum()
    return w


def ref_star(size, center=0):
    w = np.zeros((size, size))
    for i in range(size):
        w[i, i] = 1 - 1 / size
        w[center, i] = w[i, center] = 1 / size
    return w


def ref_ring(size, style=0):
    if size == 1:
        return np.ones((1, 1))
    if size == 2:
        return np.full((2, 2), 0.5)
    x = np.zeros(size)
    if style == 0:
        x[0] = x[1] = x[-1] = 1 / 3
    elif style == 1:
        x[0] = x[-1] = 0.5
    else:
        x[0] = x[1] = 0.5
    return np.stack([np.roll(x, i) for i in range(size)])


def matrix_of(graph):
    return nx.to_numpy_array(graph, nodelist=range(graph.number_of_nodes()))


GENERATORS = [
    ("exponential_two", lambda n: tu.ExponentialTwoGraph(n), lambda n: ref_exponential(n, 2)),
    ("exponential_3", lambda n: tu.ExponentialGraph(n, 3), lambda n: ref_exponential(n, 3)),
    ("exponential_default", lambda n: tu.ExponentialGraph(n), lambda n: ref_exponential(n, 2)),
    ("symmetric_exponential", lambda n: tu.SymmetricExponentialGraph(n), ref_symmetric_exponential),
    ("symmetric_exponential_2", lambda n: tu.SymmetricExponentialGraph(n, 2), lambda n: ref_symmetric_exponential(n, 2)),
    ("mesh", lambda n: tu.MeshGrid2DGraph(n), ref_mesh),
    ("star", lambda n: tu.StarGraph(n), ref_star),
    ("star_last", lambda n: tu.StarGraph(n, n - 1), lambda n: ref_star(n, n - 1)),
    ("ring", lambda n: tu.RingGraph(n), ref_ring),
    ("ring_left", lambda n: tu.RingGraph(n, 1), lambda n: ref_ring(n, 1)),
    ("ring_right", lambda n: tu.RingGraph(n, 2), lambda n: ref_ring(n, 2)),
    ("fully_connected", lambda n: tu.FullyConnectedGraph(n), lambda n: np.full((n, n), 1 / n)),
]


@pytest.mark.parametrize("name,make,reference", GENERATORS, ids=[g[0] for g in GENERATORS])
@pytest.mark.parametrize("size", SIZES)
def test_generators_match_bluefog_definitions(name, make, reference, size):
    graph = make(size)
    assert isinstance(graph, nx.DiGraph) and graph.number_of_nodes() == size
    np.testing.assert_allclose(matrix_of(graph), reference(size), rtol=0, atol=1e-15)
    # Neighbor order is ascending, as with BlueFog's from_numpy_array graphs.
    for r in range(size):
        assert list(graph.predecessors(r)) == sorted(graph.predecessors(r))


def test_mesh_with_explicit_shape_and_exact_powers():
    np.testing.assert_allclose(matrix_of(tu.MeshGrid2DGraph(12, (3, 4))), ref_mesh(12, (3, 4)), atol=1e-15)
    # BlueFog's float test dropped 243 = 3^5 for base 3; Starling tests powers exactly.
    graph = tu.ExponentialGraph(300, 3)
    assert graph.has_edge(0, 243) and tu.isPowerOf(243, 3) and not tu.isPowerOf(244, 3)


def test_topology_object_api():
    ring = starling.Topology.ring(5)
    assert ring.size == 5 and ring.num_edges == 15
    assert ring.in_neighbors(0) == [1, 4] and ring.out_neighbors(0) == [1, 4]
    assert ring.recv_weights(0) == (pytest.approx(1 / 3), {1: pytest.approx(1 / 3), 4: pytest.approx(1 / 3)})
    assert ring.is_regular() and ring == starling.Topology.from_matrix(ref_ring(5))
    assert ring != starling.Topology.ring(5, "left")
    custom = starling.Topology(3, [(0, 1), (1, 2, 0.5), (2, 0, 0.25)])
    assert custom.edges == [(0, 1, 1.0), (1, 2, 0.5), (2, 0, 0.25)]
    assert custom.send_weights(1) == (0.0, {2: 0.5})
    assert not starling.Topology(3, [(0, 1)]).is_regular()
    np.testing.assert_array_equal(custom.to_matrix(), [[0, 1, 0], [0, 0, 0.5], [0.25, 0, 0]])
    assert matrix_of(custom.to_networkx()).tolist() == custom.to_matrix().tolist()


def test_checks_and_weights():
    star = tu.StarGraph(4)
    assert not tu.IsRegularGraph(star) and tu.IsRegularGraph(tu.RingGraph(6))
    assert tu.IsTopologyEquivalent(star, tu.StarGraph(4))
    assert not tu.IsTopologyEquivalent(star, tu.StarGraph(4, 1))
    assert not tu.IsTopologyEquivalent(star, None)
    w = ref_star(4)
    for rank in range(4):
        self_weight, recv = tu.GetRecvWeights(star, rank)
        assert self_weight == pytest.approx(w[rank, rank])
        assert recv == {j: pytest.approx(w[j, rank]) for j in range(4) if j != rank and w[j, rank] != 0}
        self_weight, send = tu.GetSendWeights(star, rank)
        assert send == {j: pytest.approx(w[rank, j]) for j in range(4) if j != rank and w[rank, j] != 0}
    no_self = nx.DiGraph([(0, 1), (1, 0)])
    assert tu.GetRecvWeights(no_self, 0) == (0.0, {1: 1.0})


def test_invalid_generator_arguments_raise_assertion_compatible_errors():
    for bad in (lambda: tu.ExponentialTwoGraph(0), lambda: tu.RingGraph(4, 3), lambda: tu.StarGraph(3, 5),
                lambda: tu.MeshGrid2DGraph(6, (4, 2))):
        with pytest.raises(tu.TopologyError) as info:
            bad()
        assert isinstance(info.value, AssertionError) and isinstance(info.value, ValueError) and str(info.value)


# ---- dynamic schedules ----
def ref_one_peer(graph, rank, steps):
    size = graph.number_of_nodes()
    order = {}
    for r in range(size):
        ranks = sorted(graph.successors(r), key=lambda s: (s - r) % size)
        order[r] = [s for s in ranks if s != r]
    for index in range(steps):
        send = order[rank][index % len(order[rank])]
        recv = [o for o in range(size) if o != rank and order[o][index % len(order[o])] == rank]
        yield [send], recv


def ref_exp2_machine(world, local, rank, steps):
    machine, machines = rank // local, world // local
    exp_2_size = int(np.log2(machines - 1)) if machines > 1 else 0
    for index in range(steps):
        d = 2 ** (index % (exp_2_size + 1))
        yield [(machine + d) % machines], [(machine - d) % machines]


def ref_inner_outer_ring(world, local, rank, steps):
    machines, m, l = world // local, rank // local, rank % local
    for index in range(steps):
        out = index % local
        if l == out:
            yield [((m + 1) % machines) * local + l], [((m - 1) % machines) * local + l]
            continue
        t = (l + 1) % local
        if t == out:
            t = (t + 1) % local
        s = (l - 1) % local
        if s == out:
            s = (s - 1) % local
        yield [m * local + t], [m * local + s]


def ref_inner_outer_expo2(world, local, rank, steps):
    machines, m, l = world // local, rank // local, rank % local
    exp_out = int(np.log2(machines - 1)) if machines > 1 else 0
    exp_in = int(np.log2(local - 2)) if local > 2 else 0
    for index in range(steps):
        out = index % local
        if l == out:
            d = 2 ** (index % (exp_out + 1))
            yield [((m + d) % machines) * local + l], [((m - d) % machines) * local + l]
            continue
        nd = 2 ** (index % (exp_in + 1))
        if nd >= (out - l) % local:
            nd += 1
        rd = 2 ** (index % (exp_in + 1))
        if rd >= (l - out) % local:
            rd += 1
        yield [m * local + (l + nd) % local], [m * local + (l - rd) % local]


def take(iterator, steps):
    return list(itertools.islice(iterator, steps))


@pytest.mark.parametrize("size", [2, 3, 4, 5, 8, 12])
@pytest.mark.parametrize("make", [tu.ExponentialTwoGraph, tu.SymmetricExponentialGraph, tu.RingGraph,
                                  tu.MeshGrid2DGraph, tu.FullyConnectedGraph])
def test_dynamic_one_peer(size, make):
    graph = make(size)
    for rank in range(size):
        assert take(tu.GetDynamicOnePeerSendRecvRanks(graph, rank), 9) == list(ref_one_peer(graph, rank, 9))


@pytest.mark.parametrize("world,local", [(4, 2), (8, 2), (12, 3), (16, 4), (6, 1)])
def test_machine_schedules(world, local):
    for rank in range(world):
        assert take(tu.GetExp2DynamicSendRecvMachineRanks(world, local, rank, rank % local), 7) == \
            list(ref_exp2_machine(world, local, rank, 7))
        if local > 2:
            assert take(tu.GetInnerOuterRingDynamicSendRecvRanks(world, local, rank), 7) == \
                list(ref_inner_outer_ring(world, local, rank, 7))
            assert take(tu.GetInnerOuterExpo2DynamicSendRecvRanks(world, local, rank), 7) == \
                list(ref_inner_outer_expo2(world, local, rank, 7))


def test_one_peer_needs_self_loops():
    with pytest.raises(tu.TopologyError):
        tu.GetDynamicOnePeerSendRecvRanks(nx.DiGraph([(0, 1), (1, 0)]), 0)


def fast_pair_steps(links, threshold, steps):
    """peer[step][rank] (-1: none) from every rank's fast-pair schedule."""
    n = len(links)
    peer = np.full((steps, n), -1)
    for rank in range(n):
        for t, (send, recv) in enumerate(take(tu.GetFastPairSendRecvRanks(links, rank, threshold), steps)):
            assert send == recv and len(send) <= 1
            if send:
                peer[t, rank] = send[0]
    return peer


@pytest.mark.parametrize("size", [2, 3, 4, 5, 8])
def test_fast_pairs_mix_doubly_stochastically_over_fast_links_only(size):
    rng = np.random.default_rng(size)
    links = rng.uniform(1e-6, 1e-4, (size, size))
    slow = {(0, 1)} if size > 3 else set()  # slow one way only: the pair must not meet
    for i, j in slow:
        links[i, j] = 0.1
    fast = {(i, j) for i in range(size) for j in range(i + 1, size) if (i, j) not in slow}
    period = size - 1 if size % 2 == 0 else size
    peer = fast_pair_steps(links, 1e-3, 2 * period)
    met = []
    for t, row in enumerate(peer):
        w = np.eye(size)
        for r, p in enumerate(row):
            if p >= 0:
                assert row[p] == r and (min(r, p), max(r, p)) in fast
                w[r, r], w[r, p] = 0.5, 0.5
                if r < p and t < period:
                    met.append((r, p))
        np.testing.assert_array_equal(w.sum(axis=0), np.ones(size))
        np.testing.assert_array_equal(w.sum(axis=1), np.ones(size))
    assert sorted(met) == sorted(fast)  # every fast pair once per period
    np.testing.assert_array_equal(peer[:period], peer[period:])


def test_fast_pairs_bad_input():
    links = np.full((4, 4), 1e-5)
    with pytest.raises(tu.TopologyError, match="threshold_seconds is -1; give a positive number"):
        tu.GetFastPairSendRecvRanks(links, 0, -1.0)
    with pytest.raises(tu.TopologyError, match="must be a square matrix"):
        tu.GetFastPairSendRecvRanks(np.ones((2, 3)), 0, 1.0)
    with pytest.raises(TypeError, match="square matrix of numbers"):
        tu.GetFastPairSendRecvRanks([["a", "b"], ["c", "d"]], 0, 1.0)
    with pytest.raises(TypeError, match="threshold_seconds must be a number"):
        tu.GetFastPairSendRecvRanks(links, 0, "1")
    with pytest.raises(tu.TopologyError, match="rank 4 is out of range"):
        tu.GetFastPairSendRecvRanks(links, 4, 1.0)
    bad = links.copy()
    bad[2, 3] = np.nan
    with pytest.raises(tu.TopologyError, match=r"link_seconds\[2\]\[3\] is nan"):
        tu.GetFastPairSendRecvRanks(bad, 0, 1.0)
    split = np.ones((4, 4))
    split[0, 1] = split[1, 0] = split[2, 3] = split[3, 2] = 1e-5
    with pytest.raises(tu.TopologyError, match=r"2 groups that would never mix: \{0, 1\} \{2, 3\}"):
        tu.GetFastPairSendRecvRanks(split, 0, 1e-3)


class ScriptedLinks:
    """measure() for AdaptiveFastPairs: returns the given matrices in turn."""

    def __init__(self, *matrices):
        self.matrices, self.calls = list(matrices), 0

    def __call__(self):
        self.calls += 1
        return self.matrices[min(self.calls, len(self.matrices)) - 1]


def adaptive_peers(matrices, steps, every, factor=8.0):
    """peer[step][rank] from every rank's adaptive schedule, and rank 0's schedule."""
    n = len(matrices[0])
    peer = np.full((steps, n), -1)
    schedules = [tu.GetAdaptiveFastPairSendRecvRanks(ScriptedLinks(*matrices), r, factor=factor, every=every)
                 for r in range(n)]
    for t in range(steps):
        for rank, schedule in enumerate(schedules):
            send, recv = next(schedule)
            assert send == recv and len(send) <= 1
            if send:
                peer[t, rank] = send[0]
    return peer, schedules[0]


def met_pairs(peer):
    return {(r, int(p)) for row in peer for r, p in enumerate(row) if p > r}


def test_adaptive_fast_pairs_follow_each_measurement():
    """5 ranks; the first measurement has 0 <-> 1 slow, the second 2 <-> 3 (and 3 -> 1
    only one way), the third every link of rank 4: left out, they would split the job,
    so every link is used until the next measurement."""
    first, second, split = (np.full((5, 5), 1e-4) for _ in range(3))
    first[0, 1] = first[1, 0] = 0.1
    second[2, 3] = second[3, 2] = second[3, 1] = 0.1
    split[4, :] = split[:, 4] = 0.1
    for m in (first, second, split):
        np.fill_diagonal(m, 0.0)
    every = 10  # two periods of the 5-rank round robin
    peer, schedule = adaptive_peers([first, second, split], 3 * every, every)
    everything = {(i, j) for i in range(5) for j in range(i + 1, 5)}
    assert met_pairs(peer[:every]) == everything - {(0, 1)}
    assert met_pairs(peer[every:2 * every]) == everything - {(2, 3), (1, 3)}
    assert met_pairs(peer[2 * every:]) == everything
    assert schedule.measurements == 3 and schedule.split
    np.testing.assert_array_equal(schedule.links, split)
    assert schedule.threshold_seconds == pytest.approx(8.0 * 1e-4)
    for row in peer:  # each step pairs ranks symmetrically
        for r, p in enumerate(row):
            assert p < 0 or row[p] == r


def test_adaptive_fast_pairs_threshold_is_factor_times_the_median_link():
    links = np.full((4, 4), 1e-3)
    links[0, 1] = links[1, 0] = 3.5e-3
    np.fill_diagonal(links, 0.0)
    peer, schedule = adaptive_peers([links], 6, 100, factor=4.0)  # 3.5 ms < 4 ms: kept
    assert (0, 1) in met_pairs(peer) and schedule.threshold_seconds == pytest.approx(4e-3)
    peer, schedule = adaptive_peers([links], 6, 100, factor=3.0)  # 3.5 ms > 3 ms: left out
    assert (0, 1) not in met_pairs(peer) and not schedule.split and schedule.measurements == 1


def test_adaptive_fast_pairs_bad_input():
    links = np.full((2, 2), 1e-4)
    with pytest.raises(TypeError, match="measure must be callable"):
        tu.GetAdaptiveFastPairSendRecvRanks(links, 0)
    with pytest.raises(tu.TopologyError, match="factor is 1.0; give a number above 1"):
        tu.GetAdaptiveFastPairSendRecvRanks(lambda: links, 0, factor=1.0)
    with pytest.raises(tu.TopologyError, match="factor is nan"):
        tu.GetAdaptiveFastPairSendRecvRanks(lambda: links, 0, factor=float("nan"))
    with pytest.raises(TypeError, match="factor must be a number"):
        tu.GetAdaptiveFastPairSendRecvRanks(lambda: links, 0, factor="8")
    with pytest.raises(tu.TopologyError, match="every is 0; give at least 1"):
        tu.GetAdaptiveFastPairSendRecvRanks(lambda: links, 0, every=0)
    with pytest.raises(TypeError, match="every must be an int"):
        tu.GetAdaptiveFastPairSendRecvRanks(lambda: links, 0, every=1.5)
    with pytest.raises(tu.TopologyError, match=r"shape \(2, 3\); it must be square"):
        next(tu.GetAdaptiveFastPairSendRecvRanks(lambda: np.ones((2, 3)), 0))
    with pytest.raises(TypeError, match="square matrix of numbers"):
        next(tu.GetAdaptiveFastPairSendRecvRanks(lambda: [["a", "b"], ["c", "d"]], 0))
    with pytest.raises(tu.TopologyError, match="link times must be positive"):
        next(tu.GetAdaptiveFastPairSendRecvRanks(lambda: np.zeros((2, 2)), 0))
    with pytest.raises(tu.TopologyError, match="rank 2 is out of range"):
        next(tu.GetAdaptiveFastPairSendRecvRanks(lambda: links, 2))
    bad = np.full((3, 3), 1e-4)
    bad[1, 2] = -1.0
    with pytest.raises(tu.TopologyError, match=r"link_seconds\[1\]\[2\] is -1"):
        next(tu.GetAdaptiveFastPairSendRecvRanks(lambda: bad, 0))
