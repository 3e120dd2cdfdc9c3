"""Replay a recording as live traffic: its three streams merged in time order into bounded
batches, with a watermark at least once per second of event time, through silence too.

Event time is cut into windows of ``span_s`` (at most one second). Every window yields the
rows of each stream that fall in it (split further at ``max_rows``), ordered by their first
row's time, and then the watermark at the window's end. Time-based detectors (hangs, silent
nodes) therefore see time pass exactly as they would live.

Each stream is read as the recording hands it out (``Recording.batches``): a table held in
memory, or a file on disk a batch at a time, so a replay holds only the rows of the windows it
is cutting, however long the recording.

Delivery delays (``delays``) replay the disorder of live traffic: log shippers batch and retry,
so lines from different nodes arrive seconds apart and out of order. A delayed stream's rows
are shipped per node and per second of event time, each shipment ``min_s`` to ``max_s`` after
its rows' time (uniform, drawn from a hash of the seed, stream, node and second: the same seed
gives the same delays). A row keeps its own time and comes in the window its shipment lands in;
watermarks do not wait for it (it arrives late, as it would live), and a batch of it is sorted
by time.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import polars as pl
import pyarrow as pa

from medic.config import ConfigError, Count, NonNegative, PositiveCount, Range
from medic.ingest.base import Batch, Event, Watermark
from medic.recording import Recording, time_us
from medic.schema import STREAMS
from medic.timeutil import US


@dataclass(frozen=True)
class Delay:
    """``[[replay.delays]]``: a stream's delivery delay (see the module docstring)."""

    stream: str
    """logs, gpu or scheduler."""
    min_s: NonNegative = 0.0
    max_s: NonNegative = 0.0
    """Each shipment of the stream arrives between ``min_s`` and ``max_s`` after its rows' time."""

    def __post_init__(self) -> None:
        if self.stream not in STREAMS:
            raise ValueError(f"stream must be one of {', '.join(STREAMS)}, got {self.stream!r}")
        if self.max_s < self.min_s:
            raise ValueError("max_s must be at least min_s")

    @classmethod
    def parse(cls, text: str) -> Delay:
        """``STREAM=MIN:MAX`` or ``STREAM=SECONDS`` (as ``medic backtest --delay`` takes it)."""
        stream, _, span = text.partition("=")
        low, _, high = span.partition(":")
        try:
            return cls(stream.strip(), float(low), float(high or low))
        except ValueError as exc:
            raise ValueError(
                f"delay {text!r}: {exc} (expected STREAM=MIN:MAX, e.g. logs=0:30)"
            ) from None


@dataclass(frozen=True)
class ReplayConfig:
    """``[replay]``: how a recording is cut into batches for a backtest."""

    max_rows: PositiveCount = 65_536
    """Largest batch handed to the pipeline."""
    span_s: Annotated[float, Range(gt=0, le=1)] = 1.0
    """Event time covered by one window; watermarks advance by this much (at most 1 s)."""
    delays: tuple[Delay, ...] = ()
    """Per-stream delivery delays with jitter, to replay live disorder (none by default)."""
    seed: Count = 0
    """Seed of the delays' jitter."""

    def __post_init__(self) -> None:
        streams = [d.stream for d in self.delays]
        if len(set(streams)) != len(streams):
            raise ValueError("a stream has two delays")


def with_delays(settings: Mapping[str, Any], texts: Iterable[str]) -> dict[str, Any]:
    """``settings`` with its ``[replay]`` delays replaced by ``texts`` (``STREAM=MIN:MAX``)."""
    try:
        delays = [dataclasses.asdict(Delay.parse(text)) for text in texts]
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return {**settings, "replay": {**settings.get("replay", {}), "delays": delays}}


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
        times = self._times
        if not times.size or times[0] >= edge or self._rows is None or self._frame is None:
            return []  # nothing due (a quiet stream's usual second): no search
        cut = int(times.searchsorted(edge, side="left"))
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


