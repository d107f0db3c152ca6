"""Tests of cost_model.py (no MPI): the traffic it counts per method, the step time
formula, and that calibration recovers known parameters from data the model made."""
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cost_model as cm  # noqa: E402

MIB = 2**20


def test_exp2_degree_counts_powers_of_two_below_n():
    assert [cm.exp2_degree(n) for n in (1, 2, 3, 4, 5, 8, 12, 16, 17, 4096)] == [0, 1, 2, 2, 3, 3, 4, 4, 5, 12]


@pytest.mark.parametrize("n", [2, 3, 4, 16, 1024])
def test_traffic_per_method(n):
    s = 4 * MIB
    ring = cm.traffic("allreduce", n, s)
    assert ring.latencies == 2 * (n - 1)
    assert ring.link_bytes == pytest.approx(2 * (n - 1) * s / n)
    assert cm.traffic("mpi_allreduce", n, s) == ring
    exp2 = cm.traffic("exp2", n, s)
    assert (exp2.latencies, exp2.link_bytes) == (1, math.ceil(math.log2(n)) * s)
    one = cm.traffic("one_peer", n, s)
    assert (one.latencies, one.link_bytes, one.touched_bytes) == (1, s, 2 * s)
    assert cm.traffic("win_push", n, s).latencies == 2


def test_hierarchical_sends_per_machine():
    t = cm.traffic("hierarchical", 16, MIB, per_host=2)  # 8 machines: 3 exp2 peers
    assert t.link_bytes == 3 * MIB and t.latencies == 3


def test_one_rank_sends_nothing_and_bad_methods_fail():
    assert cm.traffic("allreduce", 1, MIB) == cm.Traffic(0, 0.0, 0.0)
    with pytest.raises(ValueError, match="unknown method"):
        cm.traffic("broadcast", 4, MIB)


def test_step_time_adds_latency_link_and_cores():
    p = cm.Params(alpha=1e-4, eta=0.5, gamma=1e-9)
    t = cm.step_time(p, "one_peer", 8, MIB, 1e9, ranks_per_core=4)
    assert t == pytest.approx(1e-4 + MIB * 8 / 0.5e9 + 1e-9 * 2 * MIB * 4)
    assert cm.step_time(p, "one_peer", 8, MIB, 0) == pytest.approx(1e-4 + 1e-9 * 2 * MIB)  # unlimited


def test_one_peer_is_flat_and_the_ring_grows_with_ranks():
    p = cm.Params(alpha=5e-5, eta=0.8, gamma=1e-10)
    times = [cm.step_time(p, "one_peer", n, 16 * MIB, 1e10) for n in (64, 4096)]
    assert times[0] == pytest.approx(times[1])
    ring = [cm.step_time(p, "allreduce", n, 16 * MIB, 1e10) for n in (64, 4096)]
    assert ring[1] > 3 * ring[0]


def test_fit_recovers_the_parameters_it_was_made_with():
    truth = cm.Params(alpha=2e-3, eta=0.6, gamma=3e-9)
    rows = []
    for label in ("1gbit", "10gbit", "none"):
        for n in (2, 4, 8, 16):
            for mib in (4, 16):
                for method in ("allreduce", "exp2", "one_peer", "win_push"):
                    row = (label, n, n, mib, method, 0.0)
                    rows.append(row[:5] + (cm.predict_row(truth, row, 2),))
    got = cm.fit(rows, cores=2)
    assert got.alpha == pytest.approx(truth.alpha, rel=1e-3)
    assert got.eta == pytest.approx(truth.eta, rel=1e-3)
    assert got.gamma == pytest.approx(truth.gamma, rel=1e-3)
