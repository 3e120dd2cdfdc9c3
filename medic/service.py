"""`medic serve`: the configured live sources through the one Pipeline, the rules and
executor, into the history; Prometheus metrics and health over HTTP.

One asyncio task per source puts ``(source, event, cursor)`` on a bounded queue; one
consumer feeds the pipeline on a single worker thread (Slurm actions block), so slow actions
never stall ingest and the history's DuckDB connection is only ever used from one thread.

Event time: each source has a watermark; the pipeline's watermark is their minimum, so a
source that lags or is being retried holds back time-based detection (hangs, silence) rather
than letting it fire on missing data. A polling source that stamps rows with the wall clock is
complete up to the wall clock between its polls (``complete_until``): a quiet source that has
nothing to say does not hold the others back. Evidence in the batches that do arrive is still
acted on.

Crash safety (kill -9): a source's cursor is saved only after the events before it went
through the pipeline, whose detections and actions are already in DuckDB (written as they
happen, a detection before any action on it) and whose actions are planned in the journal file
before the first runs. After a restart, the decisions the journal shows unfinished are resumed
(each step not verified runs, its target's state re-read first: nothing twice, nothing lost),
sources resume from their cursors (no lost rows), the incidents still open in the history are
reopened in the correlator with the requeues done in them (no repeated detection), and the
journal refuses the keys it has planned: one per incident, action and target (no repeated
action). The Slurm source is not resumed: it starts with a fresh
snapshot, which tells the detectors which jobs run where.
"""

from __future__ import annotations

import asyncio
import io
import logging
import signal
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

from medic.actions.executor import Executor
from medic.actions.journal import Journal
from medic.actions.recovery import Recovery, RecoveryMetrics
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.errors import exception_line
from medic.history.nodes import history_nodes
from medic.history.pages import render_report
from medic.history.store import DuckDBStore
from medic.history.writer import HistoryWriter
from medic.incident import Incident
from medic.ingest.base import Batch, Event, Source, Watermark
from medic.ingest.cursor import CursorStore
from medic.ingest.live import Backoff, SourceHealth, wall_us
from medic.ingest.registry import SOURCES
from medic.ingest.sources import open_sources
from medic.pipeline import Pipeline
from medic.service_config import ServiceConfig as ServiceConfig  # re-exported
from medic.service_config import parse_listen
from medic.service_config import service_config as service_config  # re-exported
from medic.service_http import HttpEndpoints, ServiceMetrics, SourceCollector
from medic.service_log import log_decisions, log_detections
from medic.settings_tree import Settings
from medic.timeutil import US

log = logging.getLogger(__name__)


@dataclass
class SourceState:
    """What the service knows of one running source."""

    source: Source
    resumable: bool
    watermark: int | None = None
    cursor: dict[str, Any] | None = None
    up: bool = True
    last_error: str | None = None

    @property
    def is_up(self) -> bool:
        """Delivering, and (for a source that retries by itself) its last request succeeded."""
        health = getattr(self.source, "health", None)
        return self.up and not (isinstance(health, SourceHealth) and not health.up)

    @property
    def error(self) -> str | None:
        health = getattr(self.source, "health", None)
        return self.last_error or (health.error if isinstance(health, SourceHealth) else None)


