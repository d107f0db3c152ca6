"""starling.torch window functions with BlueFog's semantics (win_create ... win_free)."""

import numpy as np
import pytest
import torch

import starling.torch as bf
from conftest import RANK, SIZE, values
from test_core_neighbor import exp2_in_neighbors
from test_core_windows import exp2_out_neighbors

SHAPE = (4,)


def tensor(rank, salt=0):
    return torch.from_numpy(values(rank, SHAPE, "float64", salt))


@pytest.fixture
def window():
    x = tensor(RANK)
    assert bf.win_create(x, "w") and not bf.win_create(x, "w")  # a taken name gives False
    yield x
    bf.barrier()
    assert bf.win_free("w")


def test_put_update_versions(window):
    sources = exp2_in_neighbors(RANK, SIZE)
    assert bf.get_current_created_window_names() == ["w"]
    assert bf.get_win_version("w") == {j: 0 for j in sources}
    bf.barrier()
    assert bf.win_put(window, "w") is True
    bf.barrier()
    assert bf.get_win_version("w") == {j: 1 for j in sources}
    y = bf.win_update("w")
    expected = (values(RANK, SHAPE, "float64") + sum(values(j, SHAPE, "float64") for j in sources)) / (len(sources) + 1)
    assert y is window and np.allclose(y.numpy(), expected)
    assert bf.get_win_version("w") == {j: 0 for j in sources}


def test_update_with_weights_clone_and_reset(window):
    sources = exp2_in_neighbors(RANK, SIZE)
    bf.barrier()
    h = bf.win_put_nonblocking(window, "w", dst_weights={r: 0.5 for r in exp2_out_neighbors(RANK, SIZE)})
    assert isinstance(h, int) and bf.win_wait(h) is True
    bf.barrier()
    before = window.clone()
    y = bf.win_update("w", self_weight=0.5, neighbor_weights={j: 1.0 for j in sources}, clone=True)
    expected = 0.5 * values(RANK, SHAPE, "float64") + sum(0.5 * values(j, SHAPE, "float64") for j in sources)
    assert y is not window and np.allclose(y.numpy(), expected) and torch.equal(window, before)
    z = bf.win_update("w", self_weight=1.0, neighbor_weights={j: 0.0 for j in sources}, reset=True)
    assert torch.equal(z, before)
    assert torch.equal(bf.win_update_then_collect("w"), before)  # the reset zeroed every buffer used


def test_get_and_default_weighted_update():
    x = tensor(RANK, salt=5)
    assert bf.set_topology(bf.RingGraph(SIZE), is_weighted=True)
    try:
        assert bf.win_create(x, "g", zero_init=True)
        bf.barrier()
        h = bf.win_get_nonblocking("g")
        while not bf.win_poll(h):
            pass
        assert bf.win_wait(h) and bf.win_wait(h) is False  # a second wait: unknown handle
        bf.barrier()
        y = bf.win_update("g")  # weighted topology: its weights
        w = bf.RingGraph(SIZE)
        expected = sum(w[j][RANK]["weight"] * values(j, SHAPE, "float64", 5) for j in w.predecessors(RANK))
        assert np.allclose(y.numpy(), expected)
        bf.barrier()
        assert bf.win_free("g")
        assert bf.win_create(x, "g") and bf.win_free() and bf.get_current_created_window_names() == []
    finally:
        bf.set_topology(bf.ExponentialGraph(SIZE))


def test_topology_cannot_change_while_windows_exist(window):
    assert bf.set_topology(bf.RingGraph(SIZE)) is False
    assert bf.IsTopologyEquivalent(bf.load_topology(), bf.ExponentialGraph(SIZE))


def test_accumulate_with_associated_p():
    x = torch.ones(3, dtype=torch.float64)
    bf.turn_on_win_ops_with_associated_p()
    try:
        assert bf.win_create(x, "p", zero_init=True)
        out = bf.out_neighbor_ranks()
        share = 1.0 / (len(out) + 1)
        assert bf.win_accumulate(x, "p", self_weight=share, dst_weights={r: share for r in out})
        assert bf.win_associated_p("p") == pytest.approx(share)
        bf.barrier()
        bf.win_update_then_collect("p")
        # Push-sum: p and every entry of x hold the same mass.
        assert torch.allclose(x, torch.full((3,), bf.win_associated_p("p"), dtype=torch.float64))
        bf.barrier()
        bf.win_free("p")
    finally:
        bf.turn_off_win_ops_with_associated_p()


def test_mutex_and_lock(window):
    with bf.win_mutex("w"):
        pass
    with bf.win_mutex("w", for_self=True):
        pass
    with bf.win_lock("w"):
        pass
    bf.barrier()
    assert bf.win_put(window, "w", require_mutex=True)
    assert bf.win_get("w", require_mutex=True)


def test_window_errors(window):
    with pytest.raises(KeyError):
        bf.win_free("nope")
    with pytest.raises(KeyError):
        bf.win_update("nope")
    with pytest.raises(ValueError):
        bf.get_win_version("nope")
    with pytest.raises(ValueError):
        bf.win_put(window, "nope")  # BlueFog aborted the process here
    with pytest.raises(ValueError, match="not found"):
        with bf.win_lock("nope"):
            pass
    with pytest.raises(ValueError, match="out-neighbors"):
        bf.win_put(window, "w", dst_weights={RANK: 1.0})
    with pytest.raises(ValueError, match="in-neighbors"):
        bf.win_get("w", src_weights={RANK: 1.0})
    with pytest.raises(ValueError, match="same time"):
        bf.win_update("w", self_weight=0.5)
    with pytest.raises(ValueError, match="float"):
        bf.win_update("w", self_weight=1, neighbor_weights={})
    with pytest.raises(ValueError, match="Handle"):
        bf.win_poll(123456)
    assert bf.win_wait(123456) is False
