"""`medic serve`'s HTTP side: Prometheus metrics on ``/metrics``, health on ``/healthz``, and
the history report on ``/report`` (text) and ``/report.html``.

prometheus-client renders the metrics; the standard library's WSGI server serves them from a
daemon thread, so the event loop and the pipeline never wait on a scrape. It binds to
loopback unless told otherwise. The report is how ``medic report`` reads a history that the
running service holds open (DuckDB lets one process write a database file, and no other
process open it meanwhile, even read-only).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from medic.detectors.base import Detection
from medic.ingest.live import LATENESS_BUCKETS_S, SourceHealth, SourceStats
from medic.service_config import parse_listen as parse_listen  # re-exported

StartResponse = Callable[..., Any]
ReportPage = Callable[[str, Mapping[str, str]], str]
NodesTable = Callable[[], bytes]
"""``medic nodes``'s history table as an Arrow IPC stream."""
"""``(kind, query parameters) -> body``: kind is ``text`` or ``html``; ValueError for a bad
parameter (answered 400)."""


class ListenError(OSError):
    """The service cannot listen where ``[service] listen`` says (port in use, bad address)."""


@dataclass
class ServiceMetrics:
    """Every series ``medic serve`` exports, in a registry of its own."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.rows = Counter(
            "medic_ingested_rows", "Rows taken from each source", ["source", "stream"], registry=r
        )
        self.rate = Gauge(
            "medic_ingest_rows_per_second",
            "Rows per second over the last checkpoint interval (log lines, GPU samples, ...)",
            ["stream"],
            registry=r,
        )
        self.lag = Gauge(
            "medic_ingest_lag_seconds",
            "Wall clock minus the event time up to which the source is complete",
            ["source"],
            registry=r,
        )
        self.source_errors = Counter(
            "medic_source_errors",
            "Failures of a source (each one retried)",
            ["source"],
            registry=r,
        )
        self.detections = Counter(
            "medic_detections",
            "Detections emitted (new incidents, and news to them); tier: suspect or confirmed",
            ["kind", "detector", "tier"],
            registry=r,
        )
        self.actions = Counter(
            "medic_actions",
            "Action decisions by outcome; guard names the guard that suppressed one",
            ["action", "status", "guard"],
            registry=r,
        )
        self.event_time = Gauge(
            "medic_event_time_seconds", "Event time the pipeline has reached", registry=r
        )
        self.watermark = Gauge(
            "medic_watermark_seconds", "Event time every source is complete up to", registry=r
        )
        self.state = Gauge(
            "medic_detector_state_entities",
            "Jobs, ranks and GPUs held by the detectors",
            registry=r,
        )
        self.history_errors = Gauge(
            "medic_history_write_errors", "Writes the history store refused", registry=r
        )
        self.history_late = Gauge(
            "medic_history_late_rows",
            "Rows that came more than [history] lateness_s after their minute was summarised, "
            "left out of it",
            ["stream"],
            registry=r,
        )

    def watch_sources(self, counters: Callable[[], Mapping[str, Mapping[str, int]]]) -> None:
        """Export each source's own counters (rows skipped, retries, files matched, ...), read
        at scrape time from ``counters()``: ``{source: {name: value}}``."""
        self.registry.register(SourceCounters(counters))

    def handle(self, detections: list[Detection], now: int) -> None:
        """Pipeline responder: count what was emitted."""
        for detection in detections:
            self.detections.labels(detection.kind, detection.detector, detection.tier).inc()

    def count_actions(self, rows: Iterable[tuple[str, str, str | None]]) -> None:
        for action, status, guard in rows:
            self.actions.labels(action, status, guard or "").inc()


class SourceCounters(Collector):
    """``medic_source_events{source, event}`` from the sources' counters, and
    ``medic_log_files_matched`` (the file source's ``files_matched`` gauge)."""

    GAUGES = frozenset({"files_matched"})

    def __init__(self, counters: Callable[[], Mapping[str, Mapping[str, int]]]) -> None:
        self.counters = counters

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        events = CounterMetricFamily(
            "medic_source_events",
            "What each source counted: lines skipped as junk, retries, truncations, ...",
            labels=["source", "event"],
        )
        matched = GaugeMetricFamily(
            "medic_log_files_matched",
            "Log files the file source's path patterns match now",
            labels=["source"],
        )
        for source, counts in self.counters().items():
            for name, value in sorted(counts.items()):
                if name in self.GAUGES:
                    matched.add_metric([source], value)
                else:
                    events.add_metric([source, name], value)
        yield events
        yield matched


class SourceReport(Protocol):
    """What the service knows of a running source."""

    source: Any

    @property
    def is_up(self) -> bool: ...


class SourceCollector(Collector):
    """Per-source series read from the sources when scraped, so a failure shows at once:
    ``medic_source_up``, the requests a source failed and retried by itself, and how late its
    late rows were (its other counters are ``SourceCounters``')."""

    def __init__(self, sources: Callable[[], Mapping[str, SourceReport]]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "medic_source_up",
            "1 while the source gets good answers, 0 while it fails and is retried",
            labels=["source"],
        )
        failed = CounterMetricFamily(
            "medic_source_failed_requests",
            "Requests a source failed and retried (unreachable, broken, an answer it cannot read)",
            labels=["source"],
        )
        late = HistogramMetricFamily(
            "medic_source_late_rows_lateness_seconds",
            "Rows delivered behind the source's watermark, by how far behind",
            labels=["source"],
        )
        for name, report in self.sources().items():
            up.add_metric([name], 1.0 if report.is_up else 0.0)
            health = getattr(report.source, "health", None)
            if isinstance(health, SourceHealth):
                failed.add_metric([name], health.failures)
            stats = getattr(report.source, "stats", None)
            if not isinstance(stats, SourceStats):
                continue
            cumulative, buckets = 0, []
            for bound, n in zip([*LATENESS_BUCKETS_S, "+Inf"], stats.lateness, strict=True):
                cumulative += n
                buckets.append((str(bound), cumulative))
            late.add_metric([name], buckets, stats.lateness_sum_s)
        yield from (up, failed, late)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would flood the service's log."""


ARROW_STREAM = "application/vnd.apache.arrow.stream"


class HttpEndpoints:
    """Serves ``/metrics``, ``/healthz`` (JSON from ``health()``: 200 when healthy, else 503),
    given ``report``, ``/report`` and ``/report.html``, and given ``nodes``, ``/nodes`` (the
    history's node table, for ``medic nodes`` while the service holds the history)."""

    def __init__(
        self,
        metrics: ServiceMetrics,
        health: Callable[[], dict[str, Any]],
        host: str,
        port: int,
        report: ReportPage | None = None,
        nodes: NodesTable | None = None,
    ) -> None:
        self.health = health
        self.report = report
        self.nodes = nodes
        self.metrics_app = make_wsgi_app(metrics.registry)
        try:
            self.server: WSGIServer = make_server(host, port, self.app, handler_class=_QuietHandler)
        except OSError as exc:
            raise ListenError(
                f"cannot listen on {host}:{port} ([service] listen): {exc.strerror or exc}"
            ) from None
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def start(self) -> HttpEndpoints:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body: Iterable[bytes] = self.metrics_app(environ, start_response)
            return body
        if path == "/healthz":
            report = self.health()
            status = "200 OK" if report.get("healthy") else "503 Service Unavailable"
            data = json.dumps(report).encode()
            start_response(status, [("Content-Type", "application/json")])
            return [data]
        if path in ("/report", "/report.html") and self.report is not None:
            return self._report(
                environ, start_response, "html" if path.endswith("html") else "text"
            )
        if path == "/nodes" and self.nodes is not None:
            return self._nodes(start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"medic serves /metrics, /healthz, /report, /report.html and /nodes\n"]

    def _nodes(self, start_response: StartResponse) -> Iterable[bytes]:
        assert self.nodes is not None
        try:
            body = self.nodes()
        except Exception as exc:  # the service must outlive a read that fails
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
            return [f"nodes failed: {exc}\n".encode()]
        start_response("200 OK", [("Content-Type", ARROW_STREAM)])
        return [body]

    def _report(
        self, environ: dict[str, Any], start_response: StartResponse, kind: str
    ) -> Iterable[bytes]:
        assert self.report is not None
        query = parse_qs(environ.get("QUERY_STRING", ""))
        params = {name: values[-1] for name, values in query.items()}
        try:
            body = self.report(kind, params)
        except ValueError as exc:
            start_response("400 Bad Request", [("Content-Type", "text/plain")])
            return [f"{exc}\n".encode()]
        except Exception as exc:  # the service must outlive a report that fails
            start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
            return [f"report failed: {exc}\n".encode()]
        content = "text/html; charset=utf-8" if kind == "html" else "text/plain; charset=utf-8"
        start_response("200 OK", [("Content-Type", content)])
        return [body.encode()]
