"""Parse a replay's log batches many at a time.

A replay cuts logs into one batch per second of event time, a handful of lines each, and a
parser's cost on such a batch is almost all per-call overhead (planning a dozen polars
expressions), not per line. A *row-wise* parser (each output row comes from one input row and
carries its time, and the output is sorted by time: signatures, progress) gives the same rows
for a batch whether it reads that batch alone or a run of batches concatenated. So the pipeline
(``Pipeline.run``) parses the log batches of a stretch of the replay in one call and hands each
batch its share, found by its time span. Consecutive batches must not share a time (a second cut
at ``max_rows`` may split one): such a run is cut there. Live traffic is parsed as it comes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from medic.ingest.base import Batch, Event
from medic.recording import time_us

AHEAD_ROWS = 262_144
"""Rows (of every stream: telemetry batches are held too) read ahead before their events are
processed: about 25 MB of Arrow data, a few minutes of a 1,024-GPU cluster."""
AHEAD_EVENTS = 4_096
"""Events (batches and watermarks) read ahead at most, however quiet the cluster is."""


def stretches(events: Iterable[Event]) -> Iterator[list[Event]]:
    """``events`` in consecutive lists of up to ``AHEAD_EVENTS`` events or ``AHEAD_ROWS`` rows."""
    stretch: list[Event] = []
    rows = 0
    for event in events:
        stretch.append(event)
        if isinstance(event, Batch):
            rows += event.num_rows
        if rows >= AHEAD_ROWS or len(stretch) >= AHEAD_EVENTS:
            yield stretch
            stretch, rows = [], 0
    if stretch:
        yield stretch


def parse_ahead(
    parsers: Sequence[Any], batches: Sequence[Batch]
) -> dict[Batch, dict[str, Batch | None]]:
    """What each of ``parsers`` (all reading the stream of ``batches``, which are time-ordered)
    gives for each batch, by output stream: one call per parser and run of batches whose time
    spans do not touch, the run concatenated once for all of them."""
    spans = {batch: _span(batch) for batch in batches if batch.num_rows}
    found: dict[Batch, dict[str, Batch | None]] = {batch: {} for batch in spans}
    run: list[Batch] = []
    for batch, (first, _) in spans.items():
        if run and first <= spans[run[-1]][1]:
            _parse_run(parsers, run, spans, found)
            run = []
        run.append(batch)
    if run:
        _parse_run(parsers, run, spans, found)
    return found


def _parse_run(
    parsers: Sequence[Any],
    run: list[Batch],
    spans: dict[Batch, tuple[int, int]],
    found: dict[Batch, dict[str, Batch | None]],
) -> None:
    combined = _combined(run)
    for parser in parsers:
        parsed = None if combined is None else _split(parser.parse(combined), run, spans)
        if parsed is None:
            parsed = {batch: parser.parse(batch) for batch in run}
        for batch, rows in parsed.items():
            found[batch][parser.output_stream] = rows


def _combined(run: list[Batch]) -> Batch | None:
    """The run as one batch (its polars frame joined from theirs, not converted again); None
    for a single batch or batches whose schemas differ."""
    if len(run) == 1:
        return None
    try:
        data = pa.concat_tables([_table(batch.data) for batch in run])
    except pa.ArrowInvalid:
        return None
    return Batch.with_frame(run[0].stream, data, pl.concat([b.frame for b in run], rechunk=False))


def _split(
    parsed: Batch | None, run: list[Batch], spans: dict[Batch, tuple[int, int]]
) -> dict[Batch, Batch | None] | None:
    """Each batch's share of what the run parsed into, by its time span, with its slice of the
    run's polars frame; None when the parsed rows are not in time order (the split would be
    wrong)."""
    if parsed is None:
        return dict.fromkeys(run)
    times = parsed.frame.get_column("time").to_physical().to_numpy()
    if np.any(times[1:] < times[:-1]):
        return None
    bounds = np.array([spans[batch] for batch in run], dtype=np.int64)
    starts = np.searchsorted(times, bounds[:, 0], side="left").tolist()
    ends = np.searchsorted(times, bounds[:, 1], side="right").tolist()
    return {
        batch: parsed.sliced(lo, hi - lo) if hi > lo else None
        for batch, lo, hi in zip(run, starts, ends, strict=True)
    }


def _span(batch: Batch) -> tuple[int, int]:
    """First and last event time of a (time-sorted, non-empty) batch."""
    times = time_us(batch.data)
    return int(times[0]), int(times[-1])


def _table(data: pa.RecordBatch | pa.Table) -> pa.Table:
    return data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
