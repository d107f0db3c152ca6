"""The Prometheus endpoint (starling.metrics): every rank serves on STARLING_METRICS_PORT
plus its local rank from starling.torch.init(); every rank scrapes every rank over HTTP
and checks the counters against the operations it knows were made, and the monitor's
values; bad input gives errors naming the variable and leaves the context usable.

Its own process (STARLING_TEST_FRESH_PROCESS=1): the variable is read at init(). Run
with STARLING_TEST_METRICS_BAD=<value> it checks that init() with that value raises
naming the variable and that Starling then works."""

import os
import socket
import sys
import urllib.error
import urllib.request

import pytest
import torch
import torch.nn as nn

import starling
import starling.torch as bf
from starling import metrics
from starling.torch import _state

LOCAL_RANK = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
BAD = os.environ.get("STARLING_TEST_METRICS_BAD")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if BAD is None:
    PORT = free_port()  # this rank's; the variable is the job's base
    os.environ[metrics.ENV_PORT] = str(PORT - LOCAL_RANK)
    os.environ[metrics.ENV_ADDRESS] = "127.0.0.1"
    bf.init()
    INIT_ERROR = None
else:
    os.environ[metrics.ENV_PORT] = BAD
    try:
        bf.init()
        INIT_ERROR = None
    except Exception as e:  # noqa: BLE001 (checked below)
        INIT_ERROR = e
RANK, SIZE = bf.rank(), bf.size()


