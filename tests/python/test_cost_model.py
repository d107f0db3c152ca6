"""examples/benchmarks/cost_model.py: its message counting against closed forms, its
calibration against data generated from known parameters, and its command line."""

import importlib.util
import math
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "..", "..", "examples", "benchmarks", "cost_model.py")
spec = importlib.util.spec_from_file_location("cost_model", PATH)
cm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cm)

MIB = 2**20


def links_only(gbit=1.0, latency_us=300.0):
    """A platform whose CPU costs nothing: only the links count."""
    return cm.Platform(link_bytes_per_s=gbit * 1e9 / 8, latency_s=latency_us * 1e-6, alpha_s=0.0, alpha_local_s=0.0,
                       local_bytes_per_s=1e30, combine_bytes_per_s=1e30, eta=1.0)


@pytest.mark.parametrize("hosts,r", [(2, 1), (2, 2), (4, 2), (8, 2), (4, 4), (16, 8)])
def test_link_costs_match_closed_forms(hosts, r):
    p, n, size = links_only(), hosts * r, 16 * MIB
    B, L = p.link_bytes_per_s, p.latency_s
    # Ring: 2 (n - 1) rounds; one ring edge leaves each host, carrying size / n.
    ring = cm.predict("allreduce", p, n, r, size)
    assert math.isclose(ring.total, 2 * (n - 1) * (L + size / n / B), rel_tol=1e-12)
    # exp2: distance d leaves the host from min(d, r) of its ranks.
    ds = [2**k for k in range(int(math.log2(n)))]
    exp2 = cm.predict("neighbor_exp2", p, n, r, size)
    assert math.isclose(exp2.total, L + sum(min(d, r) for d in ds) * size / B, rel_tol=1e-12)
    # One peer: the same per distance, averaged over the period.
    one = cm.predict("one_peer_exp2", p, n, r, size)
    assert math.isclose(one.total, sum(L + min(d, r) * size / B for d in ds) / len(ds), rel_tol=1e-12)
    # Window push: one peer plus the acknowledgement's latency.
    push = cm.predict("window_push", p, n, r, size)
    assert math.isclose(push.total, one.total + L, rel_tol=1e-12)
    if r > 1:
        # Hierarchical: only the host leaders cross, to log2(hosts) machine neighbours.
        hier = cm.predict("hierarchical", p, n, r, size)
        k = int(math.log2(hosts))
        assert math.isclose(hier.total, L + k * size / B, rel_tol=1e-12)
        # ... or to one of them per step.
        hier1 = cm.predict("hierarchical_one_peer", p, n, r, size)
        assert math.isclose(hier1.total, L + size / B, rel_tol=1e-12)
    else:
        with pytest.raises(ValueError, match="several ranks per host"):
            cm.predict("hierarchical", p, n, r, size)


def test_one_host_has_no_link_cost():
    p = cm.Platform(link_bytes_per_s=1.0, latency_s=1.0, alpha_local_s=1e-6, local_bytes_per_s=1e9,
                    combine_bytes_per_s=2e9)
    cost = cm.predict("neighbor_exp2", p, 4, 4, 1e6)
    assert cost.latency == 0 and cost.link == 0
    # Two messages of 1 MB copied at 1 GB/s, 3 MB combined at 2 GB/s.
    assert math.isclose(cost.cpu, 2 * (1e-6 + 1e-3) + 3e6 / 2e9)


def test_shared_cores_divide_the_cpu_work_of_all_ranks():
    dedicated = cm.Platform(link_bytes_per_s=1e12, latency_s=0.0, combine_bytes_per_s=1e9)
    shared = cm.Platform(link_bytes_per_s=1e12, latency_s=0.0, combine_bytes_per_s=1e9, shared_cores=2)
    a = cm.predict("one_peer_exp2", dedicated, 16, 2, 1e6)
    b = cm.predict("one_peer_exp2", shared, 16, 2, 1e6)
    assert a.cpu > 0 and math.isclose(b.cpu, 8 * a.cpu, rel_tol=1e-9)  # 16 ranks on 2 cores


def test_allreduce_grows_with_ranks_while_one_peer_stays_flat():
    p = cm.Platform(link_bytes_per_s=10e9 / 8, latency_s=200e-6)
    size = 4 * MIB
    ring = [cm.predict("allreduce", p, n, 1, size).total for n in (2, 16, 256)]
    one = [cm.predict("one_peer_exp2", p, n, 1, size).total for n in (2, 16, 256)]
    assert ring[0] < ring[1] < ring[2] and ring[2] > 3 * ring[0]
    assert max(one) < 1.3 * min(one)


