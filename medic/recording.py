"""Recordings (docs/recording-format.md): read, write, validate, find.

A recording is a directory with ``meta.json``, ``logs.parquet`` and optional ``gpu``,
``scheduler`` and ``labels`` parquet files. Readers accept either timestamp unit, tolerate
missing optional columns and ignore unknown ones (``schema.conform``); writers sort by time.
``validate_recording`` names every problem, one line each, and never raises; it reads each
file a batch at a time. ``open_recording`` leaves ``gpu.parquet`` on disk (a ``TableFile``) for
replays that must not hold an hour of thousands of GPUs in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyarrow.types as pat

from medic import schema
from medic.errors import exception_line
from medic.timeutil import iso, to_us

TABLE_FILES = {
    "logs": "logs.parquet",
    "gpu": "gpu.parquet",
    "scheduler": "scheduler.parquet",
    "labels": "labels.parquet",
}
REQUIRED_META = ("format", "name", "start", "end")
BATCH_ROWS = 131_072
"""Rows read from a parquet file at a time (a few MiB of telemetry)."""


class RecordingError(ValueError):
    """A recording cannot be read; the message is one line naming the file and the problem."""


@dataclass(frozen=True)
class TableFile:
    """A recording's parquet file left on disk and read a batch at a time, each batch in the
    canonical ``schema``: how a backtest replays ``gpu.parquet`` without holding it whole (an
    hour of 8,192 GPUs is ~30 M rows, over 2 GiB in memory). Validate the file before use."""

    path: Path
    schema: pa.Schema
    batch_rows: int = BATCH_ROWS

    @property
    def num_rows(self) -> int:
        return int(pq.read_metadata(self.path).num_rows)

    def batches(self, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
        """The rows in file order, ``batch_rows`` at a time (only ``columns`` when given)."""
        names = self.schema.names if columns is None else list(columns)
        target = pa.schema([self.schema.field(name) for name in names])
        with pq.ParquetFile(self.path) as parquet:
            for batch in parquet.iter_batches(self.batch_rows, columns=columns):
                yield schema.conform(batch, target)

    def time_bounds(self) -> tuple[int, int] | None:
        """First and last ``time``, read from the first and the last row group alone."""
        target = pa.schema([self.schema.field("time")])
        with pq.ParquetFile(self.path) as parquet:
            meta = parquet.metadata
            groups = [i for i in range(meta.num_row_groups) if meta.row_group(i).num_rows]
            if not groups:
                return None
            first, last = (
                time_us(schema.conform(parquet.read_row_group(i, columns=["time"]), target))
                for i in (groups[0], groups[-1])
            )
        return int(first[0]), int(last[-1])

    def read(self) -> pa.Table:
        """The whole file in memory."""
        return schema.conform(pq.read_table(self.path), self.schema)


@dataclass(frozen=True)
class Recording:
    """One recording, every table in its canonical schema: in memory, except ``gpu`` when
    ``open_recording`` left it on disk."""

    meta: dict[str, Any]
    logs: pa.Table
    gpu: pa.Table | TableFile = field(default_factory=lambda: schema.empty(schema.GPU))
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
        """The whole stream in memory (a stream left on disk is read whole: replay ``batches``)."""
        table: pa.Table | TableFile = getattr(self, name)
        return table.read() if isinstance(table, TableFile) else table

    def batches(self, name: str) -> Iterator[pa.Table]:
        """The stream's rows in time order: the table itself when in memory, else its file a
        batch at a time."""
        table: pa.Table | TableFile = getattr(self, name)
        return table.batches() if isinstance(table, TableFile) else iter([table])

    def num_rows(self, name: str) -> int:
        table: pa.Table | TableFile = getattr(self, name)
        return int(table.num_rows)

    def time_bounds(self, name: str) -> tuple[int, int] | None:
        """The stream's first and last event time; None when it has no rows."""
        table: pa.Table | TableFile = getattr(self, name)
        if isinstance(table, TableFile):
            return table.time_bounds()
        if table.num_rows == 0:
            return None
        times = table.column("time")
        return _scalar_us(times[0]), _scalar_us(times[-1])

    def distinct(self, name: str, column: str) -> pa.ChunkedArray:
        """The distinct values of one column of a stream (read batch by batch when on disk)."""
        table: pa.Table | TableFile = getattr(self, name)
        if isinstance(table, TableFile):
            parts = [pc.unique(batch.column(column)) for batch in table.batches([column])]
            return pa.chunked_array(parts, table.schema.field(column).type)
        return pa.chunked_array([pc.unique(table.column(column))])


