"""Restart-loop guard: requeue a job only when it made progress since its last restart.

``JobAttempts`` watches the ``progress`` stream (steps and checkpoint saves, as the progress
parser reads them) and the ``scheduler`` stream, and splits each job's life into attempts: an
attempt ends when the job stops (Slurm shows it leave RUNNING, or medic requeues it). An attempt
made progress when it saved a checkpoint or, for a job that never logs checkpoints, when it
stepped past the highest step of every attempt before it.

``RestartLoopGuard`` reviews the verdicts of the other guards: a requeue of a job whose last
``max_restarts_without_progress`` restarts all came to nothing is stopped (guard
``restart_loop``) and replaced by a hold of the job and a notification. It counts by failure
too: each attempt keeps its last confirmed failure (its ``failure_key``: the kind and the
evidence that names it), whoever restarted the job, and a job whose futile restarts all ended in the
same failure as the one at hand is held after ``max_same_failure_restarts``, sooner: a failure
that repeats from the same checkpoint on other nodes is the job's, not a node's. A job that
never logged any progress at all is not judged (medic cannot tell a loop from a framework it
does not read). Event time only: a replay behaves like live.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from medic.actions.guards import Guards, Verdict
from medic.actions.model import NOTIFY, Intent
from medic.actions.recovery_config import RestartLoopConfig
from medic.detectors.base import Detection
from medic.frames import present, times_us
from medic.ingest.base import Batch
from medic.slurm import PENDING, RUNNING, job_state
from medic.timeutil import US

ROUTE = "restart-loop"
RETENTION_US = 7 * 86_400 * US
"""A job unseen this long is forgotten."""

IDENTIFYING = ("signatures", "signature", "step")
"""Evidence keys that name a failure (what it said, where it stopped); the rest (scores,
durations, counts) differ between two occurrences of the same failure."""


def failure_key(detection: Detection) -> tuple[Hashable, ...] | None:
    """The kind, the identifying evidence and the blamed nodes of a detection; None when its
    evidence names nothing to compare (two such failures are not known to be the same). The
    nodes are part of it: the same Xid on another node after a requeue is a second bad node,
    not the job repeating its own failure."""
    named = tuple(
        (key, _frozen(detection.evidence[key]))
        for key in IDENTIFYING
        if detection.evidence.get(key) not in (None, "", [], ())
    )
    return (detection.kind, tuple(sorted(detection.culprits)), *named) if named else None


def _frozen(value: Any) -> Hashable:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value if isinstance(value, Hashable) else repr(value)


@dataclass
class _Job:
    starts: list[int] = field(default_factory=lambda: [0])
    """Event time each attempt began (the first attempt at 0)."""
    max_step: list[int] = field(default_factory=lambda: [-1])
    checkpoints: list[int] = field(default_factory=lambda: [0])
    failures: list[tuple[Hashable, ...] | None] = field(default_factory=lambda: [None])
    """Each attempt's last confirmed failure (``failure_key``)."""
    stopped: bool = False
    last_seen: int = 0

    def restart(self, time: int) -> None:
        if time > self.starts[-1]:
            self.starts.append(time)
            self.max_step.append(-1)
            self.checkpoints.append(0)
            self.failures.append(None)

    def progressed(self, attempt: int) -> bool:
        if self.checkpoints[attempt]:
            return True
        if any(self.checkpoints):
            return False
        return self.max_step[attempt] > max(self.max_step[:attempt], default=-1)

    @property
    def logged_progress(self) -> bool:
        return any(self.checkpoints) or max(self.max_step) >= 0

    def futile_restarts(self) -> int:
        """Restarts, counting back from the current attempt, whose attempt made no progress."""
        count = 0
        for attempt in range(len(self.starts) - 1, 0, -1):
            if self.progressed(attempt):
                break
            count += 1
        return count

    def same_failure_restarts(self, key: tuple[Hashable, ...] | None) -> int:
        """Futile restarts, counting back from the current attempt (which failed with ``key``),
        whose attempt before failed with ``key`` too."""
        count = 0
        for attempt in range(len(self.starts) - 1, 0, -1):
            if key is None or self.progressed(attempt) or self.failures[attempt - 1] != key:
                break
            count += 1
        return count


