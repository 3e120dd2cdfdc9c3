"""Recordings (../shared/spec/recording.md): read, write, validate, find.

A recording is a directory with ``meta.json``, ``logs.parquet`` and optional ``gpu``,
``scheduler`` and ``labels`` parquet files. Readers accept either timestamp unit, tolerate
missing optional columns and ignore unknown ones (``schema.conform``); writers sort by time.
``validate_recording`` names every problem, one line each, and never raises.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from medic import schema
from medic.timeutil import iso, to_us

TABLE_FILES = {
    "logs": "logs.parquet",
    "gpu": "gpu.parquet",
    "scheduler": "scheduler.parquet",
    "labels": "labels.parquet",
}
REQUIRED_META = ("format", "name", "start", "end")


class RecordingError(ValueError):
    """A recording cannot be read; the message is one line naming the file and the problem."""


@dataclass(frozen=True)
class Recording:
    """One recording held in memory, every table in its canonical schema."""

    meta: dict[str, Any]
    logs: pa.Table
    gpu: pa.Table = field(default_factory=lambda: schema.empty(schema.GPU))
    scheduler: pa.Table = field(default_factory=lambda: schema.empty(schema.SCHEDULER))
    labels: pa.Table | None = None
    path: Path | None = None

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or (self.path.name if self.path else "recording"))

    @property
    def start_us(self) -> int:
        return to_us(str(self.meta["start"]))

    @property
    def end_us(self) -> int:
        return to_us(str(self.meta["end"]))

    def stream(self, name: str) -> pa.Table:
        table: pa.Table = getattr(self, name)
        return table


def make_meta(name: str, start_us: int, end_us: int, **extra: Any) -> dict[str, Any]:
    """meta.json content for a new recording; extra keys (seed, parameters) are kept."""
    return {
        "format": schema.FORMAT,
        "name": name,
        "description": extra.pop("description", ""),
        "start": iso(start_us),
        "end": iso(end_us),
        **extra,
    }


def sort_by_time(table: pa.Table, column: str = "time") -> pa.Table:
    """Stable sort by the time column (writers must write sorted rows)."""
    if table.num_rows < 2:
        return table
    times = table.column(column).cast(pa.int64()).to_numpy()
    if bool(np.all(times[1:] >= times[:-1])):
        return table
    return table.take(pa.array(np.argsort(times, kind="stable")))


def write_recording(path: Path | str, recording: Recording) -> Path:
    """Write ``recording`` as a directory at ``path`` (created if needed)."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").write_text(json.dumps(recording.meta, indent=2) + "\n")
    for name in ("logs", "gpu", "scheduler"):
        table = sort_by_time(schema.conform(recording.stream(name), schema.SCHEMAS[name]))
        pq.write_table(table, out / TABLE_FILES[name], compression="zstd")
    labels_file = out / TABLE_FILES["labels"]
    if recording.labels is not None:
        labels = schema.conform(recording.labels, schema.LABELS)
        pq.write_table(labels, labels_file, compression="zstd")
    elif labels_file.exists():
        labels_file.unlink()
    return out


def read_recording(path: Path | str) -> Recording:
    """Read a recording directory; raises RecordingError with the first problem found."""
    root = Path(path)
    problems = validate_recording(root)
    if problems:
        raise RecordingError(problems[0])
    meta = json.loads((root / "meta.json").read_text())
    tables: dict[str, pa.Table | None] = {}
    for name, filename in TABLE_FILES.items():
        file = root / filename
        if file.exists():
            tables[name] = schema.conform(pq.read_table(file), schema.SCHEMAS[name])
        else:
            tables[name] = None if name == "labels" else schema.empty(schema.SCHEMAS[name])
    return Recording(
        meta=meta,
        logs=tables["logs"],
        gpu=tables["gpu"],
        scheduler=tables["scheduler"],
        labels=tables["labels"],
        path=root,
    )


