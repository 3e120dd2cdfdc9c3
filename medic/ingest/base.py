"""The Source seam: streams of time-sorted Arrow batches interleaved with watermarks.

A ``Batch`` is a ``pyarrow.RecordBatch`` in one of the schemas of ``medic.schema`` (or a
derived stream produced by a parser), tagged with its stream name. A ``Watermark`` says the
source is complete up to that event time: no row with an earlier time will follow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc


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

    @cached_property
    def frame(self) -> pl.DataFrame:
        """The rows as a polars DataFrame, converted once and shared by every consumer."""
        frame = pl.from_arrow(self.data)
        assert isinstance(frame, pl.DataFrame)
        return frame

    @property
    def num_rows(self) -> int:
        return int(self.data.num_rows)

    @cached_property
    def max_time(self) -> int | None:
        """The newest event time in the batch (microseconds), None when it is empty."""
        if self.num_rows == 0 or "time" not in self.data.schema.names:
            return None
        value = pc.max(self.data.column("time").cast(pa.int64())).as_py()
        return None if value is None else int(value)


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