class JobAttempts:
    """Each job's attempts and the progress each made (a pipeline observer)."""

    name: ClassVar[str] = "job_attempts"
    streams: ClassVar[frozenset[str]] = frozenset({"progress", "scheduler"})

    def __init__(self) -> None:
        self.jobs: dict[str, _Job] = {}

    def state_size(self) -> int:
        return len(self.jobs)

    def job(self, job_id: str) -> _Job | None:
        return self.jobs.get(job_id)

    def update(self, batch: Batch) -> None:
        frame = batch.frame
        if frame.is_empty():
            return
        if batch.stream == "scheduler":
            self._scheduler(frame)
        elif batch.stream == "progress":
            self._progress(frame)

    def advance(self, watermark: int) -> None:
        for job_id in [j for j, s in self.jobs.items() if watermark - s.last_seen > RETENTION_US]:
            del self.jobs[job_id]

    def failed(self, job_id: str, key: tuple[Hashable, ...] | None) -> None:
        """The job's current attempt failed with ``key`` (its last confirmed detection,
        whoever restarts it: medic, Slurm or its user)."""
        job = self.jobs.get(job_id)
        if job is not None:
            job.failures[-1] = key

    def requeued(self, job_id: str, now: int) -> None:
        """medic requeued the job at ``now``: its current attempt ends."""
        job = self.jobs.setdefault(job_id, _Job())
        job.restart(now)
        job.stopped, job.last_seen = True, max(job.last_seen, now)

    def _scheduler(self, frame: pl.DataFrame) -> None:
        rows = frame.filter((pl.col("kind") == "job") & pl.col("job_id").is_not_null())
        times = pl.col("time").dt.epoch("us")
        for job_id, state, at in rows.select("job_id", "state", times).iter_rows():
            job = self.jobs.setdefault(job_id, _Job())
            job.last_seen = max(job.last_seen, at)
            running = job_state(state) == RUNNING
            if running:
                job.stopped = False
            elif not job.stopped and job_state(state) != PENDING:
                job.stopped = True
                job.restart(at)

    def _progress(self, frame: pl.DataFrame) -> None:
        """Fold a batch of progress rows into each job's attempts: the highest step and the
        checkpoints of each attempt, with array operations over the batch (a loop over its
        jobs and attempts, never its rows; a row without a job belongs to no attempt). The
        columns are read as arrays: a polars query costs more than a second's few rows."""
        events = frame.get_column("event").to_numpy()
        job_ids = frame.get_column("job_id")
        is_step, is_checkpoint = events == "step", events == "checkpoint_end"
        kept = (is_step | is_checkpoint) & present(job_ids)
        if not kept.any():
            return
        jobs = job_ids.to_numpy()[kept]
        us = times_us(frame)[kept]
        steps = _filled(frame.get_column("step"), -1)[kept]
        is_step, is_checkpoint = is_step[kept], is_checkpoint[kept]
        for job_id in dict.fromkeys(jobs.tolist()):
            rows = jobs == job_id
            job = self.jobs.setdefault(job_id, _Job())
            times = us[rows]
            if int(times.min()) >= job.starts[-1]:  # the usual batch: the current attempt's
                checkpoints = int((rows & is_checkpoint).sum())
                _fold(job, len(job.starts) - 1, times, steps[rows & is_step], checkpoints)
                continue
            starts = np.asarray(job.starts, dtype=np.int64)
            attempts = np.searchsorted(starts, times, side="right") - 1
            for attempt in np.unique(attempts).tolist():
                at = rows.copy()
                at[rows] = attempts == attempt
                checkpoints = int((at & is_checkpoint).sum())
                _fold(job, attempt, us[at], steps[at & is_step], checkpoints)


def _fold(
    job: _Job, attempt: int, times: np.ndarray, stepped: np.ndarray, checkpoints: int
) -> None:
    """Fold an attempt's rows of a batch in: their times, steps and checkpoints ended."""
    if len(stepped):
        job.max_step[attempt] = max(job.max_step[attempt], int(stepped.max()))
    job.checkpoints[attempt] += checkpoints
    job.last_seen = max(job.last_seen, int(times.max()))


def _filled(column: pl.Series, value: int) -> np.ndarray:
    """An integer column as an int64 array, ``value`` where null (numpy gives NaN there)."""
    array = column.to_numpy()
    if column.null_count():
        array = np.where(np.isnan(array), value, array)
    return array.astype(np.int64)


class RestartLoopGuard:
    """Turns the requeue of a job in a restart loop into a hold and a notification."""

    def __init__(self, config: RestartLoopConfig, attempts: JobAttempts, guards: Guards) -> None:
        self.config = config
        self.attempts = attempts
        self.guards = guards

    def review(self, verdicts: list[Verdict], detection: Detection, now: int) -> list[Verdict]:
        key = failure_key(detection)
        if detection.job_id is not None and detection.confirmed:
            self.attempts.failed(detection.job_id, key)
        out: list[Verdict] = []
        for verdict in verdicts:
            intent = verdict.intent
            passed = verdict.guard in (None, "monitor")
            if intent.action != "requeue" or not passed or intent.job_id is None:
                out.append(verdict)
                continue
            loop = self._loop(intent.job_id, key)
            if loop is None:
                out.append(verdict)
                if verdict.guard is None:
                    self.attempts.requeued(intent.job_id, now)
                continue
            out.append(Verdict(intent, "restart_loop", loop))
            self.guards.undo_requeue(intent.job_id, now)
            hold = Intent("hold", ROUTE, job_id=intent.job_id)
            out.append(Verdict(hold, "monitor", verdict.reason) if verdict.guard else Verdict(hold))
            out.extend(
                Verdict(Intent(NOTIFY, ROUTE, job_id=intent.job_id, receiver=name))
                for name in self.config.notify
            )
        return out

    def _loop(self, job_id: str, key: tuple[Hashable, ...] | None) -> str | None:
        """Why the job is in a restart loop; None when it is not (or cannot be told)."""
        cap = self.config.max_restarts_without_progress
        same_cap = self.config.max_same_failure_restarts
        job = self.attempts.job(job_id)
        if cap == 0 or job is None or not job.logged_progress:
            return None
        no_step = f"no checkpoint saved, no step past {max(job.max_step)}"
        same = job.same_failure_restarts(key)
        if 0 < same_cap <= same:
            return (
                f"job {job_id} failed the same way ({_named(key)}) after each of its last "
                f"{same} restarts, with no progress ({no_step}; max_same_failure_restarts = "
                f"{same_cap}): the job, not a node; held for a person instead of requeued"
            )
        futile = job.futile_restarts()
        if futile < cap:
            return None
        return (
            f"job {job_id} made no progress in its last {futile} restarts ({no_step}; "
            f"max_restarts_without_progress = {cap}): held for a person instead of requeued"
        )


def _named(key: tuple[Hashable, ...] | None) -> str:
    """``kind, on nodes, signatures ...``: a failure key in words."""
    if key is None:
        return "unknown"
    kind, nodes, *named = key
    words = [str(kind)]
    if isinstance(nodes, tuple) and nodes:
        words.append("on " + ", ".join(map(str, nodes)))
    for item in named:
        name, value = item if isinstance(item, tuple) else (item, "")
        shown = ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)
        words.append(f"{name} {shown}")
    return ", ".join(words)
