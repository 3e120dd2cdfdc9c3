"""The single composition point: events -> parsers -> detectors -> incidents -> responders.

``medic backtest``, ``medic serve`` and the notebooks all drive this same object; replay
and live traffic differ only in where the events come from. The pipeline owns the event
clock: every detection is stamped with the newest row time or watermark consumed so far,
never with the wall clock.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeGuard

import polars as pl
import pyarrow as pa

from medic.calibration import Calibration, calibration_of
from medic.detectors.base import Detection, EndsWithInput
from medic.detectors.incidents import share_liveness
from medic.detectors.progress_state import share_watched_jobs
from medic.detectors.registry import build_parsers, detectors_from, parsers_from
from medic.evidence_features import features_of
from medic.incident import IncidentCorrelator
from medic.ingest.base import Batch, Event, Watermark
from medic.parse.catalogue import Catalogue
from medic.parse.placement import Placement
from medic.parse.prefixes import PrefixStripper
from medic.parse.signatures import catalogue_of, unmatched_only
from medic.parse.threads import ParserThreads
from medic.pipeline_config import PipelineConfig
from medic.pipeline_config import pipeline_config as pipeline_config  # re-exported
from medic.readahead import AHEAD_LINES, parse_ahead, stretches
from medic.settings_tree import Settings
from medic.timeutil import US


class Responder(Protocol):
    """Something downstream of detection: the rules/executor stage, the history writer."""

    def handle(self, detections: list[Detection], now: int) -> None: ...


class Observer(Protocol):
    """Something that watches the streams without detecting (the history's summaries): it gets
    the batches of the streams it names, derived ones included, and every watermark."""

    @property
    def streams(self) -> frozenset[str]: ...

    def update(self, batch: Batch) -> object: ...

    def advance(self, watermark: int) -> object: ...


NAMED_HOSTS = {"signatures": "host", "failed_ranks": "host"}
"""Derived streams with a column of hosts that lines name in their text (``srun: error: <host>:
task 3``), each checked against the job's nodes as the lines' own nodes are."""


def placed_batches(batches: list[Batch], placed: pl.DataFrame) -> list[Batch]:
    """``batches`` (log batches) with the ``node`` of ``placed`` (their rows, in order, as
    ``Placement.place`` gave them); each keeps its other columns as they were."""
    out, offset = [], 0
    for batch in batches:
        rows = placed.slice(offset, batch.num_rows)
        offset += batch.num_rows
        table = (
            batch.data if isinstance(batch.data, pa.Table) else pa.Table.from_batches([batch.data])
        )
        at = table.schema.get_field_index("node")
        if at >= 0:
            column = rows.get_column("node").to_arrow().cast(table.schema.field(at).type)
            table = table.set_column(at, table.schema.field(at), column)
        out.append(Batch.with_frame(batch.stream, table, rows))
    return out


class Pipeline:
    """Drives detectors over a stream of events and hands new incidents to responders."""

    def __init__(
        self,
        detectors: list[Any],
        config: PipelineConfig | None = None,
        responders: Iterable[Responder] = (),
        parsers: list[Any] | None = None,
        observers: Iterable[Observer] = (),
        calibration: Calibration | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        self.calibration = calibration
        """Maps each detection's score to a probability (``from_settings`` loads the configured
        one); None: detections keep their detectors' scores."""
        self.detectors = list(detectors)
        share_liveness(self.detectors)
        share_watched_jobs(self.detectors)
        self.observers = list(observers)
        consumers = [*self.detectors, *self.observers]
        if parsers is None:
            placement = placement or Placement()
            parsers = build_parsers(consumers, prefixes=placement.prefixes)
        self.parsers = parsers
        self.placement = placement or Placement()
        """Gives each log line its node and rank from the line and its job's layout (every
        ``logs`` batch is placed before anything reads it)."""
        self.responders = list(responders)
        self.correlator = IncidentCorrelator(
            round(self.config.incident_window_s * US), self.config.max_symptoms
        )
        self.now = 0
        """Event time reached: the newest row or watermark consumed (detections' stamp)."""
        self.watermark = 0
        """The newest watermark: every source is complete up to it."""
        self.rows_in: dict[str, int] = {}
        self._parsed: dict[Batch, dict[str, Batch | None]] = {}
        """What row-wise parsers already made of batches read ahead, by batch."""
        self._placed: set[Batch] = set()
        """Log batches read ahead that are placed already."""
        self._threads = ParserThreads()
        """Runs each parser on a thread of its own (polars keeps compiled regexes per thread)."""
        self._ahead_parsers = [
            p for p in self.parsers if getattr(p, "row_wise", False) or hasattr(p, "parse_apart")
        ]
        """The parsers that read a replay's log batches ahead (``readahead``)."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings | Mapping[str, Any] | None = None,
        responders: Iterable[Responder] = (),
        observers: Iterable[Observer] = (),
        catalogue: Catalogue | None = None,
    ) -> Pipeline:
        """Build from the settings' ``[pipeline]``, ``[parsers.<name>]`` and
        ``[detectors.<name>]`` tables (a ``Settings``, or the plain tables, checked here once).
        One signature catalogue (``catalogue``, or else the
        built-in one plus the site files of ``[parsers.signatures] extra``) goes to the parser
        and the detectors alike; the calibration is ``[pipeline] calibration`` (the shipped one
        unless ``calibrate = false``)."""
        tree = Settings.load(settings)
        config = tree.pipeline
        calibration = calibration_of(config.calibrate, config.calibration)
        if catalogue is None:
            catalogue = catalogue_of(tree.signatures)
        detectors = detectors_from(tree.detector_configs(), catalogue=catalogue)
        observers = list(observers)
        placement = Placement(PrefixStripper(tree.prefixes))
        parsers = parsers_from(
            [*detectors, *observers],
            tree.parser_configs(),
            catalogue=catalogue,
            prefixes=placement.prefixes,
        )
        return cls(detectors, config, responders, parsers, observers, calibration, placement)

    def process(self, event: Event) -> list[Detection]:
        """Consume one batch or watermark; return the detections that opened incidents or
        brought news to them (``IncidentCorrelator.admit``)."""
        if isinstance(event, Watermark):
            return self._advance(event.time)
        return self._update(event)

    def run(
        self, events: Iterable[Event], placing: Iterable[Batch] | None = None
    ) -> list[Detection]:
        """Consume a whole (replayed) stream; return every emitted detection. Row-wise parsers
        (and those that read batches apart in one call) parse a stretch of batches at once
        before its events are processed (``readahead``). Given ``placing`` (the same stream's
        ``logs`` batches and the ``scheduler`` batches that place them, in its order:
        ``ReplaySource.placing``), the log batches are read ahead in stretches of their own,
        longer than a stretch of the events, which holds the telemetry of its seconds."""
        emitted: list[Detection] = []
        ahead = (
            None if placing is None else _Ahead(stretches(placing, AHEAD_LINES), self._read_ahead)
        )
        for stretch in stretches(events):
            if ahead is not None:
                stretch = [ahead.twin(e) if _is_log_batch(e) else e for e in stretch]
            for event in self._read_ahead(stretch):
                emitted.extend(self.process(event))
        return emitted

    def _read_ahead(self, stretch: list[Event]) -> list[Event]:
        """``stretch`` with its log batches placed, and what the row-wise parsers make of its
        batches kept for their turn (``_parsed``); batches read ahead already are passed over."""
        stretch, joined = self._place_ahead(stretch)
        for stream in {p.input_stream for p in self._ahead_parsers}:
            readers = [p for p in self._ahead_parsers if p.input_stream == stream]
            batches = [
                e
                for e in stretch
                if isinstance(e, Batch) and e.stream == stream and e not in self._parsed
            ]
            found = parse_ahead(readers, batches, joined.get(stream), self._threads.call)
            self._parsed.update(found)
        return stretch

    def finish(self, alive: Mapping[str, int]) -> list[Detection]:
        """The input ends for good (a finite text, not a live stream; ``alive``: each job's last
        sign of life in it): the detectors that hold something waiting for news report it
        (``EndsWithInput``); return what was emitted."""
        found = [
            d for det in self.detectors if isinstance(det, EndsWithInput) for d in det.at_end(alive)
        ]
        return self._emit(found)

    def state_size(self) -> int:
        held: int = sum(int(d.state_size()) for d in self.detectors)
        return held + len(self.correlator.open) + len(self.correlator.faulted)

    def _place_ahead(self, stretch: list[Event]) -> tuple[list[Event], dict[str, pl.DataFrame]]:
        """A stretch with its log batches placed (``Placement``) in one call, after every
        scheduler row of the stretch is known, and the placed lines as one frame by stream."""
        logs = [e for e in stretch if _is_log_batch(e) and e not in self._placed]
        if not logs:
            return stretch, {}  # its scheduler rows are observed in turn (``_update``)
        for event in stretch:
            if isinstance(event, Batch) and event.stream == "scheduler" and event.num_rows:
                self.placement.observe(event.frame)
        try:
            frame = pl.concat([b.frame for b in logs], rechunk=False)
        except (pl.exceptions.SchemaError, pl.exceptions.ShapeError):
            return stretch, {}
        placed = self.placement.place(frame)
        if placed is not frame:
            swapped = dict(zip(logs, placed_batches(logs, placed), strict=True))
            stretch = [swapped.get(e, e) if isinstance(e, Batch) else e for e in stretch]
            logs = [swapped[b] for b in logs]
        self._placed.update(logs)
        return stretch, {"logs": placed}

    def _update(self, batch: Batch) -> list[Detection]:
        if batch.num_rows == 0:
            return []
        if batch.stream == "scheduler":
            self.placement.observe(batch.frame)
        elif batch.stream == "logs" and batch not in self._placed:
            batch = self._place(batch)
        self._placed.discard(batch)
        self.rows_in[batch.stream] = self.rows_in.get(batch.stream, 0) + batch.num_rows
        newest = batch.max_time
        if newest is not None and newest > self.now:
            self.now = newest
        batches = [batch, *self._derive(batch)]
        found: list[Detection] = []
        for derived in batches:
            if derived.stream == "scheduler":
                self.correlator.observe_scheduler(derived.frame)
            for detector in self.detectors:
                if derived.stream in detector.streams:
                    found.extend(detector.update(derived))
            for observer in self.observers:
                if derived.stream in observer.streams:
                    observer.update(derived)
        return self._emit(found)

    def _place(self, batch: Batch) -> Batch:
        """``batch`` with its lines placed (the same batch when placing changes nothing)."""
        placed = self.placement.place(batch.frame)
        return batch if placed is batch.frame else placed_batches([batch], placed)[0]

    def _checked(self, derived: Batch) -> Batch:
        """A derived batch whose hosts named in the lines' text are checked (``Placement``)."""
        frame = self.placement.checked(derived.frame, NAMED_HOSTS[derived.stream])
        if frame is derived.frame:
            return derived
        return Batch.from_frame(derived.stream, frame, derived.data.schema)

    def _derive(self, batch: Batch) -> list[Batch]:
        available = {batch.stream: batch}
        parsed = self._parsed.pop(batch, {})
        for parser in self.parsers:
            source = available.get(parser.input_stream)
            if source is None:
                continue
            if source is batch and parser.output_stream in parsed:
                derived = parsed[parser.output_stream]
            else:
                derived = self._threads.call(parser, parser.parse, source)
            if derived is not None and derived.num_rows and derived.stream in NAMED_HOSTS:
                derived = self._checked(derived)
            if derived is not None and derived.num_rows:
                available[parser.output_stream] = derived
        return [b for stream, b in available.items() if stream != batch.stream]

    def _advance(self, watermark: int) -> list[Detection]:
        if watermark <= self.watermark:
            return []
        self.watermark = watermark
        self.now = max(self.now, watermark)
        found: list[Detection] = []
        for detector in self.detectors:
            found.extend(detector.advance(watermark))
        for observer in self.observers:
            observer.advance(watermark)
        self.correlator.expire(self.now)
        return self._emit(found)

    def _stamped(self, detection: Detection) -> Detection:
        """``detection`` at the event time reached, its score calibrated (raw kept)."""
        if self.calibration is None:
            return dataclasses.replace(detection, detected_at=self.now)
        return dataclasses.replace(
            detection,
            detected_at=self.now,
            score=self.calibration.calibrated(
                detection.kind,
                detection.score,
                unmatched_only(detection.evidence),
                features_of(detection),
            ),
            raw_score=detection.score,
        )

    def _emit(self, found: list[Detection]) -> list[Detection]:
        if not found:
            return []
        stamped = [self._stamped(d) for d in found]
        emitted = [e for d in stamped if (e := self.correlator.admit(d)) is not None]
        if emitted:
            for responder in self.responders:
                responder.handle(emitted, self.now)
        return emitted


class _Ahead:
    """A replay's log batches read ahead of its events (``Pipeline.run``): each stretch of
    ``stretches`` read (``read``: placed and parsed) when the events reach its first log batch,
    and each log batch of the events swapped for its twin of the stretch, the placed batch the
    parsers' rows are kept under."""

    def __init__(
        self, stretches: Iterator[list[Event]], read: Callable[[list[Event]], list[Event]]
    ) -> None:
        self._stretches = stretches
        self._read = read
        self._twins: deque[Batch] = deque()

    def twin(self, batch: Batch) -> Batch:
        """The placed twin of ``batch`` (the next log batch of the events)."""
        while not self._twins:
            stretch = next(self._stretches, None)
            if stretch is None:
                raise ValueError("the placing batches ran out before the events' log batches")
            self._twins.extend(e for e in self._read(stretch) if _is_log_batch(e))
        twin = self._twins.popleft()
        if twin.num_rows != batch.num_rows or twin.max_time != batch.max_time:
            raise ValueError("the placing batches are not the events' own log batches")
        return twin


def _is_log_batch(event: Event) -> TypeGuard[Batch]:
    return isinstance(event, Batch) and event.stream == "logs" and event.num_rows > 0
