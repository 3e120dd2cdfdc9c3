"""Arrow schemas of every table medic reads or writes: the one place they are defined.

The columns follow docs/recording-format.md (format ``medic-recording/1``) exactly;
``actions`` is medic's own audit table. ``conform`` turns any table a reader was handed
(either timestamp unit, ``large_string``, missing optional columns, unknown extras)
into the canonical schema, and names the first column it cannot accept.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources

import pyarrow as pa
import pyarrow.types as pat

TIME = pa.timestamp("us", tz="UTC")
STRING_LIST = pa.list_(pa.string())
INT32_LIST = pa.list_(pa.int32())

STREAMS = ("logs", "gpu", "scheduler")
KIND_HORIZONS_S: dict[str, float] = {
    kind: float(table["horizon_s"])
    for kind, table in tomllib.loads(
        resources.files("medic").joinpath("kinds.toml").read_text()
    ).items()
}
"""Each detection kind and the scoring horizon of its labels, in seconds (``kinds.toml``)."""
DETECTION_KINDS = tuple(KIND_HORIZONS_S)
SUSPECT, CONFIRMED = "suspect", "confirmed"
DETECTION_TIERS = (SUSPECT, CONFIRMED)
"""A detection's tier: ``suspect`` (silence or slowness alone: logged and notified, not acted
on by the default rules) or ``confirmed`` (positive evidence, or silence past the job's own
conservative bound)."""
LOG_SOURCES = ("app", "system", "slurm")
FORMAT = "medic-recording/1"


def _field(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


LOGS = pa.schema(
    [
        _field("time", TIME, False),
        _field("job_id", pa.string()),
        _field("node", pa.string(), False),
        _field("rank", pa.int32()),
        _field("source", pa.string(), False),
        _field("message", pa.string(), False),
    ]
)

GPU = pa.schema(
    [
        _field("time", TIME, False),
        _field("node", pa.string(), False),
        _field("gpu", pa.int16(), False),
        _field("job_id", pa.string()),
        _field("util", pa.float32()),
        _field("mem_used_mib", pa.float32()),
        _field("power_w", pa.float32()),
        _field("temp_c", pa.float32()),
        _field("sm_clock_mhz", pa.float32()),
        _field("throttle_reasons", pa.int64()),
        _field("ecc_dbe", pa.int64()),
        _field("ecc_sbe", pa.int64()),
        _field("xid", pa.int32()),
        _field("pcie_replay", pa.int64()),
        _field("nvlink_errors", pa.int64()),
        _field("ib_errors", pa.int64()),
        _field("ib_link_downed", pa.int64()),
    ]
)

SCHEDULER = pa.schema(
    [
        _field("time", TIME, False),
        _field("kind", pa.string(), False),
        _field("job_id", pa.string()),
        _field("node", pa.string()),
        _field("state", pa.string(), False),
        _field("nodes", STRING_LIST),
        _field("exit_code", pa.int32()),
        _field("reason", pa.string()),
    ]
)

LABELS = pa.schema(
    [
        _field("incident_id", pa.string(), False),
        _field("job_id", pa.string(), False),
        _field("kind", pa.string(), False),
        _field("onset", TIME, False),
        _field("culprit_nodes", STRING_LIST, False),
        _field("culprit_ranks", INT32_LIST, False),
        _field("note", pa.string()),
    ]
)

DETECTIONS = pa.schema(
    [
        _field("detected_at", TIME, False),
        _field("job_id", pa.string()),
        _field("kind", pa.string(), False),
        _field("culprits", STRING_LIST, False),
        _field("ranks", INT32_LIST, False),
        _field("score", pa.float64(), False),
        _field("detector", pa.string(), False),
        _field("summary", pa.string(), False),
    ]
)

DETECTIONS_WRITTEN = DETECTIONS.append(_field("raw_score", pa.float64())).append(
    _field("tier", pa.string())
)
"""What medic writes to ``detections.parquet``: the spec's columns, then ``raw_score``, the
detector's evidence score before calibration (``medic.calibration``; ``score`` is then the
calibrated one), and ``tier``: ``confirmed`` or ``suspect`` (null in files written before
tiers: confirmed). Readers ignore columns they do not know, as the spec says."""

ACTIONS = pa.schema(
    [
        _field("time", TIME, False),
        _field("detection_id", pa.string(), False),
        _field("job_id", pa.string()),
        _field("node", pa.string()),
        _field("action", pa.string(), False),
        _field("mode", pa.string(), False),
        _field("status", pa.string(), False),
        _field("guard", pa.string()),
        _field("reason", pa.string(), False),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "logs": LOGS,
    "gpu": GPU,
    "scheduler": SCHEDULER,
    "labels": LABELS,
    "detections": DETECTIONS,
    "actions": ACTIONS,
}

# The time column each table is sorted by (labels are not required to be sorted).
TIME_COLUMN = {
    "logs": "time",
    "gpu": "time",
    "scheduler": "time",
    "detections": "detected_at",
    "actions": "time",
}


class SchemaError(ValueError):
    """A table cannot be read as the expected schema; the message names the column."""


@dataclass(frozen=True)
class _Kind:
    """What a column of the canonical schema accepts when reading."""

    test: str

    def accepts(self, type_: pa.DataType) -> bool:
        if self.test == "time":
            return bool(pat.is_timestamp(type_) and _is_utc(type_))
        if self.test == "string":
            return _is_stringish(type_)
        if self.test == "int":
            return bool(pat.is_integer(type_))
        if self.test == "float":
            return bool(pat.is_floating(type_) or pat.is_integer(type_))
        if self.test in ("list<string>", "list<int>"):
            if not (pat.is_list(type_) or pat.is_large_list(type_)):
                return False
            inner = type_.value_type
            if pat.is_null(inner):
                return True
            return _is_stringish(inner) if self.test == "list<string>" else pat.is_integer(inner)
        raise AssertionError(self.test)


def _is_utc(type_: pa.TimestampType) -> bool:
    return type_.tz in ("UTC", "utc", "Etc/UTC", "+00:00", "Z")


def _is_stringish(type_: pa.DataType) -> bool:
    if pat.is_dictionary(type_):
        return _is_stringish(type_.value_type)
    return bool(pat.is_string(type_) or pat.is_large_string(type_) or pat.is_string_view(type_))


def _kind_of(type_: pa.DataType) -> _Kind:
    if pat.is_timestamp(type_):
        return _Kind("time")
    if pat.is_string(type_):
        return _Kind("string")
    if pat.is_integer(type_):
        return _Kind("int")
    if pat.is_floating(type_):
        return _Kind("float")
    if pat.is_list(type_):
        return _Kind("list<string>" if pat.is_string(type_.value_type) else "list<int>")
    raise AssertionError(type_)


def describe(type_: pa.DataType) -> str:
    """How the spec names a type, for error messages."""
    kind = _kind_of(type_).test
    return "timestamp[us or ns, tz=UTC]" if kind == "time" else str(type_)


def column_problem(table_schema: pa.Schema, name: str, target: pa.Field) -> str | None:
    """Why column ``name`` of a table cannot be read as ``target``; None when it can."""
    if name not in table_schema.names:
        return None if target.nullable else f"missing required column '{name}'"
    type_ = table_schema.field(name).type
    if pat.is_null(type_):
        return None if target.nullable else f"column '{name}' is all null"
    if not _kind_of(target.type).accepts(type_):
        return f"column '{name}' has type {type_}, expected {describe(target.type)}"
    return None


def conform(table: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """Return ``table`` in exactly ``schema``: casts units, fills missing optional columns with
    nulls, drops unknown columns. Raises SchemaError naming the first unacceptable column."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    columns = []
    for target in schema:
        problem = column_problem(table.schema, target.name, target)
        if problem:
            raise SchemaError(problem)
        if target.name not in table.schema.names:
            columns.append(pa.nulls(table.num_rows, target.type))
            continue
        column = table.column(target.name)
        if pat.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if column.type != target.type:
            try:
                # ns -> us truncates sub-microsecond digits on purpose; other casts stay safe.
                column = column.cast(target.type, safe=not pat.is_timestamp(target.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(
                    f"column '{target.name}' cannot be cast to {target.type}: {exc}"
                ) from None
        if not target.nullable and column.null_count:
            raise SchemaError(f"column '{target.name}' has {column.null_count} null values")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def empty(schema: pa.Schema) -> pa.Table:
    """A zero-row table of ``schema``."""
    return schema.empty_table()
