"""The Source seam: streams of time-sorted Arrow batches interleaved with watermarks.

A ``Batch`` is a ``pyarrow.RecordBatch`` in one of the schemas of ``medic.schema`` (or a
derived stream produced by a parser), tagged with its stream name. A ``Watermark`` says the
source is complete up to that event time: no row with an earlier time will follow.

A parser makes its output in polars, and the detectors read it in polars: such a batch
(``Batch.from_frame``) builds its Arrow form only when something asks for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from medic.schema import conform


@dataclass(frozen=True, eq=False)
class Batch:
    """Rows of one stream, sorted by event time."""

    stream: str
    data: pa.RecordBatch | pa.Table

    @classmethod
    def with_frame(cls, stream: str, data: pa.RecordBatch | pa.Table, frame: pl.DataFrame) -> Batch:
        """A batch whose polars view is already at hand (``frame`` holds the rows of ``data``,
        e.g. a slice of a frame converted once for many batches)."""
        batch = cls(stream, data)
        batch.__dict__["frame"] = frame
        return batch

    @classmethod
    def from_frame(cls, stream: str, frame: pl.DataFrame, schema: pa.Schema) -> Batch:
        """A batch made in polars, as ``schema`` (an Arrow schema) reads in polars: its Arrow
        form is built the first time ``data`` is read. A frame of other dtypes is converted
        now, through ``schema``."""
        if frame.schema != polars_schema(schema):
            return cls(stream, conform(frame.to_arrow(), schema))
        return _FrameFirst(stream, frame, schema)

    @classmethod
    def from_frames(
        cls, stream: str, frames: Sequence[pl.DataFrame], schema: pa.Schema
    ) -> list[Batch]:
        """``from_frame`` for each of ``frames``, all of one polars schema (parts of one frame),
        checked against ``schema`` once."""
        if not frames or frames[0].schema != polars_schema(schema):
            return [cls.from_frame(stream, frame, schema) for frame in frames]
        return [_FrameFirst(stream, frame, schema) for frame in frames]

    @cached_property
    def frame(self) -> pl.DataFrame:
        """The rows as a polars DataFrame, converted once and shared by every consumer."""
        frame = pl.from_arrow(self.data)
        assert isinstance(frame, pl.DataFrame)
        return frame

    @property
    def num_rows(self) -> int:
        return int(self.data.num_rows)

    def sliced(self, offset: int, length: int) -> Batch:
        """Rows ``offset`` to ``offset + length`` (its polars frame sliced too)."""
        frame = self.frame.slice(offset, length)
        return Batch.with_frame(self.stream, self.data.slice(offset, length), frame)

    def without_jobs(self, job_ids: Collection[str]) -> Batch:
        """The rows whose ``job_id`` is not one of ``job_ids`` (all of them when the stream has
        no job ids, or none of its rows is one of them)."""
        if not job_ids or "job_id" not in self.data.schema.names:
            return self
        mask = self.frame.select(~pl.col("job_id").is_in(list(job_ids)).fill_null(False))
        keep = mask.to_series()
        if keep.all():
            return self
        return Batch.with_frame(
            self.stream, self.data.filter(keep.to_arrow()), self.frame.filter(keep)
        )

    def retimed(self, time: pl.Series) -> Batch:
        """The same rows with ``time`` (as many values, in the time column's dtype) as their
        event times."""
        table = self.data if isinstance(self.data, pa.Table) else pa.Table.from_batches([self.data])
        column = table.schema.get_field_index("time")
        data = table.set_column(column, table.schema.field(column), time.to_arrow())
        return Batch.with_frame(self.stream, data, self.frame.with_columns(time))

    @cached_property
    def max_time(self) -> int | None:
        """The newest event time in the batch (microseconds), None when it is empty. Read from
        the polars view when the batch has one (a replay's batches do): a numpy maximum over
        the column's integers costs a fraction of an Arrow compute call. A timestamp's
        maximum is read as its integer, not cast first: casting the column costs more than
        the maximum."""
        frame = self.__dict__.get("frame")
        if frame is not None:
            return _newest_time(frame)
        at = self.data.schema.get_field_index("time")
        if self.num_rows == 0 or at < 0:
            return None
        column = self.data.column(at)
        if pa.types.is_timestamp(column.type):
            value = pc.max(column).value
        else:
            value = pc.max(column.cast(pa.int64())).as_py()
        return None if value is None else int(value)


class _FrameFirst(Batch):
    """A batch whose polars frame came first (``Batch.from_frame``)."""

    def __init__(self, stream: str, frame: pl.DataFrame, schema: pa.Schema) -> None:
        self.__dict__.update(stream=stream, frame=frame, _schema=schema)

    @cached_property
    def data(self) -> pa.Table:
        return conform(self.frame.to_arrow(), self.__dict__["_schema"])

    @property
    def num_rows(self) -> int:
        return self.frame.height

    @cached_property
    def max_time(self) -> int | None:
        return _newest_time(self.frame)

    def retimed(self, time: pl.Series) -> Batch:
        return _FrameFirst(self.stream, self.frame.with_columns(time), self.__dict__["_schema"])

    def sliced(self, offset: int, length: int) -> Batch:
        return _FrameFirst(self.stream, self.frame.slice(offset, length), self.__dict__["_schema"])


def _newest_time(frame: pl.DataFrame) -> int | None:
    """The largest ``time`` of ``frame`` as its physical integer (None when it has none): a
    timestamp column without nulls read through numpy, as ``to_physical`` is a query."""
    if frame.is_empty() or "time" not in frame.columns:
        return None
    column = frame.get_column("time")
    if isinstance(column.dtype, pl.Datetime) and not column.null_count():
        return int(column.to_numpy().view(np.int64).max())
    value = column.to_physical().max()
    return None if value is None else int(value)  # type: ignore[arg-type]


@cache
def polars_schema(schema: pa.Schema) -> pl.Schema:
    """The dtypes polars reads an Arrow ``schema`` as."""
    return pl.DataFrame(schema.empty_table()).schema


@dataclass(frozen=True)
class Watermark:
    """Event time (microseconds) up to which a source has delivered every row."""

    time: int


Event = Batch | Watermark


@runtime_checkable
class Source(Protocol):
    """A live or replayed input: an async stream of events plus a resumable cursor."""

    name: str

    def __aiter__(self) -> AsyncIterator[Event]: ...

    def checkpoint(self) -> dict[str, Any]:
        """A JSON-serialisable cursor from which the source resumes without gap or duplicate."""
        ...
