"""``medic record`` and ``medic label``: turn a real incident into a backtest case.

``record`` captures ``[start, end]`` from the configured sources into a recording
(docs/recording-format.md). A log store (VictoriaLogs) is read back from ``start``, so a
past incident can be recorded after the fact; job output files, GPU telemetry and Slurm
state exist only as they happen, so they are captured live from the moment ``record``
starts until ``end`` (telemetry or Slurm rows of a range that lies wholly in the past are
therefore absent). The capture ends when every source's watermark has passed ``end``, or
``grace_s`` after ``end`` on the wall clock for a source that never gets there (named in
the log and in meta.json).

``label`` adds ground truth: one row of labels.parquet per incident. The file can also be
edited with any Parquet tool (polars, DuckDB) as long as it keeps the spec's columns;
``medic validate`` checks the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from medic import schema
from medic.ingest.base import Batch, Source, Watermark
from medic.ingest.live import wall_us
from medic.ingest.sources import open_sources
from medic.recording import (
    TABLE_FILES,
    Recording,
    RecordingError,
    make_meta,
    read_recording,
    write_recording,
)
from medic.settings_tree import Settings
from medic.timeutil import US, iso, to_us

log = logging.getLogger(__name__)


@dataclass
class _Capture:
    """What one source delivered inside the range, and whether it is complete."""

    source: Source
    tables: dict[str, list[pa.Table]] = field(default_factory=dict)
    complete: bool = False


async def capture(
    sources: Sequence[Source],
    start_us: int,
    end_us: int,
    *,
    grace_s: float = 60.0,
    clock: Callable[[], int] = wall_us,
) -> tuple[dict[str, pa.Table], list[str]]:
    """Rows of every stream with ``start_us <= time <= end_us``, and the names of the sources
    that did not reach ``end_us`` within ``grace_s``."""
    captures = [_Capture(source) for source in sources]

    async def run(part: _Capture) -> None:
        async with contextlib.aclosing(part.source.__aiter__()) as events:  # type: ignore[type-var]
            async for event in events:
                if isinstance(event, Batch):
                    rows = _within(pa.table(event.data), start_us, end_us)
                    if rows.num_rows:
                        part.tables.setdefault(event.stream, []).append(rows)
                elif isinstance(event, Watermark) and event.time >= end_us:
                    part.complete = True
                    return

    tasks = [asyncio.create_task(run(part)) for part in captures]
    wait_s = max(0.0, (end_us - clock()) / US) + grace_s
    done, pending = await asyncio.wait(tasks, timeout=wait_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        task.result()  # a source that failed for good (SourceError) ends the capture
    streams: dict[str, pa.Table] = {}
    for name in ("logs", "gpu", "scheduler"):
        parts = [t for part in captures for t in part.tables.get(name, [])]
        if parts:
            streams[name] = pa.concat_tables(parts)
    late = [part.source.name for part in captures if not part.complete]
    for name in late:
        log.warning(
            "record: %s did not reach %s within %.0f s; its rows may stop early",
            name,
            iso(end_us),
            grace_s,
        )
    return streams, late


def _within(table: pa.Table, start_us: int, end_us: int) -> pa.Table:
    times = table.column("time").cast(pa.int64())
    keep = pc.and_(pc.greater_equal(times, start_us), pc.less_equal(times, end_us))
    return table.filter(keep)


_RELATIVE = re.compile(r"^now(?:\s*([+-])\s*(\d+(?:\.\d+)?)\s*([smhd]))?$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_when(text: str, now_us: int) -> int:
    """An ISO-8601 time with a zone, ``now``, or ``now-10m`` / ``now+5m`` (s, m, h, d)."""
    match = _RELATIVE.match(text.strip())
    if match is None:
        try:
            return to_us(text)
        except ValueError as exc:
            raise RecordingError(f"{exc} (or use now, now-10m, now+5m)") from None
    sign, amount, unit = match.groups()
    if sign is None:
        return now_us
    delta = round(float(amount) * _UNIT_S[unit] * US)
    return now_us + delta if sign == "+" else now_us - delta


async def record(
    settings: Settings | Mapping[str, Any],
    start_us: int,
    end_us: int,
    out: Path,
    name: str | None = None,
    description: str = "",
    grace_s: float = 60.0,
) -> Recording:
    """Capture ``[start_us, end_us]`` from the sources of ``settings`` into ``out``."""
    if end_us <= start_us:
        raise RecordingError("the end of the range must come after its start")
    config = Settings.load(settings).sources
    async with httpx.AsyncClient() as client:
        sources = open_sources(config, client, start_us=start_us, until_us=end_us)
        streams, late = await capture(sources, start_us, end_us, grace_s=grace_s)
    recording = build_recording(
        name or out.name, start_us, end_us, streams, [s.name for s in sources], late, description
    )
    write_recording(out, recording)
    return recording


def build_recording(
    name: str,
    start_us: int,
    end_us: int,
    streams: dict[str, pa.Table],
    sources: Sequence[str],
    incomplete: Sequence[str],
    description: str = "",
) -> Recording:
    meta = make_meta(
        name,
        start_us,
        end_us,
        description=description,
        recorded_by="medic record",
        sources=list(sources),
        incomplete_sources=list(incomplete),
    )
    return Recording(
        meta=meta,
        logs=streams.get("logs", schema.empty(schema.LOGS)),
        gpu=streams.get("gpu", schema.empty(schema.GPU)),
        scheduler=streams.get("scheduler", schema.empty(schema.SCHEDULER)),
    )


def add_label(
    path: Path,
    job_id: str,
    kind: str,
    onset: str,
    culprit_nodes: Sequence[str] = (),
    culprit_ranks: Sequence[int] = (),
    note: str | None = None,
    incident_id: str | None = None,
) -> dict[str, Any]:
    """Append one label to the recording at ``path``; returns the row written."""
    recording = read_recording(path)
    if kind not in schema.DETECTION_KINDS:
        raise RecordingError(f"unknown kind {kind!r} (one of {', '.join(schema.DETECTION_KINDS)})")
    try:
        onset_us = to_us(onset)
    except ValueError as exc:
        raise RecordingError(f"onset: {exc}") from None
    labels = recording.labels if recording.labels is not None else schema.empty(schema.LABELS)
    taken = set(labels.column("incident_id").to_pylist())
    if incident_id is None:
        incident_id = next(
            f"{job_id}-{kind}-{n}"
            for n in range(1, len(taken) + 2)
            if f"{job_id}-{kind}-{n}" not in taken
        )
    elif incident_id in taken:
        raise RecordingError(f"{path}: a label with incident_id {incident_id!r} exists already")
    if not recording.start_us <= onset_us <= recording.end_us:
        raise RecordingError(
            f"onset {iso(onset_us)} lies outside the recording "
            f"({iso(recording.start_us)} to {iso(recording.end_us)})"
        )
    row = {
        "incident_id": incident_id,
        "job_id": job_id,
        "kind": kind,
        "onset": onset_us,
        "culprit_nodes": list(culprit_nodes),
        "culprit_ranks": list(culprit_ranks),
        "note": note,
    }
    added = pa.Table.from_pylist([row], schema=schema.LABELS)
    _write_labels(path, pa.concat_tables([labels, added]))
    return row


def remove_label(path: Path, incident_id: str) -> None:
    recording = read_recording(path)
    labels = recording.labels
    if labels is None or incident_id not in labels.column("incident_id").to_pylist():
        raise RecordingError(f"{path}: no label with incident_id {incident_id!r}")
    _write_labels(path, labels.filter(pc.not_equal(labels.column("incident_id"), incident_id)))


def _write_labels(path: Path, labels: pa.Table) -> None:
    pq.write_table(
        schema.conform(labels, schema.LABELS),
        Path(path) / TABLE_FILES["labels"],
        compression="zstd",
    )
