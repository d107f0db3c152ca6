"""A Prometheus text endpoint per rank: the context's counters (Context.stats()), its
traffic and waits per peer (Context.peer_stats()) and the gradient monitors' values (starling.torch.monitor_gradients); the same values as
TensorBoard scalars (write_tensorboard).

Off by default. STARLING_METRICS_PORT=P turns it on in starling.torch.init(): each rank
serves http://<host>:P+local_rank/metrics (so the ranks of one host never collide);
serve(context) does the same for a starling.Context. The text format comes from the
prometheus_client package, imported only when an endpoint starts.
"""

import os
import sys
import threading
import weakref
from typing import Any, Iterator, List, Optional

from .errors import InvalidArgumentError, UnsupportedError

ENV_PORT = "STARLING_METRICS_PORT"
ENV_ADDRESS = "STARLING_METRICS_ADDRESS"  # the interface to listen on (default: all)

# Counters of starling_get_stats that only grow, and the one that goes up and down.
_COUNTERS = (("operations", "Operations finished (successfully or not)"),
             ("fused_operations", "Operations that travelled in a fused group"),
             ("fusion_groups", "Fused groups of 2 or more operations"),
             ("messages_sent", "Point-to-point messages handed to MPI"),
             ("bytes_sent", "Bytes sent (handed to MPI, or published in shared memory for same-host peers)"),
             ("messages_received", "Point-to-point messages received from MPI"),
             ("bytes_received", "Bytes received (through MPI or shared memory)"),
             ("shm_bytes_sent", "Of the bytes sent, those same-host peers read from shared memory"),
             ("shm_bytes_received", "Of the bytes received, those read from same-host peers' shared memory"),
             ("staged_bytes", "Bytes copied between CUDA tensors and host staging buffers"),
             ("bytes_before_compression", "Compressed operations' payload bytes before compression"),
             ("bytes_after_compression", "Compressed operations' payload bytes after compression"))
_GAUGES = (("scratch_bytes", "Scratch memory the context holds now"),)
_BLOCKED = ("blocked_seconds", "Time the application's threads spent in blocking calls and request waits")

# Context.peer_stats() per peer, labelled peer=<rank>: (key, exported name, kind, help).
# Counts in ns are exported in seconds.
_PEER = (("messages_sent", "starling_peer_messages_sent", "counter", "Messages handed to MPI for this peer"),
         ("bytes_sent", "starling_peer_bytes_sent", "counter", "Bytes handed to MPI for this peer"),
         ("messages_received", "starling_peer_messages_received", "counter", "Messages received from this peer"),
         ("bytes_received", "starling_peer_bytes_received", "counter", "Bytes received from this peer"),
         ("waits", "starling_peer_waits", "counter", "Operation steps that exchanged messages with this peer"),
         ("wait_ns", "starling_peer_wait_seconds", "counter",
          "Time operation steps waited for this peer: from the step's start until its messages arrived and it "
          "took ours"),
         ("last_wait_ns", "starling_peer_last_wait_seconds", "gauge",
          "The most recent operation step's wait for this peer"),
         ("probe_latency_ns", "starling_peer_probe_latency_seconds", "gauge",
          "Latency to this peer at the last Context.probe_peers() (0: never probed)"),
         ("probe_bytes_per_second", "starling_peer_probe_bytes_per_second", "gauge",
          "Throughput to this peer at the last Context.probe_peers() (0: never probed)"))

_monitors: "weakref.WeakSet[Any]" = weakref.WeakSet()  # every GradientMonitor alive
_monitors_lock = threading.Lock()  # (added to by the training thread, read by the server's)


def register_monitor(monitor: Any) -> None:
    """Exports monitor's values (noise_scale, variance, monitored_steps, name) from every
    endpoint of this process."""
    with _monitors_lock:
        _monitors.add(monitor)


