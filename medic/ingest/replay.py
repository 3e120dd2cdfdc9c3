"""Replay a recording as live traffic: its three streams merged in time order into bounded
batches, with a watermark at least once per second of event time, through silence too.

Event time is cut into windows of ``span_s`` (at most one second). Every window yields the
rows of each stream that fall in it (split further at ``max_rows``), ordered by their first
row's time, and then the watermark at the window's end. Time-based detectors (hangs, silent
nodes) therefore see time pass exactly as they would live.

Each stream is read as the recording hands it out (``Recording.batches``): a table held in
memory, or a file on disk a batch at a time, so a replay holds only the rows of the windows it
is cutting, however long the recording.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import polars as pl
import pyarrow as pa

from medic.config import PositiveCount, Range
from medic.ingest.base import Batch, Event, Watermark
from medic.recording import Recording, time_us
from medic.schema import STREAMS
from medic.timeutil import US


@dataclass(frozen=True)
class ReplayConfig:
    """``[replay]``: how a recording is cut into batches for a backtest."""

    max_rows: PositiveCount = 65_536
    """Largest batch handed to the pipeline."""
    span_s: Annotated[float, Range(gt=0, le=1)] = 1.0
    """Event time covered by one window; watermarks advance by this much (at most 1 s)."""


class _Cutter:
    """One stream's rows, read a piece at a time and handed out window by window. Each piece is
    converted to polars once; a window's batch carries its slice of that frame, so consumers do
    not convert every batch again."""

    def __init__(self, stream: str, pieces: Iterator[pa.Table]) -> None:
        self._stream = stream
        self._pieces = pieces
        self._rows: pa.Table | None = None
        self._frame: pl.DataFrame | None = None
        self._times = np.empty(0, dtype=np.int64)
        self._exhausted = False

    def before(self, edge: int, max_rows: int) -> list[Batch]:
        """Batches of at most ``max_rows`` of the rows not handed out yet whose time is before
        ``edge``."""
        while not self._exhausted and (self._times.size == 0 or self._times[-1] < edge):
            piece = next(self._pieces, None)
            if piece is None:
                self._exhausted = True
            elif piece.num_rows:
                rows = [piece] if self._rows is None else [self._rows, piece]
                self._rows = pa.concat_tables(rows)
                frames = [_frame(piece)] if self._frame is None else [self._frame, _frame(piece)]
                self._frame = pl.concat(frames, rechunk=False)
                self._times = np.concatenate([self._times, time_us(piece)])
        cut = int(np.searchsorted(self._times, edge, side="left"))
        if cut == 0 or self._rows is None or self._frame is None:
            return []
        batches = [
            Batch.with_frame(
                self._stream,
                self._rows.slice(lo, min(max_rows, cut - lo)),
                self._frame.slice(lo, min(max_rows, cut - lo)),
            )
            for lo in range(0, cut, max_rows)
        ]
        self._rows, self._frame = self._rows.slice(cut), self._frame.slice(cut)
        self._times = self._times[cut:]
        return batches


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


class ReplaySource:
    """A recording as a time-ordered stream of batches and watermarks."""

    def __init__(self, recording: Recording, config: ReplayConfig | None = None) -> None:
        self.recording = recording
        self.config = config or ReplayConfig()
        self.name = f"replay:{recording.name}"
        self.watermark: int | None = None

    def bounds(self) -> tuple[int, int]:
        """First and last event time to replay: the recording's span, widened to its rows."""
        rows = [b for s in STREAMS if (b := self.recording.time_bounds(s)) is not None]
        starts = [self.recording.start_us] + [first for first, _ in rows]
        ends = [self.recording.end_us] + [last + 1 for _, last in rows]
        return min(starts), max(ends)

    def __iter__(self) -> Iterator[Event]:
        start, end = self.bounds()
        span = max(1, round(self.config.span_s * US))
        edges = np.arange(start, end + span, span, dtype=np.int64)
        cutters = [_Cutter(stream, self.recording.batches(stream)) for stream in STREAMS]
        for edge in edges[1:]:
            batches = [
                batch
                for cutter in cutters
                for batch in cutter.before(int(edge), self.config.max_rows)
            ]
            if len(batches) > 1:
                batches.sort(key=lambda b: int(self._first_time(b)))
            yield from batches
            self.watermark = int(edge)
            yield Watermark(self.watermark)

    @staticmethod
    def _first_time(batch: Batch) -> int:
        value = batch.data.column("time")[0].cast(pa.int64()).as_py()
        return int(value)

    async def __aiter__(self) -> AsyncIterator[Event]:
        for event in self:
            yield event
            if isinstance(event, Watermark):
                await asyncio.sleep(0)

    def checkpoint(self) -> dict[str, Any]:
        return {"watermark": self.watermark}
