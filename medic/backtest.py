"""Backtests: replay recordings through the one Pipeline and score them by the spec's rules.

``backtest_recording`` is what ``medic backtest`` and the tuning notebook call per
recording; ``run_backtest`` adds the files, the totals and the per-kind breakdown. A recording
that cannot be read (a corrupt parquet file, a broken meta.json) is skipped with an error and
listed in ``BacktestReport.failures``; the others are still replayed and scored.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import BrokenExecutor, Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from medic import schema
from medic.actions.stage import ActionStage
from medic.calibration import Calibration, raw_scores
from medic.detectors.base import detection_id, detections_table
from medic.errors import exception_line
from medic.evidence_features import features_table
from medic.history.store import HistoryStore
from medic.history.writer import HistoryWriter
from medic.ingest.replay import ReplaySource
from medic.pipeline import Pipeline
from medic.recording import Recording, RecordingError, open_recording
from medic.schema import SchemaError
from medic.scoring import Score, score
from medic.settings_tree import Settings

log = logging.getLogger(__name__)


@dataclass
class RecordingResult:
    """One recording's backtest: what was detected, what would have been done, how it scored."""

    name: str
    path: Path | None
    detections: pa.Table
    score: Score
    elapsed_s: float
    rows: int
    actions: pa.Table
    features: pa.Table | None = None
    """Each detection's evidence features (``medic.evidence_features``), by detection id: what
    a calibration fits on; None where a backtest was read back without them."""


@dataclass(frozen=True)
class RecordingFailure:
    """A recording that could not be replayed, and why (one line)."""

    path: Path
    error: str

    @property
    def name(self) -> str:
        return self.path.name


UNREADABLE = (RecordingError, SchemaError, pa.ArrowException, OSError)
"""What a damaged recording raises while it is read, before or during its replay."""


@dataclass
class BacktestReport:
    results: list[RecordingResult] = field(default_factory=list)
    failures: list[RecordingFailure] = field(default_factory=list)

    @property
    def overall(self) -> Score:
        total = Score()
        for result in self.results:
            total = total.merge(result.score)
        return total

    def by_kind(self) -> dict[str, dict[str, Any]]:
        """Per kind: recall, latency, kind and attribution accuracy of the labels of that kind;
        precision and false positives of the (de-duplicated) detections of that kind."""
        out: dict[str, dict[str, Any]] = {}
        overall = self.overall
        for kind in schema.DETECTION_KINDS:
            part = Score(detections=overall.detections_by_kind[kind])
            part.matched = part.detections - sum(
                1 for d in overall.false_positive_rows if d["kind"] == kind
            )
            for outcome in overall.outcomes:
                if outcome.kind != kind:
                    continue
                part.labels += 1
                if outcome.detected:
                    part.detected += 1
                    part.latencies_s.append(outcome.latency_s or 0.0)
                    part.kind_correct += bool(outcome.kind_correct)
                    part.attribution_correct += bool(outcome.attribution_correct)
            if part.labels or part.detections:
                out[kind] = part.summary()
        return out

    def actions_summary(self) -> dict[str, Any]:
        """Actions by kind and status, suppressions by guard, over every recording."""
        tables = [r.actions for r in self.results if r.actions.num_rows]
        if not tables:
            return {"by_action": {}, "suppressed_by_guard": {}}
        table = pa.concat_tables(tables)
        by_action: dict[str, dict[str, int]] = {}
        guards: dict[str, int] = {}
        for action, status, guard in zip(
            table.column("action").to_pylist(),
            table.column("status").to_pylist(),
            table.column("guard").to_pylist(),
            strict=True,
        ):
            by_action.setdefault(action, {}).setdefault(status, 0)
            by_action[action][status] += 1
            if guard:
                guards[guard] = guards.get(guard, 0) + 1
        return {"by_action": by_action, "suppressed_by_guard": guards}

    def to_json(self) -> dict[str, Any]:
        return {
            "recordings": [
                {
                    "name": r.name,
                    "path": str(r.path) if r.path else None,
                    **r.score.summary(),
                    "elapsed_s": round(r.elapsed_s, 3),
                    "rows": r.rows,
                    "misses": [o.incident_id for o in r.score.outcomes if not o.detected],
                }
                for r in self.results
            ],
            "failed": [{"path": str(f.path), "error": f.error} for f in self.failures],
            "by_kind": self.by_kind(),
            "actions": self.actions_summary(),
            "overall": self.overall.summary(),
        }