class _DelayedCutter:
    """A stream whose rows arrive late (``Delay``): rows are held until their shipment lands."""

    def __init__(self, cutter: _Cutter, delay: Delay, seed: int) -> None:
        self._cutter = cutter
        self._stream = cutter._stream
        self._low = round(delay.min_s * US)
        self._spread = round((delay.max_s - delay.min_s) * US)
        self._seed = seed
        self._held: pl.DataFrame | None = None
        self._schema: pa.Schema | None = None

    def before(self, edge: int, max_rows: int) -> list[Batch]:
        """Batches of the rows whose shipment lands before ``edge``, sorted by time."""
        batches = self._cutter.before(edge, max_rows)
        if batches:
            self._schema = batches[0].data.schema
            frames = [self._shipped(pl.concat([b.frame for b in batches]))]
            self._held = pl.concat([self._held, *frames] if self._held is not None else frames)
        if self._held is None or self._schema is None:
            return []
        due = pl.col("_delivery") < edge
        landed = self._held.filter(due).sort("time", maintain_order=True).drop("_delivery")
        self._held = self._held.filter(~due)
        return [
            Batch.from_frame(self._stream, landed.slice(lo, max_rows), self._schema)
            for lo in range(0, landed.height, max_rows)
        ]

    def _shipped(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` with each row's delivery time: its shipment's (node, second) delay."""
        time = pl.col("time").dt.epoch("us")
        node = pl.col("node") if "node" in frame.columns else pl.lit(None, pl.String)
        second = time // US
        draw = pl.struct(pl.lit(self._stream), node, second).hash(self._seed) % (1 << 32)
        jitter = (draw.cast(pl.Float64) / float(1 << 32) * self._spread).cast(pl.Int64)
        return frame.with_columns((time + self._low + jitter).alias("_delivery"))


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
        for edge, batches in self._windows(STREAMS):
            yield from batches
            self.watermark = edge
            yield Watermark(edge)

    def placing(self) -> Iterator[Batch]:
        """The replay's ``logs`` batches and the ``scheduler`` batches that place their lines,
        in the order the replay gives them (each stream is cut alone: the same batches), read
        apart from its telemetry: what ``Pipeline.run`` parses ahead without holding the
        telemetry of the seconds between."""
        for _, batches in self._windows(("logs", "scheduler")):
            yield from batches

    def _windows(self, streams: Iterable[str]) -> Iterator[tuple[int, list[Batch]]]:
        """Each window's end and the batches of ``streams`` due before it, by first time."""
        start, end = self.bounds()
        end += round(max((d.max_s for d in self.config.delays), default=0.0) * US)
        span = max(1, round(self.config.span_s * US))
        edges = np.arange(start, end + span, span, dtype=np.int64)
        delays = {d.stream: d for d in self.config.delays}
        cutters: list[_Cutter | _DelayedCutter] = []
        for stream in (s for s in STREAMS if s in streams):
            cutter = _Cutter(stream, self.recording.batches(stream))
            delay = delays.get(stream)
            cutters.append(
                cutter if delay is None else _DelayedCutter(cutter, delay, self.config.seed)
            )
        for edge in edges[1:].tolist():
            batches = [
                batch for cutter in cutters for batch in cutter.before(edge, self.config.max_rows)
            ]
            if len(batches) > 1:
                batches.sort(key=lambda b: int(self._first_time(b)))
            yield edge, batches

    @staticmethod
    def _first_time(batch: Batch) -> int:
        """The batch's first row time (microseconds): a timestamp read as its integer, as
        casting a scalar costs more than the rest of the sort."""
        first = batch.data.column("time")[0]
        if isinstance(first, pa.TimestampScalar):
            return int(first.value)
        return int(first.cast(pa.int64()).as_py())

    async def __aiter__(self) -> AsyncIterator[Event]:
        for event in self:
            yield event
            if isinstance(event, Watermark):
                await asyncio.sleep(0)

    def checkpoint(self) -> dict[str, Any]:
        return {"watermark": self.watermark}