class Service:
    """The long-running service (see the module docstring)."""

    def __init__(
        self,
        settings: Settings | Mapping[str, Any],
        *,
        client: httpx.AsyncClient | None = None,
        executor: Executor | None = None,
    ) -> None:
        settings = Settings.load(settings)
        self.config = settings.service
        state_dir = Path(self.config.state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))
        self.metrics = ServiceMetrics()
        self.history = settings.history
        self.store = DuckDBStore(self.history.path)
        self.writer = HistoryWriter(self.store, self.history, wall_clock=wall_us)
        self.recovery = Recovery.from_settings(settings, self.store, state_dir, wall_us())
        self.actions = ActionStage.from_settings(
            settings,
            executor,
            self.recovery.notifiers,
            journal=Journal.for_service(state_dir / "journal.jsonl"),
        )
        self.recovery.attach(self.actions)
        self.metrics.registry.register(RecoveryMetrics(self.recovery))
        self.pipeline = Pipeline.from_settings(
            settings,
            responders=[self.writer, self.actions, self.metrics],
            observers=[self.writer, *self.actions.observers, *self.recovery.observers],
        )
        self.writer.correlator = self.pipeline.correlator
        self.pipeline.correlator.restore(self._open_incidents())
        self.actions.resume(wall_us())
        self._record_actions()
        self._restore_requeues()
        sources = settings.sources
        self.cursors = CursorStore(sources.cursor_dir or state_dir / "cursors")
        self.sources = {
            source.name: SourceState(source, resumable=SOURCES[source.name].resumable)
            for source in open_sources(sources, self.client, self.cursors)
        }
        self.metrics.watch_sources(self.source_counters)
        self.metrics.registry.register(SourceCollector(lambda: self.sources))
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medic-pipeline")
        self._rows: dict[str, int] = {}
        self._own = self.own_jobs()
        """``own_jobs()`` as of the last tick (the lifecycle starts checks in the tick)."""
        self._stop = asyncio.Event()

    def _open_incidents(self) -> list[Incident]:
        """Incidents the history shows open within the correlation window before now, each with
        every detection it had, so that what they reported is not reported again."""
        window = round(self.pipeline.config.incident_window_s * US)
        rows = self.store.sql(
            "SELECT detected_at, job_id, kind, culprits, ranks, score, detector, summary, "
            "coalesce(tier, 'confirmed') AS tier FROM detections "
            "WHERE job_id IS NOT NULL AND epoch_us(detected_at) >= ? "
            "ORDER BY detected_at",
            [wall_us() - window],
        )
        detections: dict[str, list[Detection]] = {}
        for row in rows.to_pylist():
            detection = Detection(
                job_id=row["job_id"],
                kind=row["kind"],
                culprits=tuple(row["culprits"]),
                ranks=tuple(row["ranks"]),
                score=row["score"],
                detector=row["detector"],
                summary=row["summary"],
                detected_at=int(row["detected_at"].timestamp() * US),
                tier=row["tier"],
            )
            detections.setdefault(row["job_id"], []).append(detection)
        incidents = [
            Incident(d[0], d[-1].detected_at, symptoms=d[1:], symptom_count=len(d) - 1)
            for d in detections.values()
        ]
        if incidents:
            log.info("reopened %d incident(s) from the history", len(incidents))
        return incidents

    def _restore_requeues(self) -> None:
        """The requeues medic did in the incidents reopened: a fault after one is acted on (a
        new attempt), and the restart budget remembers them."""
        open_incidents = self.pipeline.correlator.open
        rows = self.store.sql(
            "SELECT epoch_us(time) AS at, job_id FROM actions WHERE action = 'requeue' "
            "AND status IN ('done', 'partial') AND job_id IS NOT NULL ORDER BY time"
        )
        for at, job_id in zip(*rows.to_pydict().values(), strict=True):
            incident = open_incidents.get(job_id)
            if incident is not None and at >= incident.first.detected_at:
                self.actions.guards.restore_requeue(incident.first.id, job_id, at)

    def stop(self) -> None:
        """Ask the service to finish (what SIGTERM does)."""
        self._stop.set()

    async def run(self) -> None:
        """Serve until stopped: ingest, detect, act, remember; then shut down cleanly."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        host, port = parse_listen(self.config.listen)
        http = HttpEndpoints(
            self.metrics, self.health, host, port, self.report_page, self.nodes_table
        ).start()
        log.info("medic serve: /metrics, /healthz and /report on %s:%d", host, http.port)
        queue: asyncio.Queue[tuple[str, Event, dict[str, Any]]] = asyncio.Queue(
            self.config.queue_events
        )
        producers = [
            asyncio.create_task(self._produce(name, queue), name=f"source:{name}")
            for name in self.sources
        ]
        consumer = asyncio.create_task(self._consume(queue), name="pipeline")
        ticker = asyncio.create_task(self._tick(), name="checkpoint")
        try:
            await self._stop.wait()
        finally:
            for task in producers:
                task.cancel()
            await asyncio.gather(*producers, return_exceptions=True)
            await queue.join()
            consumer.cancel()
            ticker.cancel()
            await asyncio.gather(consumer, ticker, return_exceptions=True)
            await loop.run_in_executor(self._worker, self._shutdown)
            self._worker.shutdown()
            http.stop()
            await self.client.aclose()
            log.info("medic serve: stopped")

    async def _produce(self, name: str, queue: asyncio.Queue[Any]) -> None:
        """Feed one source's events to the queue; retry it with backoff whenever it fails."""
        state = self.sources[name]
        backoff = Backoff(self.config.retry_initial_s, self.config.retry_max_s)
        while True:
            try:
                async for event in state.source:
                    if not state.up:
                        log.info("source %s: delivering again", name)
                    state.up, state.last_error = True, None
                    backoff.reset()
                    await queue.put((name, event, state.source.checkpoint()))
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a source must never take the service down
                state.up, state.last_error = False, exception_line(exc)
                self.metrics.source_errors.labels(name).inc()
                delay = backoff.next_delay()
                log.error("source %s failed: %s; retrying in %.0f s", name, exc, delay)
                await asyncio.sleep(delay)

    async def _consume(self, queue: asyncio.Queue[tuple[str, Event, dict[str, Any]]]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            name, event, cursor = await queue.get()
            try:
                await loop.run_in_executor(self._worker, self._process, name, event, cursor)
            except Exception:
                log.exception("pipeline failed on an event from %s; event skipped", name)
            finally:
                queue.task_done()

    def _process(self, name: str, event: Event, cursor: dict[str, Any]) -> None:
        """On the worker thread: one event through the pipeline, then its bookkeeping."""
        state = self.sources[name]
        detections: list[Detection] = []
        if isinstance(event, Watermark):
            state.watermark = max(event.time, state.watermark or event.time)
            combined = self.watermark()
            if combined is not None:
                detections = self.pipeline.process(Watermark(combined))
        else:
            self._count(name, event)
            detections = self.pipeline.process(event.without_jobs(self._own))
        log_detections(detections)
        self._record_actions()
        state.cursor = cursor

    def _record_actions(self) -> None:
        """The decisions taken since the last call: to the log, the history and /metrics."""
        actions = self.actions.log.take()
        if actions.num_rows:
            log_decisions(actions)
            self.writer.record_actions(actions)
            self.metrics.count_actions(_action_rows(actions))

    def own_jobs(self) -> set[str]:
        """medic's own jobs (node checks), kept from detection, actions and the history: the
        lifecycle's journal names those it started, the Slurm source those with its comment."""
        own = self.recovery.journal.check_jobs()
        for state in self.sources.values():
            own |= getattr(state.source, "own_jobs", set())
        return own

    def _count(self, name: str, batch: Batch) -> None:
        self.metrics.rows.labels(name, batch.stream).inc(batch.num_rows)
        self._rows[batch.stream] = self._rows.get(batch.stream, 0) + batch.num_rows

    def watermark(self) -> int | None:
        """The event time every source is complete up to: the least of their watermarks, a
        polling source's taken as far as its next poll (``complete_until``)."""
        now = wall_us()
        marks = [complete_until(s.source, s.watermark, now) for s in self.sources.values()]
        if not marks or any(m is None for m in marks):
            return None
        return min(m for m in marks if m is not None)

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.config.checkpoint_interval_s
        while True:
            await asyncio.sleep(interval)
            await loop.run_in_executor(self._worker, self._checkpoint, interval)

    def _checkpoint(self, interval: float) -> None:
        """On the worker thread: save cursors of what the pipeline has consumed; refresh gauges."""
        for name, state in self.sources.items():
            if state.resumable and state.cursor is not None:
                try:
                    self.cursors.save(name, state.cursor)
                except OSError as exc:
                    log.error("cannot save the cursor of %s: %s", name, exc)
        now = wall_us()
        if self.actions.journal.unfinished():
            self.actions.resume(now)
            self._record_actions()
        self.recovery.tick(now, {name: state.watermark for name, state in self.sources.items()})
        self._own = self.own_jobs()
        for name, state in self.sources.items():
            if state.watermark is not None:
                self.metrics.lag.labels(name).set(max(0, now - state.watermark) / US)
        for stream, rows in self._rows.items():
            self.metrics.rate.labels(stream).set(rows / interval)
        self._rows = {}
        self.metrics.event_time.set(self.pipeline.now / US)
        self.metrics.watermark.set(self.pipeline.watermark / US)
        self.metrics.state.set(self.pipeline.state_size())
        self.metrics.history_errors.set(self.writer.errors)
        for stream, late in self.writer.late.items():
            self.metrics.history_late.labels(stream).set(late)

    def _shutdown(self) -> None:
        self.writer.flush()
        self._checkpoint(self.config.checkpoint_interval_s)
        self.store.close()

    def source_counters(self) -> dict[str, dict[str, int]]:
        """What each source counted so far (its ``stats``), for /metrics, and as ``placement``
        the log lines placed from their text or refused a node (``unknown_node``)."""
        counts = {
            name: state.source.stats.as_dict()
            for name, state in self.sources.items()
            if hasattr(state.source, "stats")
        }
        counts["placement"] = dict(self.pipeline.placement.stats)
        return counts

    def report_page(self, kind: str, params: Mapping[str, str]) -> str:
        """/report and /report.html, on the HTTP thread: the history report, read through a
        connection of its own while the pipeline keeps writing."""
        with self.store.cursor() as reader:
            lemon = self.recovery.config.lifecycle.lemon
            return render_report(reader, self.history, kind, params, lemon)

    def nodes_table(self) -> bytes:
        """/nodes, on the HTTP thread: ``medic nodes``'s history table (Arrow IPC), read
        through a connection of its own."""
        with self.store.cursor() as reader:
            table = history_nodes(reader, self.recovery.config.lifecycle.lemon)
        out = io.BytesIO()
        table.write_ipc_stream(out)
        return out.getvalue()

    def health(self) -> dict[str, Any]:
        """Per source: delivering, and how far behind the wall clock its data is."""
        now = wall_us()
        sources = {}
        healthy = True
        for name, state in self.sources.items():
            lag = None if state.watermark is None else max(0, now - state.watermark) / US
            ok = state.is_up and lag is not None and lag <= self.config.stale_after_s
            healthy = healthy and ok
            sources[name] = {"up": state.is_up, "lag_s": lag, "error": state.error, "ok": ok}
        return {
            "healthy": healthy and not self.recovery.deadman.stalled,
            "sources": sources,
            "stalled": sorted(self.recovery.deadman.stalled),
            "history_errors": self.writer.errors,
        }


def complete_until(source: Source, watermark: int | None, now: int) -> int | None:
    """How far ``source`` is complete. A source that stamps its rows with the wall clock at the
    start of each poll (files, Slurm, Prometheus) has nothing older to say until its next poll,
    one interval after the last: between polls it is complete up to the wall clock, so a quiet
    Slurm source polled every 5 s does not hold a crash's 3 s hold back for 5 s more. A poll
    that is late or failing holds it at the poll that was due. Other sources (a log store's
    event time, a replay): their own watermark. A polling source says so by its
    ``poll_interval_s``."""
    if watermark is None:
        return None
    interval: float | None = getattr(source, "poll_interval_s", None)
    if interval is None:
        return watermark
    return max(watermark, min(now, watermark + round(interval * US)))


def _action_rows(table: pa.Table) -> list[tuple[str, str, str | None]]:
    return list(
        zip(
            table.column("action").to_pylist(),
            table.column("status").to_pylist(),
            table.column("guard").to_pylist(),
            strict=True,
        )
    )


def serve(settings: Settings | Mapping[str, Any]) -> None:
    """Run the service in the foreground until SIGTERM or SIGINT."""
    asyncio.run(Service(settings).run())