def backtest_recording(
    recording: Recording,
    settings: Settings | Mapping[str, Any] | None = None,
    history: HistoryStore | None = None,
) -> RecordingResult:
    """Replay one recording through a fresh pipeline built from ``settings`` (detectors, and
    the ``[rules]`` with the recording executor) and score it. With ``history``, the replay
    also writes what ``medic serve`` would have: detections, actions, incidents, summaries."""
    settings = Settings.load(settings)
    started = time.perf_counter()
    stage = ActionStage.for_recording(recording, settings)
    writer = None if history is None else HistoryWriter(history, settings.history, deferred=True)
    pipeline = Pipeline.from_settings(
        settings,
        responders=[stage] if writer is None else [stage, writer],
        observers=[*stage.observers] if writer is None else [*stage.observers, writer],
    )
    replay = ReplaySource(recording, settings.replay)
    emitted = list(pipeline.run(replay, replay.placing()))
    detections = detections_table(emitted)
    features = features_table([d.id for d in emitted], emitted)
    actions = stage.actions_table()
    scored = score(detections, recording.labels)
    if writer is not None:
        writer.correlator = pipeline.correlator
        writer.record_actions(actions)
        writer.set_onsets(label_onsets(scored))
        writer.flush()
    rows = sum(recording.num_rows(s) for s in schema.STREAMS)
    return RecordingResult(
        name=recording.path.name if recording.path else recording.name,
        path=recording.path,
        detections=detections,
        score=scored,
        elapsed_s=time.perf_counter() - started,
        rows=rows,
        actions=actions,
        features=features,
    )


def label_onsets(scored: Score) -> dict[str, int]:
    """The onset of the label each detected label's detection matched, by detection id: the
    one onset a backtest measures latency from, which its history then reports too."""
    return {
        detection_id(o.detected_at, o.job_id, o.detected_kind, o.detector): o.onset
        for o in scored.outcomes
        if o.detected and o.detected_at is not None and o.detected_kind and o.detector
    }


def write_result(result: RecordingResult, out_dir: Path) -> Path:
    """``out_dir/<recording directory name>/detections.parquet``: the confirmed detections, the
    ones that act and that the spec's scoring counts; ``suspects.parquet``: the suspects, which
    a scorer reading only the spec's file must not take for detections; ``actions.parquet``;
    and ``features.parquet``: each detection's evidence features, for ``medic calibrate``."""
    target = out_dir / result.name
    target.mkdir(parents=True, exist_ok=True)
    suspect = pc.fill_null(pc.equal(result.detections.column("tier"), schema.SUSPECT), False)
    pq.write_table(result.detections.filter(pc.invert(suspect)), target / "detections.parquet")
    pq.write_table(result.detections.filter(suspect), target / SUSPECTS_FILE)
    pq.write_table(result.actions, target / "actions.parquet")
    if result.features is not None:
        pq.write_table(result.features, target / FEATURES_FILE)
    return target


FEATURES_FILE = "features.parquet"
SUSPECTS_FILE = "suspects.parquet"

MAX_DEFAULT_JOBS = 4
"""Each worker holds a recording's logs, its detectors' state and its own polars thread pool, so
the default stays at a few workers however many CPUs the machine has."""


def default_jobs() -> int:
    """Worker processes ``medic backtest`` uses unless told: the CPU count, at most 4."""
    return min(len(os.sched_getaffinity(0)), MAX_DEFAULT_JOBS)


def backtest_path(
    path: Path,
    settings: Settings | Mapping[str, Any] | None = None,
    history: HistoryStore | None = None,
) -> RecordingResult | RecordingFailure:
    """Read and backtest one recording (what a worker process of ``run_backtest`` runs); its
    GPU telemetry is read from disk a batch at a time as the replay goes."""
    try:
        return backtest_recording(open_recording(path), settings, history)
    except UNREADABLE as exc:
        return unreadable(path, exc)


def unreadable(path: Path, exc: BaseException) -> RecordingFailure:
    """The failure of a recording that raised ``exc`` (one of ``UNREADABLE``) while read."""
    text = exception_line(exc)
    return RecordingFailure(path, text if str(path) in text else f"{path}: {text}")


Task = tuple[Path, Settings | Mapping[str, Any] | None]
"""One replay: a recording's path and the settings to replay it with."""

Runner = Callable[[list[Task]], Iterator[RecordingResult | RecordingFailure]]
"""Replays tasks, each with a fresh pipeline, and gives their results in input order: worker
processes here (``local_runner``) or a Ray cluster (``medic.ray_cluster``)."""


def local_runner(jobs: int = 1) -> Runner:
    """Tasks replayed in this process (``jobs`` 1) or in up to ``jobs`` worker processes."""

    def run(tasks: list[Task]) -> Iterator[RecordingResult | RecordingFailure]:
        workers = min(jobs, len(tasks))
        if workers > 1:
            return replay_tasks(tasks, lambda: _worker_pool(workers))
        return (backtest_path(path, settings) for path, settings in tasks)

    return run