def time_us(table: pa.Table, column: str = "time") -> np.ndarray:
    """A conformed table's time column as integer microseconds."""
    times: np.ndarray = table.column(column).cast(pa.int64()).to_numpy()
    return times


def _scalar_us(value: pa.Scalar) -> int:
    return int(value.cast(pa.int64()).as_py())


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
    times = time_us(table, column)
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
    """Read a recording directory whole into memory; raises RecordingError with the first
    problem found."""
    return _load(Path(path), on_disk=())


def open_recording(path: Path | str) -> Recording:
    """Read a recording directory but leave ``gpu.parquet`` on disk, to be read a batch at a
    time when replayed: what backtests use, so memory does not grow with the telemetry."""
    return _load(Path(path), on_disk=("gpu",))


def _load(root: Path, on_disk: Sequence[str]) -> Recording:
    problems = validate_recording(root)
    if problems:
        raise RecordingError(problems[0])
    meta = json.loads((root / "meta.json").read_text())
    tables: dict[str, pa.Table | TableFile | None] = {}
    for name, filename in TABLE_FILES.items():
        file = root / filename
        target = schema.SCHEMAS[name]
        if not file.exists():
            tables[name] = None if name == "labels" else schema.empty(target)
        elif name in on_disk:
            tables[name] = TableFile(file, target)
        else:
            tables[name] = schema.conform(pq.read_table(file), target)
    gpu = tables["gpu"]
    assert gpu is not None
    return Recording(
        meta=meta,
        logs=tables["logs"],
        gpu=gpu,
        scheduler=tables["scheduler"],
        labels=tables["labels"],
        path=root,
    )


def validate_recording(path: Path | str, batch_rows: int = BATCH_ROWS) -> list[str]:
    """Every problem with the recording at ``path``, one line each; empty when it is valid.
    Each file is read ``batch_rows`` rows at a time, never whole."""
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
        problems.extend(f"{file}: {p}" for p in _validate_table(file, name, batch_rows))
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


def _validate_table(file: Path, name: str, batch_rows: int) -> list[str]:
    try:
        parquet = pq.ParquetFile(file)
    except (pa.ArrowInvalid, OSError):
        return ["not a parquet file (cannot read its footer)"]
    with parquet:
        target = schema.SCHEMAS[name]
        problems = [
            problem
            for field_ in target
            if (problem := schema.column_problem(parquet.schema_arrow, field_.name, field_))
            is not None
        ]
        if problems:
            return problems
        read, nulls = _columns_to_read(parquet, name, target)
        rows = _RowChecks(name, pa.schema([target.field(c) for c in read]), nulls)
        try:
            for batch in parquet.iter_batches(batch_rows, columns=read):
                rows.add(batch)
        except schema.SchemaError as exc:
            return [str(exc)]
        except (pa.ArrowException, OSError) as exc:
            return [f"cannot read its rows ({exception_line(exc)})"]
    return rows.problems()


def _columns_to_read(
    parquet: pq.ParquetFile, name: str, target: pa.Schema
) -> tuple[list[str], dict[str, int]]:
    """The columns of ``target`` whose values a row check can find wrong, and the null counts
    of the required columns left unread (from the file's statistics). A column stored in its
    target type casts without fail and, when every row group counts its nulls, needs no
    reading: an hour of 8,192 GPUs is then checked by its times alone, not decoded twice (here
    and by the replay)."""
    if name == "labels":
        return target.names, {}
    stored = parquet.schema_arrow
    checked = {schema.TIME_COLUMN.get(name), KNOWN_VALUES.get(name, ("", ()))[0]}
    meta = parquet.metadata
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    read, nulls = [], {}
    for field_ in target:
        if field_.name not in stored.names:
            continue
        stored_type = stored.field(field_.name).type
        if pat.is_dictionary(stored_type):
            stored_type = stored_type.value_type
        if field_.name in checked or stored_type != field_.type:
            read.append(field_.name)
        elif not field_.nullable:
            counted = _null_count(meta, paths, field_.name)
            if counted is None:
                read.append(field_.name)
            else:
                nulls[field_.name] = counted
    return read, nulls