def validate_recording(path: Path | str) -> list[str]:
    """Every problem with the recording at ``path``, one line each; empty when it is valid."""
    root = Path(path)
    if not root.is_dir():
        return [f"{root}: not a directory"]
    problems = _validate_meta(root)
    for name, filename in TABLE_FILES.items():
        file = root / filename
        if not file.exists():
            if name == "logs":
                problems.append(f"{file}: missing (logs.parquet is required)")
            continue
        problems.extend(f"{file}: {p}" for p in _validate_table(file, name))
    return problems


def _validate_meta(root: Path) -> list[str]:
    file = root / "meta.json"
    if not file.exists():
        return [f"{file}: missing"]
    try:
        meta = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return [f"{file}: not valid JSON ({exc})"]
    if not isinstance(meta, dict):
        return [f"{file}: must hold a JSON object"]
    problems = [f"{file}: missing key '{key}'" for key in REQUIRED_META if key not in meta]
    fmt = meta.get("format")
    if "format" in meta and fmt != schema.FORMAT:
        problems.append(f"{file}: unknown format version {fmt!r} (expected {schema.FORMAT!r})")
    bounds = []
    for key in ("start", "end"):
        if key in meta:
            try:
                bounds.append(to_us(str(meta[key])))
            except ValueError as exc:
                problems.append(f"{file}: '{key}': {exc}")
    if len(bounds) == 2 and bounds[1] < bounds[0]:
        problems.append(f"{file}: 'end' is before 'start'")
    return problems


def _validate_table(file: Path, name: str) -> list[str]:
    try:
        table = pq.read_table(file)
    except (pa.ArrowInvalid, OSError):
        return ["not a parquet file (cannot read its footer)"]
    target = schema.SCHEMAS[name]
    problems = [
        problem
        for field_ in target
        if (problem := schema.column_problem(table.schema, field_.name, field_)) is not None
    ]
    if problems:
        return problems
    try:
        table = schema.conform(table, target)
    except schema.SchemaError as exc:
        return [str(exc)]
    time_column = schema.TIME_COLUMN.get(name)
    if time_column and table.num_rows > 1:
        times = table.column(time_column).cast(pa.int64()).to_numpy()
        unsorted = np.flatnonzero(times[1:] < times[:-1])
        if unsorted.size:
            row = int(unsorted[0]) + 1
            problems.append(
                f"rows not sorted by {time_column} "
                f"({unsorted.size} out of order, first at row {row})"
            )
    if name == "labels":
        problems.extend(_validate_labels(table))
    if name == "logs":
        problems.extend(_validate_values(table, "source", schema.LOG_SOURCES))
    if name == "scheduler":
        problems.extend(_validate_values(table, "kind", ("job", "node")))
    return problems


def _validate_values(table: pa.Table, column: str, allowed: Iterable[str]) -> list[str]:
    allowed = tuple(allowed)
    values = pc.unique(table.column(column)).to_pylist()
    bad = sorted(v for v in values if v not in allowed)
    if not bad:
        return []
    return [f"column '{column}' has unknown value(s) {', '.join(map(repr, bad[:5]))}"]


def _validate_labels(table: pa.Table) -> list[str]:
    problems = []
    for row, (incident, kind) in enumerate(
        zip(
            table.column("incident_id").to_pylist(),
            table.column("kind").to_pylist(),
            strict=True,
        )
    ):
        if kind not in schema.DETECTION_KINDS:
            known = ", ".join(schema.DETECTION_KINDS)
            problems.append(f"label {incident!r} (row {row}) has unknown kind {kind!r} ({known})")
    ids = table.column("incident_id").to_pylist()
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        problems.append(f"duplicate incident_id {duplicates[0]!r}")
    return problems


def find_recordings(paths: Iterable[Path | str]) -> list[Path]:
    """Expand paths into recording directories: a recording is a directory with meta.json;
    a directory without one is searched recursively. Sorted, without duplicates."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (path / "meta.json").exists() or not path.is_dir():
            found.append(path)
            continue
        found.extend(sorted(meta.parent for meta in path.rglob("meta.json")))
    unique = dict.fromkeys(found)
    return list(unique)