def run_backtest(
    paths: Iterable[Path],
    settings: Settings | Mapping[str, Any] | None = None,
    out_dir: Path | None = None,
    on_result: Callable[[RecordingResult | RecordingFailure], None] | None = None,
    history: HistoryStore | None = None,
    jobs: int = 1,
    runner: Runner | None = None,
) -> BacktestReport:
    """Backtest every recording in ``paths`` (already expanded); results come in input order.

    With ``jobs`` > 1 and several recordings, up to ``jobs`` worker processes replay them at
    once; a ``runner`` (a Ray cluster) replays them wherever it runs tasks. Each recording gets
    a fresh pipeline either way, so the results are the same as in one process. A ``history``
    store is written by this process alone, so it replays here, in order, without a runner.
    """
    settings = Settings.load(settings)
    paths = list(paths)
    if history is not None:
        if runner is not None:
            raise ValueError("a backtest that writes a history replays in this process")
        results: Iterable[RecordingResult | RecordingFailure] = (
            backtest_path(path, settings, history) for path in paths
        )
    else:
        results = (runner or local_runner(jobs))([(path, settings) for path in paths])
    return _collect(results, out_dir, on_result)


def _worker_pool(workers: int) -> Executor:
    # spawn, not fork: polars' thread pool does not survive a fork.
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(
        workers, mp_context=context, initializer=_exit_with, initargs=(os.getpid(),)
    )


def in_workers(
    paths: list[Path], settings: Settings, pool: Callable[[], Executor]
) -> Iterator[RecordingResult | RecordingFailure]:
    """Results of ``paths``, all replayed with ``settings``, from a pool of workers."""
    return replay_tasks([(path, settings) for path in paths], pool)


def replay_tasks(
    tasks: list[Task], pool: Callable[[], Executor]
) -> Iterator[RecordingResult | RecordingFailure]:
    """Results of ``tasks`` from a pool of workers, in input order. A worker that dies (killed
    for memory, say) breaks the pool: the tasks without a result yet are then replayed in this
    process, with a warning, rather than losing the results already made."""
    done = 0
    try:
        with pool() as executor:
            paths = [path for path, _ in tasks]
            for result in executor.map(backtest_path, paths, [s for _, s in tasks]):
                done += 1
                yield result
    except BrokenExecutor as exc:
        log.warning(
            "backtest: a worker process died (%s); replaying the other %d recording(s) here",
            exc,
            len(tasks) - done,
        )
        for path, settings in tasks[done:]:
            yield backtest_path(path, settings)


def _exit_with(parent: int) -> None:
    """Worker initializer: end the worker once the process that started it is gone (a killed
    ``medic backtest`` would otherwise leave its workers waiting on the task queue forever)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _collect(
    results: Iterable[RecordingResult | RecordingFailure],
    out_dir: Path | None,
    on_result: Callable[[RecordingResult | RecordingFailure], None] | None,
) -> BacktestReport:
    report = BacktestReport()
    for result in results:
        if isinstance(result, RecordingFailure):
            log.error("backtest: skipped %s", result.error)
            report.failures.append(result)
        else:
            if out_dir is not None:
                write_result(result, out_dir)
            report.results.append(result)
        if on_result is not None:
            on_result(result)
    return report


def read_backtest(
    paths: Iterable[Path], out_dir: Path, calibration: Calibration | None = None
) -> BacktestReport:
    """A backtest's results read back from its ``--out`` directory and scored again against
    the labels of the recordings at ``paths`` (already expanded), without replaying. A
    recording whose ``out_dir/<name>/detections.parquet`` is missing or unreadable is a
    RecordingError (one line). Files written before calibration get their ``score`` as
    ``raw_score`` (it was the raw one); with ``calibration``, every ``score`` is computed again
    from ``raw_score`` by it (``Calibration.rescore``)."""
    report = BacktestReport()
    for path in paths:
        file = out_dir / path.name / "detections.parquet"
        if not file.is_file():
            raise RecordingError(f"{file}: missing (no detections of {path.name} in {out_dir})")
        try:
            detections = schema.conform(pq.read_table(file), schema.DETECTIONS_WRITTEN)
            suspects = out_dir / path.name / SUSPECTS_FILE
            if suspects.is_file():
                read = schema.conform(pq.read_table(suspects), schema.DETECTIONS_WRITTEN)
                detections = pa.concat_tables([detections, read]).sort_by("detected_at")
        except (pa.ArrowException, OSError) as exc:
            raise RecordingError(f"{file}: unreadable ({exception_line(exc)})") from None
        detections = detections.set_column(
            detections.schema.get_field_index("raw_score"),
            schema.DETECTIONS_WRITTEN.field("raw_score"),
            pa.array(raw_scores(detections), pa.float64()),
        )
        features = _read_features(out_dir / path.name / FEATURES_FILE)
        if calibration is not None:
            detections = calibration.rescore(detections, features)
        recording = open_recording(path)
        report.results.append(
            RecordingResult(
                name=path.name,
                path=path,
                detections=detections,
                score=score(detections, recording.labels),
                elapsed_s=0.0,
                rows=0,
                actions=schema.empty(schema.ACTIONS),
                features=features,
            )
        )
    return report


def _read_features(file: Path) -> pa.Table | None:
    """A backtest's ``features.parquet``; None when it has none (written before features were,
    or damaged: a calibration then reads the raw scores alone)."""
    if not file.is_file():
        return None
    try:
        return pq.read_table(file)
    except (pa.ArrowException, OSError) as exc:
        log.warning("%s: unreadable, features left out (%s)", file, exception_line(exc))
        return None
