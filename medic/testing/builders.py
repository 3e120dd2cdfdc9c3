"""Builders for small hand-made tables, batches and recordings in tests.

Times are event times in microseconds, written as seconds after ``T0`` (``at(1.5)``). A row is
a dict with the schema's column names (``medic.schema``); a column left out of a nullable
field is null. ``batch("logs", [log(0, "NCCL WARN ...")])`` is one batch of the ``logs``
stream; ``gpu_latest([gpu_sample(0, "n1", 0, util=99.0)])`` the frame of each GPU's newest
state; ``recording(logs=[...], gpu=[...], scheduler=[...], labels=[...])`` a recording to
replay (``write`` puts it on disk in the recording format).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from medic import schema
from medic.ingest.base import Batch
from medic.parse.gpu_latest import GpuLatestParser
from medic.recording import Recording, make_meta, write_recording
from medic.timeutil import US, iso, to_us

T0 = to_us("2026-03-01T10:00:00Z")


def at(seconds: float) -> int:
    """Event time ``seconds`` after T0, in microseconds."""
    return T0 + round(seconds * US)


def table(name: str, rows: Sequence[dict[str, Any]]) -> pa.Table:
    """A table of schema ``name`` from row dicts; omitted nullable columns are null."""
    target = schema.SCHEMAS[name]
    columns = {f.name: [row.get(f.name) for row in rows] for f in target}
    return pa.Table.from_pydict(columns, schema=target)


def batch(name: str, rows: Sequence[dict[str, Any]]) -> Batch:
    return Batch(name, table(name, rows))


def log(
    t: float, message: str, node: str = "n1", job_id: str | None = "100", **extra: Any
) -> dict[str, Any]:
    return {
        "time": at(t),
        "job_id": job_id,
        "node": node,
        "source": "app",
        "message": message,
        **extra,
    }


def gpu_sample(t: float, node: str, gpu: int, **fields: Any) -> dict[str, Any]:
    """A ``gpu`` telemetry row: GPU ``gpu`` of ``node`` at ``t``, with ``fields``
    (``util=99.0``, ``xid=79``, ``job_id="7"``)."""
    return {"time": at(t), "node": node, "gpu": gpu, **fields}


def gpu_latest(rows: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """The ``gpu_latest`` frame the parser makes of ``gpu`` rows: each GPU's newest state."""
    parsed = GpuLatestParser().parse(batch("gpu", rows))
    assert parsed is not None, "gpu_latest parses every gpu batch"
    return parsed.frame


def label(
    incident_id: str,
    kind: str,
    onset_s: float,
    job_id: str = "100",
    culprits: Sequence[str] = (),
    ranks: Sequence[int] = (),
) -> dict[str, Any]:
    return {
        "incident_id": incident_id,
        "job_id": job_id,
        "kind": kind,
        "onset": at(onset_s),
        "culprit_nodes": list(culprits),
        "culprit_ranks": list(ranks),
        "note": None,
    }


def detection(
    t: float, kind: str = "crash", job_id: str | None = "100", culprits: Sequence[str] = ()
) -> dict[str, Any]:
    return {
        "detected_at": at(t),
        "job_id": job_id,
        "kind": kind,
        "culprits": list(culprits),
        "ranks": [],
        "score": 1.0,
        "detector": "test",
        "summary": "test detection",
    }


def recording(
    duration_s: float = 60,
    logs: Sequence[dict[str, Any]] = (),
    gpu: Sequence[dict[str, Any]] = (),
    scheduler: Sequence[dict[str, Any]] = (),
    labels: Sequence[dict[str, Any]] | None = None,
    name: str = "test",
) -> Recording:
    return Recording(
        meta=make_meta(name, T0, at(duration_s)),
        logs=table("logs", logs),
        gpu=table("gpu", gpu),
        scheduler=table("scheduler", scheduler),
        labels=None if labels is None else table("labels", labels),
    )


def write(path: Path, rec: Recording) -> Path:
    return write_recording(path, rec)


def excerpt(rec: Recording, lead_s: float = 300, tail_s: float = 600) -> Recording:
    """The part of a labelled recording around its incidents: from ``lead_s`` before the first
    onset (the history a detector learns a job's rhythm from) to ``tail_s`` after the last.
    Scheduler rows are changes, so the newest one per job and per node before the cut is kept,
    moved to the cut, as the state the excerpt starts in. A recording without labels is whole."""
    if rec.labels is None or rec.labels.num_rows == 0:
        return rec
    onsets = pc.min_max(rec.labels.column("onset").cast(pa.int64()))
    start = max(rec.start_us, onsets["min"].as_py() - round(lead_s * US))
    end = min(rec.end_us, onsets["max"].as_py() + round(tail_s * US))

    def within(table: pa.Table) -> pa.Table:
        times = table.column("time").cast(pa.int64())
        return table.filter(pc.and_(pc.greater_equal(times, start), pc.less(times, end)))

    scheduler = rec.stream("scheduler")
    times = scheduler.column("time").cast(pa.int64())
    before = scheduler.filter(pc.less(times, start)).to_pylist()
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in before:  # a few rows per job and node: the state the excerpt starts in
        state[(row["kind"], row["job_id"], row["node"])] = {**row, "time": start}
    opening = pa.Table.from_pylist(list(state.values()), schema.SCHEDULER)
    return Recording(
        meta={**rec.meta, "start": iso(start), "end": iso(end)},
        logs=within(rec.stream("logs")),
        gpu=within(rec.stream("gpu")),
        scheduler=pa.concat_tables([opening, within(scheduler)]),
        labels=rec.labels,
        path=None,
    )
