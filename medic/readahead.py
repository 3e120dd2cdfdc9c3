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
import pyarrow as pa

from medic.ingest.base import Batch, Event

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


def parse_ahead(parser: Any, batches: Sequence[Batch]) -> dict[Batch, Batch | None]:
    """What ``parser.parse`` gives for each of ``batches`` (time-ordered, of its input stream),
    from one call per run of batches whose time spans do not touch."""
    spans = {batch: _span(batch) for batch in batches if batch.num_rows}
    found: dict[Batch, Batch | None] = {}
    run: list[Batch] = []
    for batch, (first, _) in spans.items():
        if run and first <= spans[run[-1]][1]:
            found.update(_parse_run(parser, run, spans))
            run = []
        run.append(batch)
    if run:
        found.update(_parse_run(parser, run, spans))
    return found


def _parse_run(
    parser: Any, run: list[Batch], spans: dict[Batch, tuple[int, int]]
) -> dict[Batch, Batch | None]:
    if len(run) == 1:
        return {run[0]: parser.parse(run[0])}
    try:
        combined = pa.concat_tables([_table(batch.data) for batch in run])
    except pa.ArrowInvalid:
        return {batch: parser.parse(batch) for batch in run}
    parsed = parser.parse(Batch(run[0].stream, combined))
    if parsed is None:
        return dict.fromkeys(run)
    times = _times(parsed.data)
    if np.any(times[1:] < times[:-1]):
        return {batch: parser.parse(batch) for batch in run}
    bounds = np.array([spans[batch] for batch in run], dtype=np.int64)
    starts = np.searchsorted(times, bounds[:, 0], side="left").tolist()
    ends = np.searchsorted(times, bounds[:, 1], side="right").tolist()
    return {
        batch: Batch(parsed.stream, parsed.data.slice(lo, hi - lo)) if hi > lo else None
        for batch, lo, hi in zip(run, starts, ends, strict=True)
    }


def _span(batch: Batch) -> tuple[int, int]:
    """First and last event time of a (time-sorted, non-empty) batch."""
    times = _times(batch.data)
    return int(times[0]), int(times[-1])


def _times(data: pa.RecordBatch | pa.Table) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.asarray(data.column("time").cast(pa.int64()).to_numpy(), dtype=np.int64)


def _table(data: pa.RecordBatch | pa.Table) -> pa.Table:
    return data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