def test_calibration_recovers_the_parameters_it_was_generated_with():
    truth = {"alpha_s": 40e-6, "alpha_local_s": 3e-6, "local_bytes_per_s": 3e9, "combine_bytes_per_s": 2e9,
             "eta": 0.8, "tcp_s_per_byte": 5e-10}
    rows = []
    noise = [1.03, 0.97, 1.01, 0.99, 1.02, 0.98]
    for i, (method, n, size, gbit) in enumerate(
            (m, n, s, g) for m in cm.METHODS for n in (2, 4, 8, 16) for s in (4 * MIB, 64 * MIB) for g in (1, 10)):
        row = {"method": method, "ranks": n, "ranks_per_host": 2, "bytes": float(size), "link_gbit": float(gbit),
               "latency_us": 300.0, "cores": 2, "seconds": 0.0}
        row["seconds"] = cm.predict(method, cm.platform_for(row, truth), n, 2, size).total * noise[i % len(noise)]
        rows.append(row)
    fitted = cm.calibrate(rows)
    errors = cm.relative_errors(rows, fitted)
    assert max(abs(e) for e in errors) < 0.05
    assert abs(fitted["eta"] / truth["eta"] - 1) < 0.1


def test_bad_input_is_refused():
    p = links_only()
    with pytest.raises(ValueError, match="do not fill"):
        cm.predict("allreduce", p, 6, 4, 1.0)
    with pytest.raises(ValueError, match="unknown method"):
        cm.predict("allgather", p, 4, 2, 1.0)


def test_reading_scaling_bench_rows(tmp_path):
    path = tmp_path / "scaling.csv"
    path.write_text("1gbit,4,2,16,one_peer,12.5,0.4\n"
                    "1gbit,4,2,16,one_peer,10.0,0.4\n"   # a later row for the same point wins
                    "none,8,8,4,win_push,3.0,0.9\n"
                    "500mbit,2,1,4,hierarchical,7,0.1\n"
                    "not a row\n")
    rows = sorted(cm.read_measurements(str(path), cores=2), key=lambda r: r["ranks"])
    assert len(rows) == 3
    assert rows[0] == {"method": "hierarchical", "ranks": 2, "ranks_per_host": 2, "bytes": 4.0 * MIB, "link_gbit": 0.5,
                       "latency_us": 0.0, "seconds": 7e-3, "cores": 2}
    assert rows[1]["method"] == "one_peer_exp2" and rows[1]["seconds"] == 10e-3 and rows[1]["ranks_per_host"] == 2
    assert rows[2]["method"] == "window_push" and rows[2]["link_gbit"] == cm.UNLIMITED_GBIT
    bad = tmp_path / "bad.csv"
    bad.write_text("1gbit,4,2,16,allgather,1,1\n")
    with pytest.raises(ValueError, match="unknown method"):
        cm.read_measurements(str(bad), cores=2)
    with pytest.raises(ValueError, match="tc's syntax"):
        cm.link_gbit("fast")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="no scaling_bench rows"):
        cm.read_measurements(str(empty), cores=2)


def test_command_line(tmp_path, capsys):
    assert cm.main(["predict", "--mib", "16"]) == 0
    out = capsys.readouterr().out
    assert "4096" in out and "100 Gbit/s" in out
    names = {v: k for k, v in cm.BENCH_METHODS.items()}
    lines = []
    p = cm.Platform(link_bytes_per_s=1e9 / 8, latency_s=0.0, shared_cores=2)
    for method in cm.METHODS:
        if method not in names:
            continue
        for n in (2, 4, 8):
            r = 2 if method.startswith("hierarchical") else 1
            if r == 2 and n == 2:
                continue
            ms = cm.predict(method, p, n, r, 4 * MIB).total * 1e3
            lines.append(f"1gbit,{n},{n // r},4,{names[method]},{ms},0.5")
    measured = tmp_path / "scaling.csv"
    measured.write_text("\n".join(lines) + "\n")
    params = tmp_path / "p.json"
    assert cm.main(["calibrate", str(measured), "--cores", "2", "--out", str(params)]) == 0
    out = capsys.readouterr().out
    assert "largest error" in out and params.exists()
    assert cm.main(["predict", "--params", str(params)]) == 0
