"""The conformance suite: every registered detector through the same checks, as river's
``check_estimator`` runs every estimator through its own.

Each check is parametrised over the registry (``medic.detectors.registry.DETECTORS``), so a new
detector is checked the moment it registers: its configuration round-trips through the plain
dict a TOML file gives, unknown settings are a clear error, empty batches and a bare watermark
are nothing, extra columns change nothing and missing optional ones break nothing, two replays
give the same detections, it never reads the wall clock, it holds state while a job trains and
none once its jobs ended and their forget horizon passed, and its scores are in [0, 1] and
graded by the evidence (not a constant, nor one value per outcome).

Each detector replays a committed recording in which it fires (``FIRES``; so that the checks
are not vacuous), and, for state, a hand-made stream of two short jobs, one after the other.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from medic import schema
from medic.config import ConfigError, from_dict, to_dict
from medic.detectors.base import Detection
from medic.detectors.registry import DETECTORS, build_detectors
from medic.ingest.base import Batch, Event, Watermark
from medic.ingest.replay import ReplaySource
from medic.parse.failed_ranks import FAILED_RANKS
from medic.parse.rank_timings import RANK_TIMING
from medic.pipeline import Pipeline
from medic.recording import Recording, read_recording
from medic.testing.builders import at, excerpt
from medic.testing.builders import recording as build_recording
from tests.detectors.training import COMPUTE, Job, constant

NAMES = sorted(DETECTORS)
PER_DETECTOR = [pytest.param(n, marks=pytest.mark.xdist_group(f"conformance-{n}")) for n in NAMES]
"""The registry, one xdist group per detector: a detector's checks share its cached replays
(``baseline``), which a second worker would replay again."""
DATASETS = Path(__file__).parents[2] / "datasets"
FIRES = {
    "crash": "user_error-s1",
    "gpu_fault": "xid79_cascade-s1",
    "hang": "deadlock-s1",
    "node_failure": "node_failure-s1",
    "straggler": "thermal_straggler-s1",
    "nan_divergence": "nan_divergence-s2",
}
"""A recording in which each built-in detector fires; a detector registered later replays all."""
GRADED = {
    "crash": "oom-s1",
    "gpu_fault": "ecc_uncorrectable-s1",
    "hang": "host_hang-s1",
    "node_failure": "node_failure-s2",
    "straggler": "power_cap_straggler-s1",
    "nan_divergence": "nan_divergence-s2",  # its two detections: a divergence and its repeat
}
"""A second recording per built-in detector, whose evidence differs in strength from its
``FIRES`` one: the two must not score alike."""
EXTRA = "vendor_extra"
"""A column no schema knows (an exporter's own field)."""
OPTIONAL = {
    "gpu": (
        "temp_c",
        "sm_clock_mhz",
        "throttle_reasons",
        "ecc_sbe",
        "pcie_replay",
        "nvlink_errors",
    ),
    "logs": ("rank",),
    "scheduler": ("exit_code", "reason"),
}
"""Optional columns that a source may not have at all (a dcgm-exporter without profiling
metrics, logs without a rank prefix, a scheduler feed without reasons)."""


class WallClockRead(AssertionError):
    pass


def _no_clock(*args: Any, **kwargs: Any) -> Any:
    raise WallClockRead("a detector read the wall clock")


class _GuardedDatetime(dt.datetime):
    now = classmethod(_no_clock)  # type: ignore[assignment]
    utcnow = classmethod(_no_clock)  # type: ignore[assignment]
    today = classmethod(_no_clock)  # type: ignore[assignment]


CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")


@contextmanager
def wall_clock_forbidden() -> Iterator[None]:
    """Every way to read the current time raises while the block runs: the ``time`` module's
    clocks and ``datetime.now/utcnow/today`` (also where a module imported the class)."""
    import sys

    saved = [(time, name, getattr(time, name)) for name in CLOCKS]
    saved.append((dt, "datetime", dt.datetime))
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("medic") and (
            getattr(module, "datetime", None) is dt.datetime
        ):
            saved.append((module, "datetime", dt.datetime))
    try:
        for owner, name, _ in saved:
            setattr(owner, name, _GuardedDatetime if name == "datetime" else _no_clock)
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def guard(detector: Any) -> Any:
    """The detector with its ``update`` and ``advance`` run under ``wall_clock_forbidden``."""

    def guarded(method: Callable[[Any], list[Detection]]) -> Callable[[Any], list[Detection]]:
        def call(arg: Any) -> list[Detection]:
            with wall_clock_forbidden():
                return method(arg)

        return call

    detector.update = guarded(detector.update)
    detector.advance = guarded(detector.advance)
    return detector


def replay(name: str, recording: Recording, events: Callable[[Event], Event] | None = None) -> Any:
    """One fresh ``name`` detector (wall clock guarded) through ``recording``; the detector and
    what it emitted, as rows without the per-run id."""
    (detector,) = build_detectors(enabled=[name])
    pipeline = Pipeline([guard(detector)])
    stream: Any = ReplaySource(recording)
    if events is not None:
        stream = map(events, stream)
    found = pipeline.run(stream)
    return detector, [d.row() for d in found]


@cache
def recording(name: str) -> Recording:
    """The committed recording around its incidents (a detector fires on it as on the whole)."""
    return excerpt(read_recording(DATASETS / name), lead_s=240, tail_s=420)


def recordings_of(name: str) -> list[str]:
    return [FIRES[name]] if name in FIRES else sorted(FIRES.values())


@cache
def baseline(name: str) -> tuple[dict[str, Any], ...]:
    """What ``name`` emits on its recordings, replayed with the wall clock guarded."""
    return tuple(row for rec in recordings_of(name) for row in replay(name, recording(rec))[1])


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_configuration_round_trips_through_a_plain_table(name: str) -> None:
    cls = DETECTORS[name]
    default = cls.Config()
    table = to_dict(default)
    assert from_dict(cls.Config, table, f"detectors.{name}") == default
    (built,) = build_detectors({name: table}, enabled=[name])
    assert built.config == default
    with pytest.raises(ConfigError, match="no_such_setting"):
        from_dict(cls.Config, {"no_such_setting": 1}, f"detectors.{name}")


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_empty_batches_and_a_bare_watermark_are_nothing(name: str) -> None:
    (detector,) = build_detectors(enabled=[name])
    guard(detector)
    for stream in sorted(detector.streams):
        empty = first_batch(stream).sliced(0, 0)
        assert detector.update(empty) == []
    assert detector.advance(at(0)) == []
    assert detector.advance(at(3600)) == []
    assert detector.state_size() == 0


@cache
def _first_batches() -> dict[str, Batch]:
    """The first batch of every stream, raw and derived, of the crash recording."""
    firsts: dict[str, Batch] = {}

    class Keep:
        streams = frozenset(schema.STREAMS) | {
            "progress",
            "signatures",
            "gpu_latest",
            "failed_ranks",
        }

        def update(self, batch: Batch) -> None:
            firsts.setdefault(batch.stream, batch)

        def advance(self, watermark: int) -> None:
            return None

    detectors = build_detectors()
    Pipeline(detectors, observers=[Keep()]).run(ReplaySource(recording(FIRES["crash"])))
    # The crash recording's job prints no per-rank timings: that stream's batches are empty.
    firsts["rank_timing"] = Batch("rank_timing", RANK_TIMING.empty_table())
    firsts.setdefault("failed_ranks", Batch("failed_ranks", FAILED_RANKS.empty_table()))
    return firsts


def first_batch(stream: str) -> Batch:
    return _first_batches()[stream]


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_it_fires_on_its_recording_and_never_reads_the_wall_clock(name: str) -> None:
    assert baseline(name)


def with_extra_column(event: Event) -> Event:
    if isinstance(event, Watermark):
        return event
    data = event.data
    extra = data.append_column(EXTRA, pa.array([7.5] * data.num_rows, pa.float64()))
    return Batch(event.stream, extra)


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_a_second_replay_with_an_extra_column_gives_the_same_detections(name: str) -> None:
    # Deterministic (a fresh detector, the same input, the same rows: times, culprits, scores,
    # summaries) and blind to a column it does not know.
    again = [
        row
        for rec in recordings_of(name)
        for row in replay(name, recording(rec), with_extra_column)[1]
    ]
    assert again == list(baseline(name))


def without_optional_columns(rec: Recording) -> Recording:
    """The recording as a source lacking the optional columns would give it: conformed, they
    are all null."""
    tables: dict[str, pa.Table] = {}
    for stream, columns in OPTIONAL.items():
        table = getattr(rec, stream)
        assert isinstance(table, pa.Table)
        table = table.drop_columns([c for c in columns if c in table.column_names])
        tables[stream] = schema.conform(table, schema.SCHEMAS[stream])
    return Recording(meta=rec.meta, labels=rec.labels, **tables)


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_missing_optional_columns_break_nothing(name: str) -> None:
    rec = without_optional_columns(recording(recordings_of(name)[0]))
    _, found = replay(name, rec)
    assert all(0.0 <= row["score"] <= 1.0 and row["kind"] for row in found)


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_scores_are_in_the_unit_interval(name: str) -> None:
    for row in baseline(name):
        assert 0.0 <= row["score"] <= 1.0, row


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_scores_are_graded_by_the_evidence(name: str) -> None:
    # A score the rules and notebooks can re-threshold means something only if it varies with
    # the evidence: two recordings whose evidence differs give different scores.
    others = [rec for rec in [GRADED.get(name)] if rec and rec not in recordings_of(name)]
    graded = [row for rec in others for row in replay(name, recording(rec))[1]]
    scores = {round(row["score"], 6) for row in (*baseline(name), *graded)}
    assert len(scores) >= 2, scores


def short_jobs(count: int) -> list[Job]:
    """``count`` jobs one after another on the same two nodes, each training five minutes."""
    jobs = []
    for i in range(count):
        t0 = 400.0 * i
        job = Job(nodes=("n1", "n2"), job_id=str(500 + i)).start(t0)
        job.steps(t0 + 10, t0 + 300).telemetry(t0, t0 + 300, constant(COMPUTE))
        jobs.append(job.end(t0 + 301))
    return jobs


def state_of(name: str, count: int) -> tuple[int, int]:
    """State held while the last of ``count`` short jobs trains, and once it ended and every
    forget horizon passed."""
    (detector,) = build_detectors(enabled=[name])
    pipeline = Pipeline([detector])
    end = 400.0 * count
    training = 0
    for event in ReplaySource(_stream(short_jobs(count), end)):
        pipeline.process(event)
        if isinstance(event, Watermark) and event.time == at(end - 200):
            training = int(detector.state_size())
    pipeline.process(Watermark(at(end + 4 * 3600)))
    pipeline.process(Watermark(at(end + 4 * 3600 + 1)))
    return training, int(detector.state_size())


def _stream(jobs: list[Job], end: float) -> Recording:
    return build_recording(
        end,
        logs=sorted((r for j in jobs for r in j.logs), key=lambda r: r["time"]),
        gpu=sorted((r for j in jobs for r in j.gpu), key=lambda r: r["time"]),
        scheduler=sorted((r for j in jobs for r in j.scheduler), key=lambda r: r["time"]),
    )


@pytest.mark.parametrize("name", PER_DETECTOR)
def test_state_stays_bounded_over_a_long_replay(name: str) -> None:
    # It holds state for a running job; what ended jobs leave (tombstones, so late lines start
    # no new watch) is freed once their forget horizon passed: nothing is left of either job.
    training, after = state_of(name, 2)
    assert training > 0
    assert after == 0


def test_every_built_in_detector_is_checked() -> None:
    assert {"crash", "gpu_fault", "hang", "nan_divergence", "node_failure", "straggler"} <= set(
        NAMES
    )
