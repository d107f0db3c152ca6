"""starling.torch as bluefog.torch: every operation, its nonblocking and in-place
forms, the handle functions and the topology functions, with BlueFog's semantics."""


import networkx as nx
import numpy as np
import pytest
import torch

import starling.torch as bf
from conftest import DTYPES, RANK, SIZE, assert_close, make, values
from test_core_neighbor import exp2_in_neighbors, rounded

SHAPE = (5, 2)


@pytest.fixture(autouse=True)
def default_topology():
    yield
    bf.set_topology(bf.ExponentialGraph(SIZE))  # what bf.init() sets; collective


def test_layout():
    assert (bf.rank(), bf.size()) == (RANK, SIZE)
    assert bf.local_size() == SIZE and bf.local_rank() == RANK  # one host
    assert bf.machine_size() == 1 and bf.machine_rank() == 0 and bf.is_homogeneous()
    assert bf.mpi_threads_supported() == 1 and bf.unified_mpi_window_model_supported() is True
    assert bf.nccl_built() is False


def test_init_again_is_local_and_keeps_the_topology():
    # Horovod-style programs call init() again and again, not as often on every rank:
    # after the first, init() is local (before, each call set the topology, a
    # collective, so ranks fell out of step and the next collective mismatched).
    bf.set_topology(bf.RingGraph(SIZE))
    for _ in range(RANK + 1):
        bf.init()
        assert bf.is_initialized()
    assert bf.in_neighbor_ranks() == sorted({(RANK - 1) % SIZE, (RANK + 1) % SIZE} - {RANK})
    total = bf.allreduce(torch.full((3,), float(RANK + 1)), average=False)
    assert torch.equal(total, torch.full((3,), SIZE * (SIZE + 1) / 2))
    bf.init(lambda n: bf.RingGraph(n))  # with a topology: sets it again (collective, as BlueFog)
    assert bf.in_neighbor_ranks() == sorted({(RANK - 1) % SIZE, (RANK + 1) % SIZE} - {RANK})


def test_public_names_of_bluefog_torch_are_all_here():
    names = """init shutdown size local_size rank local_rank machine_size machine_rank load_topology set_topology
    load_machine_topology set_machine_topology in_neighbor_ranks out_neighbor_ranks in_neighbor_machine_ranks
    out_neighbor_machine_ranks mpi_threads_supported unified_mpi_window_model_supported nccl_built is_homogeneous
    suspend resume allreduce allreduce_nonblocking allreduce_ allreduce_nonblocking_ allgather allgather_nonblocking
    broadcast broadcast_nonblocking broadcast_ broadcast_nonblocking_ neighbor_allgather
    neighbor_allgather_nonblocking neighbor_allreduce neighbor_allreduce_nonblocking hierarchical_neighbor_allreduce
    hierarchical_neighbor_allreduce_nonblocking poll synchronize wait barrier win_create win_free win_update
    win_update_then_collect neighbor_win_put_nonblocking neighbor_win_put neighbor_win_get_nonblocking
    neighbor_win_get neighbor_win_accumulate_nonblocking neighbor_win_accumulate win_put_nonblocking win_put
    win_get_nonblocking win_get win_accumulate_nonblocking win_accumulate win_wait win_poll win_mutex
    get_win_version get_current_created_window_names win_associated_p turn_on_win_ops_with_associated_p
    turn_off_win_ops_with_associated_p set_skip_negotiate_stage get_skip_negotiate_stage timeline_start_activity
    timeline_end_activity timeline_context CommunicationType DistributedAdaptThenCombineOptimizer
    DistributedAdaptWithCombineOptimizer DistributedGradientAllreduceOptimizer DistributedWinPutOptimizer
    DistributedAllreduceOptimizer DistributedNeighborAllreduceOptimizer
    DistributedHierarchicalNeighborAllreduceOptimizer broadcast_optimizer_state broadcast_parameters
    allreduce_parameters GetRecvWeights GetSendWeights IsRegularGraph IsTopologyEquivalent ExponentialTwoGraph
    ExponentialGraph FullyConnectedGraph MeshGrid2DGraph RingGraph StarGraph SymmetricExponentialGraph
    GetDynamicOnePeerSendRecvRanks GetExp2DynamicSendRecvMachineRanks GetInnerOuterRingDynamicSendRecvRanks
    GetInnerOuterExpo2DynamicSendRecvRanks InferSourceFromDestinationRanks InferDestinationFromSourceRanks
    pair_gossip pair_gossip_nonblocking win_lock is_topo_weighted is_machine_topo_weighted
    DistributedPushSumOptimizer""".split()
    missing = [n for n in names if not hasattr(bf, n)]
    assert not missing and set(names) <= set(bf.__all__)
    for module in ("mpi_ops", "optimizers", "utility", "topology_util"):
        assert hasattr(bf, module)
    assert bf.mpi_ops.win_lock is bf.win_lock and bf.mpi_ops.is_topo_weighted is bf.is_topo_weighted


