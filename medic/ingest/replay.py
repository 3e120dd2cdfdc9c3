"""Replay a recording as live traffic: its three streams merged in time order into bounded
batches, with a watermark at least once per second of event time, through silence too.

Event time is cut into windows of ``span_s`` (at most one second). Every window yields the
rows of each stream that fall in it (split further at ``max_rows``), ordered by their first
row's time, and then the watermark at the window's end. Time-based detectors (hangs, silent
nodes) therefore see time pass exactly as they would live.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from medic.ingest.base import Batch, Event, Watermark
from medic.recording import Recording
from medic.timeutil import US


@dataclass(frozen=True)
class ReplayConfig:
    max_rows: int = 65_536
    """Largest batch handed to the pipeline."""
    span_s: float = 1.0
    """Event time covered by one window; watermarks advance by this much (at most 1 s)."""

    def __post_init__(self) -> None:
        if self.max_rows < 1:
            raise ValueError("max_rows must be at least 1")
        if not 0 < self.span_s <= 1.0:
            raise ValueError("span_s must be in (0, 1] so watermarks advance every second")


class ReplaySource:
    """A recording as a time-ordered stream of batches and watermarks."""

    def __init__(self, recording: Recording, config: ReplayConfig | None = None) -> None:
        self.recording = recording
        self.config = config or ReplayConfig()
        self.name = f"replay:{recording.name}"
        self.watermark: int | None = None
        self._tables = {stream: recording.stream(stream) for stream in ("logs", "gpu", "scheduler")}
        self._times = {
            stream: table.column("time").cast(pa.int64()).to_numpy()
            for stream, table in self._tables.items()
        }

    def bounds(self) -> tuple[int, int]:
        """First and last event time to replay: the recording's span, widened to its rows."""
        starts = [self.recording.start_us] + [int(t[0]) for t in self._times.values() if t.size]
        ends = [self.recording.end_us] + [int(t[-1]) + 1 for t in self._times.values() if t.size]
        return min(starts), max(ends)

    def __iter__(self) -> Iterator[Event]:
        start, end = self.bounds()
        span = max(1, round(self.config.span_s * US))
        edges = np.arange(start, end + span, span, dtype=np.int64)
        cuts = {
            stream: np.searchsorted(times, edges, side="left")
            for stream, times in self._times.items()
        }
        for i in range(len(edges) - 1):
            batches: list[Batch] = []
            for stream, table in self._tables.items():
                lo, hi = int(cuts[stream][i]), int(cuts[stream][i + 1])
                for chunk_lo in range(lo, hi, self.config.max_rows):
                    chunk_hi = min(hi, chunk_lo + self.config.max_rows)
                    batches.append(Batch(stream, table.slice(chunk_lo, chunk_hi - chunk_lo)))
            if len(batches) > 1:
                batches.sort(key=lambda b: int(self._first_time(b)))
            yield from batches
            self.watermark = int(edges[i + 1])
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
