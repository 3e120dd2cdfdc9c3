"""Writes what the pipeline sees and decides into a history store.

``HistoryWriter`` is a pipeline ``Responder`` (the emitted detections) and ``Observer`` (the
batches of the streams it names, including the derived "progress" stream, and watermarks):

    writer = HistoryWriter(store, history_config(settings))
    pipeline = Pipeline(detectors, config, responders=[actions_stage, writer], observers=[writer])
    writer.correlator = pipeline.correlator    # closed incidents, taken on each watermark
    ...
    writer.record_actions(actions_table)       # what the actions stage decided
    writer.flush()                             # at shutdown: the minutes still open

Scheduler rows become job events; GPU telemetry and progress are summarised per minute
(``medic.history.rollup``). A failed write is logged and counted, never raised: the history
must not stop the service. A backtest writes ``deferred``: rows are kept per table and appended
at ``flush``, a few large appends instead of one per minute and per detection (each append
costs DuckDB a query whatever its size).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

import polars as pl
import pyarrow as pa

from medic import schema
from medic.detectors.base import Detection, detection_id, detections_table
from medic.errors import exception_line
from medic.history import HistoryError
from medic.history.config import HistoryConfig
from medic.history.rollup import GPU_ROLLUP, PROGRESS_ROLLUP, MinuteBuffer
from medic.history.store import HistoryStore
from medic.incident import Incident, IncidentCorrelator
from medic.ingest.base import Batch
from medic.timeutil import US

log = logging.getLogger(__name__)

DETECTION_ROWS = (
    schema.DETECTIONS_WRITTEN.append(pa.field("onset", schema.TIME))
    .append(pa.field("detected_wall", schema.TIME))
    .append(pa.field("incident_id", pa.string()))
)
INCIDENT_ROWS = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("opened_at", schema.TIME, nullable=False),
        pa.field("last_seen", schema.TIME, nullable=False),
        pa.field("symptom_count", pa.int32(), nullable=False),
        pa.field("symptom_kinds", schema.STRING_LIST, nullable=False),
        pa.field("symptom_culprits", schema.STRING_LIST, nullable=False),
    ]
)


def detection_rows(detections: Sequence[Detection], wall: int | None = None) -> pa.Table:
    """Detections as rows of the ``detections`` table: the spec's columns plus ``onset``, the
    wall clock ``wall`` they were recorded at (live only) and their incident. ``score`` is kept as
    the rules read it (calibrated), ``raw_score`` beside it (the evidence score the calibration
    mapped), as ``detections.parquet`` has them."""
    extra = {
        "onset": [d.onset for d in detections],
        "detected_wall": [wall] * len(detections),
        "incident_id": [d.incident for d in detections],
    }
    table = detections_table(detections).select(schema.DETECTIONS_WRITTEN.names)
    for name, values in extra.items():
        field = DETECTION_ROWS.field(name)
        table = table.append_column(field, pa.array(values, field.type))
    return table


def incident_rows(incidents: Sequence[Incident]) -> pa.Table:
    """Closed incidents as rows of the ``incidents`` table, keyed by their first detection."""
    columns = {
        "id": [i.first.id for i in incidents],
        "job_id": [i.first.job_id for i in incidents],
        "kind": [i.kind for i in incidents],
        "opened_at": [i.first.detected_at for i in incidents],
        "last_seen": [i.last_seen for i in incidents],
        "symptom_count": [i.symptom_count for i in incidents],
        "symptom_kinds": [sorted({s.kind for s in i.symptoms}) for i in incidents],
        "symptom_culprits": [
            sorted({c for s in i.symptoms for c in s.culprits}) for i in incidents
        ],
    }
    return pa.Table.from_pydict(columns, schema=INCIDENT_ROWS)


def job_event_rows(frame: pl.DataFrame) -> pa.Table:
    """The job rows of a scheduler batch, with the base Slurm state (no flags, no 'by 0')."""
    jobs = frame.filter(
        (pl.col("kind") == "job") & pl.col("job_id").is_not_null() & pl.col("state").is_not_null()
    )
    base_state = pl.col("state").str.split(" ").list.first().str.split("+").list.first()
    return jobs.select(
        "time",
        "job_id",
        base_state.str.to_uppercase().alias("state"),
        "nodes",
        "exit_code",
        "reason",
    ).to_arrow()


class HistoryWriter:
    """Feeds a ``HistoryStore`` from the pipeline: detections, incidents, actions, job events,
    per-minute GPU telemetry and job progress."""

    name: ClassVar[str] = "history"
    streams: ClassVar[frozenset[str]] = frozenset({"gpu", "progress", "scheduler"})

    def __init__(
        self,
        store: HistoryStore,
        config: HistoryConfig | None = None,
        correlator: IncidentCorrelator | None = None,
        wall_clock: Callable[[], int] | None = None,
        deferred: bool = False,
    ) -> None:
        self.store = store
        self.wall_clock = wall_clock
        """Live only (``medic serve``): stamps each detection's ``detected_wall``."""
        self.config = config or HistoryConfig()
        self.correlator = correlator
        self.buffers = {"gpu": MinuteBuffer(GPU_ROLLUP), "progress": MinuteBuffer(PROGRESS_ROLLUP)}
        self.written: Counter[str] = Counter()
        """Rows inserted, per table."""
        self.skipped: Counter[str] = Counter()
        """Rows already stored (written again after a restart, or a minute summarised before
        late rows came), per table; unreadable batches under "batches"."""
        self.errors = 0
        """Writes the store refused (logged)."""
        self._late_logged: dict[str, int] = {}
        """``late`` as last logged, per stream."""
        self.deferred: dict[str, list[pa.Table]] | None = {} if deferred else None
        """Rows kept for ``flush``, per table (deferred writes only)."""

    def handle(self, detections: list[Detection], now: int) -> None:
        """Responder: record the detections the pipeline emitted."""
        wall = self.wall_clock() if self.wall_clock is not None else None
        self._write("detections", detection_rows(detections, wall))
        self._take_incidents()

    def update(self, batch: Batch) -> None:
        """Take a gpu, progress or scheduler batch; summarise the minutes it completes."""
        try:
            if batch.stream == "scheduler":
                self._write("job_events", job_event_rows(batch.frame))
            elif batch.stream in self.buffers:
                self.buffers[batch.stream].add(batch.frame)
        except (ValueError, pl.exceptions.PolarsError) as exc:
            self.skipped["batches"] += 1
            log.warning("history: skipped a %s batch: %s", batch.stream, exception_line(exc))
            return
        if batch.max_time is not None:
            self._close_minutes(batch.max_time)

    def advance(self, watermark: int) -> None:
        """Event time moved on: summarise completed minutes, record closed incidents."""
        self._close_minutes(watermark)
        self._take_incidents()

    def state_size(self) -> int:
        """Rows held for minutes not yet summarised."""
        return sum(buffer.rows for buffer in self.buffers.values())

    def record_actions(self, table: pa.Table) -> int:
        """Action decisions in ``medic.schema.ACTIONS``, suppressed ones included."""
        return self._write_conformed("actions", table, schema.ACTIONS)

    def record_incidents(self, incidents: Sequence[Incident]) -> int:
        return self._write("incidents", incident_rows(incidents)) if incidents else 0

    def flush(self) -> None:
        """Summarise every minute still open and record closed incidents (at shutdown, or at the
        end of a replay)."""
        for buffer in self.buffers.values():
            self._write_summary(buffer, None)
        self._take_incidents()
        if self.deferred:
            kept, self.deferred = self.deferred, {}
            for table, parts in kept.items():
                self._append(table, pa.concat_tables(parts, promote_options="permissive"))

    def set_onsets(self, onsets: Mapping[str, int]) -> None:
        """Give the deferred detections whose id is in ``onsets`` that onset (a backtest: the
        matching label's, so that the report's time to detect is the backtest's latency)."""
        parts = (self.deferred or {}).get("detections", [])
        for index, rows in enumerate(parts):
            found = [
                onsets.get(detection_id(at, job, kind, detector), onset)
                for at, job, kind, detector, onset in zip(
                    rows.column("detected_at").cast(pa.int64()).to_pylist(),
                    rows.column("job_id").to_pylist(),
                    rows.column("kind").to_pylist(),
                    rows.column("detector").to_pylist(),
                    rows.column("onset").cast(pa.int64()).to_pylist(),
                    strict=True,
                )
            ]
            column = rows.schema.get_field_index("onset")
            field = rows.schema.field(column)
            parts[index] = rows.set_column(column, field, pa.array(found, field.type))

    def _take_incidents(self) -> None:
        if self.correlator is not None:
            self.record_incidents(self.correlator.take_closed())

    @property
    def late(self) -> dict[str, int]:
        """Rows per stream (gpu, progress) that came more than ``lateness_s`` after their
        minute ended, when it was already summarised: left out of it, counted, logged."""
        return {stream: buffer.late for stream, buffer in self.buffers.items()}

    def _close_minutes(self, now: int) -> None:
        cutoff = now - round(self.config.lateness_s * US)
        for stream, buffer in self.buffers.items():
            self._write_summary(buffer, cutoff)
            new = buffer.late - self._late_logged.get(stream, 0)
            if new:
                self._late_logged[stream] = buffer.late
                log.warning(
                    "history: %d %s row(s) came more than lateness_s=%g s after their minute "
                    "was summarised and were left out of it (%d so far)",
                    new,
                    stream,
                    self.config.lateness_s,
                    buffer.late,
                )

    def _write_summary(self, buffer: MinuteBuffer, before: int | None) -> None:
        summary = buffer.close(before)
        if summary is not None:
            self._write(buffer.rollup.table, summary.to_arrow())

    def _write_conformed(self, table: str, rows: pa.Table, target: pa.Schema) -> int:
        try:
            conformed = schema.conform(rows, target)
        except schema.SchemaError as exc:
            self.errors += 1
            log.error("history: %s rows not recorded: %s", table, exc)
            return 0
        return self._write(table, conformed)

    def _write(self, table: str, rows: pa.Table) -> int:
        """Append ``rows`` now, or keep them for ``flush`` (deferred: returns 0)."""
        if rows.num_rows == 0:
            return 0
        if self.deferred is not None:
            self.deferred.setdefault(table, []).append(rows)
            return 0
        return self._append(table, rows)

    def _append(self, table: str, rows: pa.Table) -> int:
        try:
            inserted = self.store.append(table, rows)
        except HistoryError as exc:
            self.errors += 1
            log.error("%s", exc)
            return 0
        self.written[table] += inserted
        if inserted < rows.num_rows:
            self.skipped[table] += rows.num_rows - inserted
        return inserted