def write_tensorboard(writer: Any, step: int, context: Any = None, prefix: str = "starling") -> int:
    """Writes the context's counters (Context.stats(), as the endpoint exports them) and
    every live gradient monitor's values as scalars at global step `step`:
    <prefix>/<counter> and <prefix>/<monitor name>/{noise_scale,variance}. writer: a
    torch.utils.tensorboard.SummaryWriter (or anything with add_scalar(tag, value,
    step)); context: a starling.Context, or None for starling.torch's once initialized
    (otherwise the monitors only). Local: call it on
    the ranks that should log (rank 0 alone, or each rank with a writer of its own
    log_dir). Returns the number of scalars written."""
    if not callable(getattr(writer, "add_scalar", None)):
        raise InvalidArgumentError(f"write_tensorboard: writer must have add_scalar(tag, value, step) (a "
                                   f"torch.utils.tensorboard.SummaryWriter), got {type(writer).__name__}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise InvalidArgumentError(f"write_tensorboard: step must be an int >= 0, got {step!r}")
    if not isinstance(prefix, str) or not prefix:
        raise InvalidArgumentError(f"write_tensorboard: prefix must be a non-empty str, got {prefix!r}")
    written = 0
    if context is None:  # starling.torch's, if it is in use (not imported here: torch is optional)
        context = getattr(sys.modules.get("starling.torch._state"), "context", None)
    if context is not None:
        stats = context.stats()
        for key, _ in _COUNTERS + _GAUGES:
            writer.add_scalar(f"{prefix}/{key}", float(stats[key]), step)
            written += 1
        writer.add_scalar(f"{prefix}/{_BLOCKED[0]}", stats["blocked_ns"] / 1e9, step)
        written += 1
    with _monitors_lock:
        monitors = sorted(list(_monitors), key=lambda m: m.name)
    for m in monitors:
        for key in ("noise_scale", "variance"):
            value = getattr(m, key)
            if value is not None:
                writer.add_scalar(f"{prefix}/{m.name}/{key}", float(value), step)
                written += 1
    return written


def port_from_environment(local_rank: int) -> Optional[int]:
    """The port this rank serves on (STARLING_METRICS_PORT + local_rank), or None when
    the variable is unset or empty. Raises InvalidArgumentError naming the variable."""
    text = os.environ.get(ENV_PORT, "").strip()
    if not text:
        return None
    try:
        base = int(text, 10)
    except ValueError:
        raise InvalidArgumentError(f"{ENV_PORT}={text!r} is not a port number: give an integer from 1 to 65535 "
                                   f"(rank with local rank r serves on it plus r), or unset it") from None
    port = base + int(local_rank)
    if not 1 <= base or not port <= 65535:
        raise InvalidArgumentError(f"{ENV_PORT}={text}: local rank {local_rank} would serve on port {port}, "
                                   f"outside 1-65535 (each rank serves on the variable plus its local rank)")
    return port


class MetricsServer:
    """One rank's endpoint: an HTTP server on a daemon thread; stop() ends it."""

    def __init__(self, context: Any, port: int, address: str = "") -> None:
        import http.server  # (here: importing starling stays light)
        try:
            import prometheus_client
            from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        except ImportError:
            raise UnsupportedError(f"{ENV_PORT} (or starling.metrics.serve) asks for a metrics endpoint, but the "
                                   f"Python package prometheus_client is not installed: pip install "
                                   f"prometheus-client (Debian: python3-prometheus-client), or unset {ENV_PORT}") \
                from None
        self._context = context
        self._rank = context.rank
        self._families = (CounterMetricFamily, GaugeMetricFamily)
        registry = prometheus_client.CollectorRegistry(auto_describe=False)
        registry.register(self)
        page = prometheus_client.generate_latest
        content_type = prometheus_client.CONTENT_TYPE_LATEST

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] not in ("/", "/metrics"):
                    self.send_error(404, "the metrics are at /metrics")
                    return
                body = page(registry)
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # the library prints nothing
                pass

        try:
            self._server = http.server.ThreadingHTTPServer((address, port), Handler)
        except OSError as e:
            raise InvalidArgumentError(f"{ENV_PORT}: rank {self._rank} cannot serve metrics on port {port}: "
                                       f"{e.strerror or e} (choose another port, or unset {ENV_PORT})") from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"starling-metrics-{port}", daemon=True)
        self._thread.start()

    def collect(self) -> Iterator[Any]:
        """prometheus_client's collector protocol: the values now."""
        counter, gauge = self._families
        rank = str(self._rank)
        stats, peers = None, []
        if not self._context.closed:
            try:
                stats = self._context.stats()
                peers = self._context.peer_stats()
            except Exception:  # closed meanwhile: export the monitors only
                stats, peers = None, []
        if stats is not None:
            for key, text in _COUNTERS:
                family = counter(f"starling_{key}", text, labels=["rank"])
                family.add_metric([rank], float(stats[key]))
                yield family
            for key, text in _GAUGES:
                family = gauge(f"starling_{key}", text, labels=["rank"])
                family.add_metric([rank], float(stats[key]))
                yield family
            family = counter(f"starling_{_BLOCKED[0]}", _BLOCKED[1], labels=["rank"])
            family.add_metric([rank], stats["blocked_ns"] / 1e9)
            yield family
        # Only the peers this rank exchanged anything with: a neighbor topology touches few.
        active = [(str(r), p) for r, p in enumerate(peers) if any(p.values())]
        for key, name, kind, text in _PEER if active else ():
            family = (counter if kind == "counter" else gauge)(name, text, labels=["rank", "peer"])
            seconds = key.endswith("_ns")
            for peer, p in active:
                family.add_metric([rank, peer], p[key] / 1e9 if seconds else float(p[key]))
            yield family
        with _monitors_lock:
            monitors = sorted(list(_monitors), key=lambda m: m.name)
        if monitors:
            noise = gauge("starling_gradient_noise_scale", "Gradient noise scale B_simple (EMA-smoothed)",
                          labels=["rank", "monitor"])
            variance = gauge("starling_gradient_variance", "Gradient variance over the ranks at the last monitored "
                             "step (trace of the covariance)", labels=["rank", "monitor"])
            steps = counter("starling_monitored_steps", "Steps the gradient monitor measured",
                            labels=["rank", "monitor"])
            for m in monitors:
                if m.noise_scale is not None:
                    noise.add_metric([rank, m.name], m.noise_scale)
                if m.variance is not None:
                    variance.add_metric([rank, m.name], m.variance)
                steps.add_metric([rank, m.name], float(m.monitored_steps))
            yield from (noise, variance, steps)

    def stop(self) -> None:
        """Stops serving and frees the port (waits at most the poll interval)."""
        server, self._server = getattr(self, "_server", None), None
        if server is not None:
            server.shutdown()
            server.server_close()


def serve(context: Any, port: Optional[int] = None, address: Optional[str] = None) -> Optional[MetricsServer]:
    """Starts context's endpoint on port (None: STARLING_METRICS_PORT + local rank; if
    that is unset, nothing starts and None is returned) at address (None:
    STARLING_METRICS_ADDRESS, default every interface). Local, not collective. The
    context stops it when it closes. Bad input (not a number, out of range, the port in
    use, prometheus_client missing) raises an error naming the variable; the context is
    untouched and stays usable."""
    if port is None:
        port = port_from_environment(context.local_rank)
        if port is None:
            return None
    elif not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise InvalidArgumentError(f"metrics port {port!r}: give an integer from 1 to 65535 (0: any free port)")
    if address is None:
        address = os.environ.get(ENV_ADDRESS, "")
    server = MetricsServer(context, port, address)
    servers: List[MetricsServer] = context.__dict__.setdefault("_metrics_servers", [])
    servers.append(server)
    return server


def stop(context: Any) -> None:
    """Stops every endpoint of context (Context.close() calls this)."""
    for server in context.__dict__.pop("_metrics_servers", []):
        server.stop()