def allreduce_reference(dtype, average):
    stack = np.stack([values(r, SHAPE, dtype) for r in range(SIZE)])
    return stack.mean(axis=0) if average else stack.sum(axis=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_forms(dtype):
    floating = dtype in ("float16", "bfloat16", "float32", "float64")
    x = make("torch", RANK, SHAPE, dtype)
    y = bf.allreduce(x, average=floating, name=f"ar.{dtype}")
    assert y.dtype == x.dtype and y is not x
    assert_close(y, allreduce_reference(dtype, floating), dtype)
    assert_close(x, values(RANK, SHAPE, dtype), dtype)
    h = bf.allreduce_nonblocking(x, average=False)
    assert isinstance(h, int)
    assert_close(bf.synchronize(h), allreduce_reference(dtype, False), dtype)
    assert bf.allreduce_(x, average=False) is x
    assert_close(x, allreduce_reference(dtype, False), dtype)
    x = make("torch", RANK, SHAPE, dtype)
    h = bf.allreduce_nonblocking_(x, average=False)
    assert bf.wait(h) is x
    assert_close(x, allreduce_reference(dtype, False), dtype)


def test_allreduce_average_needs_floating_point():
    with pytest.raises(AssertionError, match="only float or double"):
        bf.allreduce(torch.ones(3, dtype=torch.int32))


def test_allreduce_hierarchical_local():
    x = make("torch", RANK, SHAPE, "float64")
    assert_close(bf.allreduce(x, is_hierarchical_local=True), allreduce_reference("float64", True), "float64")


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int64", "float16", "float64"])
def test_broadcast_forms(dtype):
    root = SIZE - 1
    x = make("torch", RANK, SHAPE, dtype)
    assert_close(bf.broadcast(x, root), values(root, SHAPE, dtype), dtype)
    assert_close(bf.synchronize(bf.broadcast_nonblocking(x, 0)), values(0, SHAPE, dtype), dtype)
    assert bf.broadcast_(x, root) is x
    assert_close(x, values(root, SHAPE, dtype), dtype)
    x = make("torch", RANK, SHAPE, dtype)
    assert bf.synchronize(bf.broadcast_nonblocking_(x, 0)) is x
    assert_close(x, values(0, SHAPE, dtype), dtype)


def test_allgather_variable_first_dimension():
    x = make("torch", RANK, (RANK + 1, 3), "float32")
    expected = np.concatenate([values(r, (r + 1, 3), "float32") for r in range(SIZE)])
    assert_close(bf.allgather(x), expected, "float32")
    assert_close(bf.synchronize(bf.allgather_nonblocking(x)), expected, "float32")


def test_poll_synchronize_and_handle_errors():
    h = bf.allreduce_nonblocking(torch.ones(1000))
    while not bf.poll(h):
        pass
    assert torch.all(bf.synchronize(h) == 1)
    with pytest.raises(ValueError, match="was not created or has been cleared"):
        bf.poll(h)
    with pytest.raises(ValueError, match="synchronize"):
        bf.synchronize(h)
    bf.barrier()


def test_neighbor_allgather_static_order_and_dynamic():
    x = make("torch", RANK, (2, 2), "float64")
    sources = exp2_in_neighbors(RANK, SIZE)
    assert bf.in_neighbor_ranks() == sources
    expected = np.concatenate([values(j, (2, 2), "float64") for j in sources]) if sources else np.zeros((0, 2))
    assert_close(bf.neighbor_allgather(x), expected, "float64")
    # Dynamic: a random permutation of every other rank, as numpy arrays (BlueFog's test).
    rng = np.random.RandomState(7)
    others = rng.permutation([r for r in range(SIZE) if r != RANK])
    h = bf.neighbor_allgather_nonblocking(x, src_ranks=others, dst_ranks=np.array(sorted(others)))
    expected = np.concatenate([values(j, (2, 2), "float64") for j in others]) if len(others) else np.zeros((0, 2))
    assert_close(bf.synchronize(h), expected, "float64")
    with pytest.raises(ValueError, match="have to be presented at the same time"):
        bf.neighbor_allgather(x, src_ranks=[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_neighbor_allreduce_static_uniform(dtype):
    x = make("torch", RANK, SHAPE, dtype)
    sources = exp2_in_neighbors(RANK, SIZE)
    expected = (values(RANK, SHAPE, dtype) + sum(values(j, SHAPE, dtype) for j in sources)) / (len(sources) + 1)
    assert_close(bf.neighbor_allreduce(x, name=f"nar.{dtype}"), rounded(expected, dtype), dtype)


def test_zero_dimensional_tensors():
    # BlueFog's neighbor_allreduce raised IndexError on these.
    x = torch.tensor(float(RANK), dtype=torch.float64)
    sources = exp2_in_neighbors(RANK, SIZE)
    y = bf.neighbor_allreduce(x)
    assert y.shape == () and y.item() == pytest.approx((RANK + sum(sources)) / (len(sources) + 1))
    assert bf.allreduce(x).item() == pytest.approx((SIZE - 1) / 2)
    assert bf.broadcast(x, 0).item() == 0


def test_neighbor_allreduce_precision_is_bit_exact():
    # BlueFog's precision tests: 2**-256 everywhere must average to exactly 2**-256.
    x = torch.full((10,), 2.0 ** -256, dtype=torch.float64)
    k = len(bf.in_neighbor_ranks())
    assert torch.equal(bf.neighbor_allreduce(x), x)
    uniform = {j: 1.0 / (k + 1) for j in bf.in_neighbor_ranks()}
    assert torch.equal(bf.neighbor_allreduce(x, self_weight=1.0 / (k + 1), src_weights=uniform), x)


def test_neighbor_allreduce_weighted_topology_star():
    assert bf.set_topology(bf.StarGraph(SIZE), is_weighted=True) and bf.is_topo_weighted()
    x = torch.full((3,), float(RANK), dtype=torch.float64)
    y = bf.neighbor_allreduce(x)
    # Center: (1/size) * sum of all; leaf: (1 - 1/size) x_i + x_0 / size.
    expected = sum(range(SIZE)) / SIZE if RANK == 0 else (1 - 1 / SIZE) * RANK
    assert torch.allclose(y, torch.full((3,), expected, dtype=torch.float64))
    assert bf.set_topology(bf.StarGraph(SIZE)) and not bf.is_topo_weighted()
    expected = sum(range(SIZE)) / SIZE if RANK == 0 else RANK / 2
    assert torch.allclose(bf.neighbor_allreduce(x), torch.full((3,), expected, dtype=torch.float64))


@pytest.mark.parametrize("style", [1, 2])
def test_neighbor_allreduce_ring_styles(style):
    assert bf.set_topology(bf.RingGraph(SIZE, style))
    x = torch.full((2,), float(RANK), dtype=torch.float64)
    if SIZE <= 2:
        expected = sum(range(SIZE)) / SIZE
    else:
        expected = (RANK + ((RANK + 1) % SIZE if style == 1 else (RANK - 1) % SIZE)) / 2
    assert torch.allclose(bf.neighbor_allreduce(x), torch.full((2,), expected, dtype=torch.float64))


def test_neighbor_allreduce_explicit_subset_of_in_neighbors():
    sources = bf.in_neighbor_ranks()
    x = make("torch", RANK, SHAPE, "float64")
    chosen = {j: 0.25 for j in sources[-1:]}  # BlueFog matched these by position; Starling by rank
    y = bf.neighbor_allreduce(x, self_weight=0.75, src_weights=chosen)
    expected = 0.75 * values(RANK, SHAPE, "float64") + sum(0.25 * values(j, SHAPE, "float64") for j in chosen)
    assert_close(y, expected, "float64")


def test_neighbor_allreduce_dynamic_list_and_dict():
    nxt, prv = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    x = make("torch", RANK, SHAPE, "float32")
    if SIZE == 1:
        y = bf.neighbor_allreduce(x, self_weight=0.5, src_weights={}, dst_weights=[])
        assert_close(y, 0.5 * values(RANK, SHAPE, "float32"), "float32")
        assert_close(x, values(RANK, SHAPE, "float32"), "float32")  # BlueFog aliased and scaled the input here
        return
    y = bf.neighbor_allreduce(x, self_weight=0.5, src_weights={prv: 0.5}, dst_weights=[nxt])
    assert_close(y, 0.5 * values(RANK, SHAPE, "float32") + 0.5 * values(prv, SHAPE, "float32"), "float32")
    h = bf.neighbor_allreduce_nonblocking(x, self_weight=0.5, src_weights={prv: 1.0}, dst_weights={nxt: 0.5},
                                          enable_topo_check=True)
    assert_close(bf.synchronize(h), 0.5 * values(RANK, SHAPE, "float32") + 0.5 * values(prv, SHAPE, "float32"),
                 "float32")


@pytest.mark.skipif(SIZE < 4, reason="needs ranks outside the exponential-2 neighborhood")
def test_neighbor_allreduce_dynamic_outside_static_topology():
    # Pairs (r, r xor 3): not neighbors in the static graph for size 4.
    peer = RANK ^ 3
    x = torch.full((2,), float(RANK), dtype=torch.float64)
    y = bf.neighbor_allreduce(x, self_weight=0.5, src_weights={peer: 0.5}, dst_weights=[peer])
    assert torch.allclose(y, torch.full((2,), (RANK + peer) / 2, dtype=torch.float64))


def test_neighbor_allreduce_argument_errors():
    x = torch.ones(3)
    k = bf.in_neighbor_ranks()
    with pytest.raises(ValueError, match="have to be presented at the same time"):
        bf.neighbor_allreduce(x, self_weight=0.5)
    with pytest.raises(ValueError, match="has to be a dictionary"):
        bf.neighbor_allreduce(x, self_weight=0.5, src_weights=[0.5])
    with pytest.raises(ValueError, match="has to be a float"):
        bf.neighbor_allreduce(x, self_weight=1, src_weights={})
    with pytest.raises(ValueError, match="in-neighbors"):
        bf.neighbor_allreduce(x, self_weight=0.5, src_weights={RANK: 0.5})
    with pytest.raises(ValueError, match="should be presented if enabling dynamic topology"):
        bf.neighbor_allreduce(x, dst_weights=k)
    with pytest.raises(ValueError, match="unique ranks"):
        bf.neighbor_allreduce(x, self_weight=0.5, src_weights={}, dst_weights=[0, 0])
    for old, new in (("neighbor_weights", "src_weights"), ("send_neighbors", "dst_weights")):
        with pytest.raises(TypeError, match=f"{old} is deprecated in neighbor_allreduce: Use {new} instead"):
            bf.neighbor_allreduce(x, **{old: {}})
    with pytest.raises(TypeError, match="send_neighbor_machines is deprecated"):
        bf.hierarchical_neighbor_allreduce(x, send_neighbor_machines=[])


def test_hierarchical_needs_several_ranks_per_machine_or_a_machine_topology():
    x = torch.ones(3)
    if SIZE == 1:
        with pytest.raises(AssertionError, match="local size is 1"):
            bf.hierarchical_neighbor_allreduce(x)
        return
    if bf.load_machine_topology() is None:  # other tests may have set one already
        with pytest.raises(RuntimeError, match="Machine topology must be set"):
            bf.hierarchical_neighbor_allreduce(x)
    with pytest.raises(ValueError, match="presented at the same time"):
        bf.hierarchical_neighbor_allreduce(x, self_weight=0.5)
    # One machine holding every rank: the result is the global mean.
    assert bf.set_machine_topology(bf.FullyConnectedGraph(1))
    assert bf.load_machine_topology().number_of_nodes() == 1 and bf.in_neighbor_machine_ranks() == []
    y = bf.hierarchical_neighbor_allreduce(torch.full((3,), float(RANK), dtype=torch.float64))
    assert torch.allclose(y, torch.full((3,), (SIZE - 1) / 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="shall not be None"):
        bf.set_machine_topology(None)
    with pytest.raises(TypeError):
        bf.set_machine_topology(bf.RingGraph(2))


@pytest.mark.skipif(SIZE < 2, reason="needs a peer")
def test_pair_gossip():
    peer = RANK ^ 1
    if peer >= SIZE:
        return
    x = torch.full((4,), float(RANK), dtype=torch.float64)
    assert torch.allclose(bf.pair_gossip(x, peer), torch.full((4,), (RANK + peer) / 2, dtype=torch.float64))
    h = bf.pair_gossip_nonblocking(x, peer, self_weight=0.25, pair_weight=0.75)
    assert torch.allclose(bf.synchronize(h), torch.full((4,), 0.25 * RANK + 0.75 * peer, dtype=torch.float64))
    with pytest.raises(ValueError, match="same time"):
        bf.pair_gossip(x, peer, self_weight=0.5)


def test_set_topology_semantics():
    assert bf.set_topology() and bf.IsTopologyEquivalent(bf.load_topology(), bf.ExponentialGraph(SIZE))
    ring = bf.RingGraph(SIZE)
    assert bf.set_topology(ring) and bf.load_topology() is ring
    expected_in = sorted(set((RANK + d) % SIZE for d in (-1, 1)) - {RANK})
    assert bf.in_neighbor_ranks() == expected_in and bf.out_neighbor_ranks() == expected_in
    with pytest.raises(TypeError, match="networkx.DiGraph"):
        bf.set_topology(nx.Graph())
    with pytest.raises(TypeError, match="nodes"):
        bf.set_topology(bf.RingGraph(SIZE + 1))
    bf.init(lambda n: bf.FullyConnectedGraph(n), is_weighted=True)  # init again: only sets the topology
    assert bf.is_topo_weighted() and len(bf.in_neighbor_ranks()) == SIZE - 1


def test_infer_source_and_destination_ranks():
    dst = [(RANK + 1) % SIZE] if SIZE > 1 else []
    src, w = bf.InferSourceFromDestinationRanks(dst, construct_adjacency_matrix=True)
    assert src == ([(RANK - 1) % SIZE] if SIZE > 1 else [])
    np.testing.assert_allclose(w.sum(axis=0), np.ones(SIZE))  # each receiver's weights sum to 1
    assert w[RANK, dst[0]] > 0 if dst else w[0, 0] == 1
    assert bf.InferDestinationFromSourceRanks(src) == dst
    with pytest.raises(AssertionError, match="The format of dst_ranks is wrong"):
        bf.InferSourceFromDestinationRanks([RANK])


def test_suspend_and_resume():
    bf.suspend()
    try:
        with pytest.raises(ValueError, match="suspended"):
            bf.allreduce(torch.ones(2))
        assert bf.size() == SIZE  # queries still work
    finally:
        bf.resume()
    assert torch.all(bf.allreduce(torch.ones(2)) == 1)


def test_skip_negotiate_stage_flag():
    assert bf.get_skip_negotiate_stage() is False
    bf.set_skip_negotiate_stage(True)
    assert bf.get_skip_negotiate_stage() is True
    bf.set_skip_negotiate_stage(False)


def test_timeline_is_off_without_the_environment_variable():
    assert bf.timeline_start_activity("t", "A") is False and bf.timeline_end_activity("t") is False
    with bf.timeline_context("t", "A"):
        pass
