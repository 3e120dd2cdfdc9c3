"""Parse a replay's log batches many at a time.

A replay cuts logs into one batch per second of event time, a handful of lines each, and a
parser's cost on such a batch is almost all per-call overhead (planning a dozen polars
expressions), not per line. A *row-wise* parser (each output row comes from one input row and
carries its time, and the output is sorted by time: signatures, progress) gives the same rows
for a batch whether it reads that batch alone or a run of batches concatenated. So the pipeline
(``Pipeline.run``) parses the log batches of a stretch of the replay in one call and hands each
batch its share, found by its time span. Batches whose time spans touch (a second cut at
``max_rows``, or rows delivered late: a delayed replay's batches overlap by the delay) are moved
apart in time for the call: each batch's times are shifted past the span of the batch before it,
the parser reads the run in that order, and its rows get their own times back as they are handed
out. A parser whose rows come from several lines (a record of a launcher's failure summary) is
not row-wise; it may read a run in one call each batch apart (``parse_apart``: its rows never
span two batches), and gives each batch what it gives that batch alone. Live traffic is parsed
as it comes.

A stretch of a replay's events holds the telemetry of its seconds too, so at thousands of GPUs
it holds a few seconds of log lines only, and the parsers' cost per call comes back. A replay
that hands its log batches apart (``ReplaySource.placing``) has them read in stretches of their
own (``AHEAD_LINES``), each log batch of the events then swapped for its read twin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from medic.ingest.base import Batch, Event
from medic.recording import time_us

AHEAD_ROWS = 262_144
"""Rows (of every stream: telemetry batches are held too) read ahead before their events are
processed: about 25 MB of Arrow data, a few minutes of a 1,024-GPU cluster."""
AHEAD_LINES = 65_536
"""Log lines (with the scheduler rows between) read ahead apart from the telemetry, when a replay
hands them apart (``Pipeline.run``'s ``placing``): the parsers' cost per call is spread over
this many lines, about 10 MB of them."""
AHEAD_EVENTS = 4_096
"""Events (batches and watermarks) read ahead at most, however quiet the cluster is."""


def stretches(events: Iterable[Event], max_rows: int | None = None) -> Iterator[list[Event]]:
    """``events`` in consecutive lists of up to ``AHEAD_EVENTS`` events or ``max_rows`` rows
    (``AHEAD_ROWS`` by default)."""
    limit = AHEAD_ROWS if max_rows is None else max_rows
    stretch: list[Event] = []
    rows = 0
    for event in events:
        stretch.append(event)
        if isinstance(event, Batch):
            rows += event.num_rows
        if rows >= limit or len(stretch) >= AHEAD_EVENTS:
            yield stretch
            stretch, rows = [], 0
    if stretch:
        yield stretch


def parse_ahead(
    parsers: Sequence[Any],
    batches: Sequence[Batch],
    joined: pl.DataFrame | None = None,
    call: Callable[..., Any] = lambda parser, method, *args: method(*args),
) -> dict[Batch, dict[str, Batch | None]]:
    """What each of ``parsers`` (all reading the stream of ``batches``, each time-ordered) gives
    for each batch, by output stream: one call per parser, the batches concatenated once for all
    of them (each batch's times shifted past the batch before it, ``_shifts``; a parser with
    ``parse_apart`` reads them unshifted, each batch apart). ``joined``:
    the non-empty batches' frames already concatenated (what a prefix stripper has seen).
    ``call(parser, method, *args)`` runs a parser's method (``ParserThreads.call``: on the
    parser's own thread)."""
    run = [batch for batch in batches if batch.num_rows]
    found: dict[Batch, dict[str, Batch | None]] = {batch: {} for batch in run}
    if not run:
        return found
    whole = []
    for parser in parsers:
        if not hasattr(parser, "parse_apart"):
            whole.append(parser)
            continue
        apart = call(parser, parser.parse_apart, run, joined)
        for batch, rows in zip(run, apart, strict=True):
            found[batch][parser.output_stream] = rows
    if not whole:
        return found
    spans = np.array([_span(batch) for batch in run], dtype=np.int64).reshape(-1, 2)
    shifts = _shifts(spans)
    combined = _combined(run, shifts, joined)
    for parser in whole:
        parsed = None
        if combined is not None:
            parsed = _split(call(parser, parser.parse, combined), run, spans, shifts)
        if parsed is None:
            parsed = {batch: call(parser, parser.parse, batch) for batch in run}
        for batch, rows in parsed.items():
            found[batch][parser.output_stream] = rows
    return found


def _shifts(spans: np.ndarray) -> np.ndarray:
    """How far each batch's times move (microseconds, from its ``(first, last)`` time) so that
    each batch begins after the one before it ends: 0 where it already does."""
    shifts = np.zeros(len(spans), dtype=np.int64)
    end = None
    for i, (first, last) in enumerate(spans.tolist()):
        if end is not None and first <= end:
            shifts[i] = end + 1 - first
        end = last + int(shifts[i])
    return shifts


def _combined(
    run: list[Batch], shifts: np.ndarray, joined: pl.DataFrame | None = None
) -> Batch | None:
    """The run as one batch (its polars frame joined from theirs, not converted again, or
    ``joined`` when it has the run's rows), each batch's times shifted by its ``shifts``; None
    for a single batch or batches whose schemas differ."""
    if len(run) == 1:
        return None
    try:
        data = pa.concat_tables([_table(batch.data) for batch in run])
    except pa.ArrowInvalid:
        return None
    if joined is None or joined.height != data.num_rows:
        joined = pl.concat([b.frame for b in run], rechunk=False)
    combined = Batch.with_frame(run[0].stream, data, joined)
    if not shifts.any():
        return combined
    moved = np.repeat(shifts, [batch.num_rows for batch in run])
    return combined.retimed(_retimed(combined.frame.get_column("time"), moved))


def _split(
    parsed: Batch | None, run: list[Batch], spans: np.ndarray, shifts: np.ndarray
) -> dict[Batch, Batch | None] | None:
    """Each batch's share of what the run parsed into, by its (shifted) time span, with its slice
    of the run's polars frame and its own times back; None when the parsed rows are not in time
    order (the split would be wrong)."""
    if parsed is None:
        return dict.fromkeys(run)
    times = parsed.frame.get_column("time").to_physical().to_numpy()
    if np.any(times[1:] < times[:-1]):
        return None
    bounds = spans + shifts[:, None]
    starts = np.searchsorted(times, bounds[:, 0], side="left")
    ends = np.searchsorted(times, bounds[:, 1], side="right")
    return {
        batch: _back(parsed.sliced(lo, hi - lo), shift) if hi > lo else None
        for batch, lo, hi, shift in zip(
            run, starts.tolist(), ends.tolist(), shifts.tolist(), strict=True
        )
    }


def _back(share: Batch, shift: int) -> Batch:
    """A batch's share of the run's rows with its own times (``shift`` undone), known sorted, as
    the batch's own parse gives them (polars sorts an unsorted column again, and ties may then
    come out in another order)."""
    if not shift:
        return share
    time = share.frame.get_column("time")
    return share.retimed(_retimed(time, np.full(len(time), -shift, dtype=np.int64)).set_sorted())


def _retimed(time: pl.Series, delta: np.ndarray) -> pl.Series:
    """``time`` (a datetime column) moved by ``delta`` microseconds row by row."""
    moved = pl.Series(time.name, time.to_physical().to_numpy() + delta, dtype=pl.Int64)
    return moved.cast(time.dtype)


def _span(batch: Batch) -> tuple[int, int]:
    """First and last event time of a (time-sorted, non-empty) batch."""
    times = time_us(batch.data)
    return int(times[0]), int(times[-1])


def _table(data: pa.RecordBatch | pa.Table) -> pa.Table:
    return data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