def _null_count(meta: pq.FileMetaData, paths: list[str], column: str) -> int | None:
    """``column``'s nulls summed over the row groups' statistics; None where one lacks them."""
    if column not in paths:
        return None
    index = paths.index(column)
    total = 0
    for group in range(meta.num_row_groups):
        statistics = meta.row_group(group).column(index).statistics
        if statistics is None or not statistics.has_null_count:
            return None
        total += statistics.null_count
    return total


KNOWN_VALUES: dict[str, tuple[str, tuple[str, ...]]] = {
    "logs": ("source", schema.LOG_SOURCES),
    "scheduler": ("kind", ("job", "node")),
}
"""Per table: the column whose values must be among those listed."""


class _RowChecks:
    """The checks of one table's rows, fed a batch at a time, with the messages a check of the
    whole table would give: required columns without nulls, time order, known values."""

    def __init__(self, name: str, target: pa.Schema, nulls: dict[str, int]) -> None:
        """``target``: the columns read; ``nulls``: those of required columns left unread."""
        self.name = name
        # Casts are checked per batch; nulls in required columns are counted over the file.
        self.cast_to = pa.schema([f.with_nullable(True) for f in target])
        self.required = [f.name for f in schema.SCHEMAS[name] if not f.nullable]
        self.nulls = {c: nulls.get(c, 0) for c in self.required}
        self.counted = [c for c in self.required if c not in nulls]
        self.time_column = schema.TIME_COLUMN.get(name)
        self.rows = 0
        self.last_time = int(np.iinfo(np.int64).min)
        self.unsorted = 0
        self.first_unsorted: int | None = None
        self.values: set[str] = set()
        self.labels: list[pa.Table] = []

    def add(self, batch: pa.RecordBatch) -> None:
        table = schema.conform(batch, self.cast_to)
        for column in self.counted:
            self.nulls[column] += table.column(column).null_count
        if not any(self.nulls.values()):
            self._check(table)
        self.rows += table.num_rows

    def _check(self, table: pa.Table) -> None:
        if self.time_column:
            # Led by the previous batch's last time, so that index i of the pairs is row rows + i.
            times = np.concatenate([[self.last_time], time_us(table, self.time_column)])
            unsorted = np.flatnonzero(times[1:] < times[:-1])
            if unsorted.size:
                self.unsorted += unsorted.size
                if self.first_unsorted is None:
                    self.first_unsorted = self.rows + int(unsorted[0])
            self.last_time = int(times[-1])
        if self.name in KNOWN_VALUES:
            column, _ = KNOWN_VALUES[self.name]
            self.values.update(pc.unique(table.column(column)).to_pylist())
        if self.name == "labels":
            self.labels.append(table)

    def problems(self) -> list[str]:
        nulls = [f"column '{c}' has {n} null values" for c, n in self.nulls.items() if n]
        if nulls:
            return nulls[:1]
        problems = []
        if self.unsorted:
            problems.append(
                f"rows not sorted by {self.time_column} "
                f"({self.unsorted} out of order, first at row {self.first_unsorted})"
            )
        if self.name in KNOWN_VALUES:
            column, allowed = KNOWN_VALUES[self.name]
            problems.extend(_validate_values(self.values, column, allowed))
        if self.name == "labels":
            problems.extend(
                _validate_labels(pa.concat_tables([self.cast_to.empty_table(), *self.labels]))
            )
        return problems


def _validate_values(values: set[str], column: str, allowed: Iterable[str]) -> list[str]:
    allowed = tuple(allowed)
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
        found.extend(_recordings_under(path))
    unique = dict.fromkeys(found)
    return list(unique)


def _recordings_under(root: Path) -> list[Path]:
    """The recording directories below ``root``, sorted, through linked directories too (a suite
    picked as links to recordings kept elsewhere), each real directory once (a link loop ends)."""
    found, seen = [], set()
    for top, dirs, files in os.walk(root, followlinks=True):
        real = Path(top).resolve()
        if real in seen:
            dirs.clear()
            continue
        seen.add(real)
        if "meta.json" in files and Path(top) != root:
            found.append(Path(top))
    return sorted(found)