def scrape(port):
    """{(name, rank, monitor or peer): value} from the endpoint, parsed by prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(s.name, s.labels["rank"], s.labels.get("monitor", s.labels.get("peer"))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.skipif(BAD is not None, reason="the bad-variable run")
def test_counters_over_http():
    ports = bf.allgather(torch.tensor([[PORT]])).reshape(-1).tolist()
    own = ports[RANK]
    before = scrape(own)
    stats = _state.context.stats()
    assert before[("starling_operations_total", str(RANK), None)] == stats["operations"]
    x = torch.ones(1000)
    for _ in range(5):
        bf.allreduce(x, name="metrics")
    after = scrape(own)
    stats_after = _state.context.stats()
    assert after[("starling_operations_total", str(RANK), None)] == before[
        ("starling_operations_total", str(RANK), None)] + 5
    for key in ("bytes_sent", "messages_sent", "fusion_groups"):
        assert after[(f"starling_{key}_total", str(RANK), None)] == stats_after[key], key
    if SIZE > 1:
        assert after[("starling_bytes_sent_total", str(RANK), None)] >= before[
            ("starling_bytes_sent_total", str(RANK), None)] + 5 * 4000 / SIZE
    # Every rank's endpoint, read by every rank: each holds what it read, plus the allreduce.
    mine = torch.zeros(SIZE, dtype=torch.int64)
    mine[RANK] = _state.context.stats()["operations"]
    known = bf.allreduce(mine, average=False, name="metrics.known")  # one operation
    # After the barrier every peer has finished the allreduce; its own barrier may not
    # have completed yet (a rank counts an operation when it completes there).
    bf.barrier()
    seen = [scrape(ports[r])[("starling_operations_total", str(r), None)] for r in range(SIZE)]
    bf.barrier()
    for r, v in enumerate(known.tolist()):
        assert seen[r] == v + 2 if r == RANK else seen[r] in (v + 1, v + 2), (r, seen, known)


@pytest.mark.skipif(BAD is not None, reason="the bad-variable run")
def test_peer_figures_over_http():
    bf.neighbor_allreduce(torch.ones(5000), name="metrics.peers")
    probe = _state.context.probe_peers(repetitions=2)
    bf.barrier()
    page = scrape(PORT)
    peers = _state.context.peer_stats()
    stats = _state.context.stats()
    assert page[("starling_blocked_seconds_total", str(RANK), None)] == stats["blocked_ns"] / 1e9
    assert page[("starling_bytes_received_total", str(RANK), None)] == stats["bytes_received"]
    exported = 0
    for peer, p in enumerate(peers):
        key = lambda name: (name, str(RANK), str(peer))  # noqa: E731
        if not any(p.values()):
            assert key("starling_peer_bytes_sent_total") not in page  # silent peers are left out
            continue
        exported += 1
        assert page[key("starling_peer_bytes_sent_total")] == p["bytes_sent"]
        assert page[key("starling_peer_messages_received_total")] == p["messages_received"]
        assert page[key("starling_peer_wait_seconds_total")] == p["wait_ns"] / 1e9
        assert page[key("starling_peer_last_wait_seconds")] == p["last_wait_ns"] / 1e9
        assert page[key("starling_peer_probe_latency_seconds")] == p["probe_latency_ns"] / 1e9
        assert page[key("starling_peer_probe_bytes_per_second")] == probe["bytes_per_second"][peer] > 0
    assert exported == (SIZE - 1)  # every peer of a 2-rank job is a neighbor
    if SIZE > 1:
        other = 1 - RANK  # through MPI or shared memory, the data counts
        assert page[("starling_peer_bytes_sent_total", str(RANK), str(other))] >= 5000 * 4


@pytest.mark.skipif(BAD is not None, reason="the bad-variable run")
def test_monitor_values_over_http():
    torch.manual_seed(RANK)
    model = nn.Linear(4, 1)
    opt = bf.monitor_gradients(bf.DistributedGradientAllreduceOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                                         model=model), batch_size=4, name="mlp")
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 4)).pow(2).sum().backward()
        opt.step()
    page = scrape(PORT)
    assert page[("starling_monitored_steps_total", str(RANK), "mlp")] == 3
    assert page[("starling_gradient_variance", str(RANK), "mlp")] == opt.monitor.variance
    if SIZE > 1:
        assert page[("starling_gradient_noise_scale", str(RANK), "mlp")] == opt.monitor.noise_scale


@pytest.mark.skipif(BAD is not None, reason="the bad-variable run")
def test_bad_input_leaves_the_context_usable(monkeypatch):
    context = _state.context
    with pytest.raises(starling.InvalidArgumentError, match=f"{metrics.ENV_PORT}.*port {PORT}"):
        metrics.serve(context, port=PORT)  # in use: by this rank's endpoint
    for value, match in (("abc", "not a port number"), ("70000", "outside 1-65535"), ("0", "outside 1-65535"),
                         ("-5", "outside 1-65535")):
        monkeypatch.setenv(metrics.ENV_PORT, value)
        with pytest.raises(starling.InvalidArgumentError, match=f"{metrics.ENV_PORT}.*{match}"):
            metrics.serve(context)
    monkeypatch.delenv(metrics.ENV_PORT)
    assert metrics.serve(context) is None  # unset: off
    with pytest.raises(starling.InvalidArgumentError, match="metrics port"):
        metrics.serve(context, port="9100")
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    with pytest.raises(starling.UnsupportedError, match=f"prometheus_client.*{metrics.ENV_PORT}"):
        metrics.serve(context, port=0)
    monkeypatch.undo()
    assert bf.allreduce(torch.tensor([1.0]), average=False).item() == SIZE  # still usable
    assert scrape(PORT)[("starling_operations_total", str(RANK), None)] >= 1  # still serving


@pytest.mark.skipif(BAD is not None, reason="the bad-variable run")
def test_closing_a_context_stops_its_endpoint():
    context = starling.Context()
    server = metrics.serve(context, port=0)
    assert scrape(server.port)[("starling_operations_total", str(RANK), None)] == 0
    context.close()
    with pytest.raises(urllib.error.URLError):
        scrape(server.port)


@pytest.mark.skipif(BAD is None, reason="only with STARLING_TEST_METRICS_BAD")
def test_bad_variable_at_init():
    assert isinstance(INIT_ERROR, starling.InvalidArgumentError) and metrics.ENV_PORT in str(INIT_ERROR)
    assert bf.is_initialized() and bf.allreduce(torch.tensor([2.0]), average=True).item() == 2.0
