"""``nan_divergence``: the training loss went NaN or infinite, or diverged, and stays so.

Evidence, per job, in event time:

* the loss its step lines report (the ``progress`` stream's ``loss``): ``nonfinite_reports``
  reports in a row NaN or infinite, or two spanning ``nonfinite_steps`` steps or more (a
  framework with dynamic loss scaling skips the step whose gradients overflow and reports a
  finite loss at the next one: one bad report is no divergence); or the median of the last
  ``window`` reports ``growth`` times the lowest median of the (up to ``history``) reports
  before them that the attempt has had, and above every loss the job reported before them (a
  spike of a report or two moves no median; a loss climbing back from near zero to where it
  began is no divergence; a loss climbing tenfold every few hundred steps, printed at each,
  grows a hundredfold only over its lowest level, not over its last few dozen reports);
* the frameworks' own words (signatures of kind ``nan_divergence``): a ``fatal`` one (the
  framework gives up: minimum loss scale reached, a NaN check's assertion, Keras'
  TerminateOnNaN) at once; overflow skips (dynamic loss scaling halving its scale) only once one
  process skipped ``skipped_steps`` steps within ``skip_window_s``: fp16 training skips a few
  dozen steps while its scale settles at the start, and one now and then after that.

An attempt of the job ends when Slurm shows it stop (requeued, pending) or its step count goes
back (a restart from a checkpoint), or with a start-up or checkpoint-load line. The loss history
restarts with each attempt and the detector fires at most once per attempt. A divergence in an
attempt after one that diverged says so, with the step each diverged at: the same checkpoint and
data diverge again, which no node explains. The detection never blames a node.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from medic.config import Positive, PositiveCount
from medic.detectors.base import Detection
from medic.frames import holds, present, times_us
from medic.ingest.base import Batch
from medic.slurm import JOB_ENDED_STATES, PENDING, REQUEUED, job_state
from medic.timeutil import US

KIND = "nan_divergence"
RESTARTS = ("startup", "checkpoint_load")
"""Progress events that begin an attempt."""
EVENTS = ["step", *RESTARTS]
"""The progress events the detector reads: steps (with their loss) and (re)starts."""
STOPPED = frozenset({REQUEUED, PENDING})
"""Slurm states of a job between two attempts."""


@dataclass(frozen=True)
class NanDivergenceConfig:
    """When a job's loss has gone non-finite or diverged (``[detectors.nan_divergence]``)."""

    nonfinite_reports: PositiveCount = 3
    """Loss reports in a row that are NaN or infinite."""
    nonfinite_steps: PositiveCount = 50
    """Training steps that two NaN or infinite reports in a row span (a job printing its loss
    seldom, whose bad loss persisted over that many steps)."""
    window: PositiveCount = 3
    """Latest loss reports whose median is compared with the job's history."""
    history: PositiveCount = 20
    """Loss reports before the window (at most) whose median is the job's recent level; a job
    with fewer than ``window`` of them is not judged on growth."""
    growth: Positive = 100.0
    """How many times its lowest recent level so far the window's median must be (and above
    every loss reported before the window)."""
    skipped_steps: PositiveCount = 64
    """Overflow skips of one process within ``skip_window_s`` that make a divergence (an fp16
    job's loss scale settles with a few dozen at its start)."""
    skip_window_s: Positive = 600.0
    """The span ``skipped_steps`` counts over."""
    forget_s: Positive = 3600.0
    """A job's state is dropped this long after it ended, or after its last row."""


def _median(ordered: list[float]) -> float:
    """The median of sorted values, as ``statistics.median`` computes it."""
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


@dataclass
class _Job:
    """One job's loss history in its current attempt, and what its attempts did."""

    window: int
    losses: deque[float]
    """Latest finite reports' absolute losses (the non-finite ones make the streak)."""
    times: deque[int]
    history: list[float] = field(default_factory=list)
    """The reports before the window (all of ``losses`` but its last ``window``), sorted: a
    median at each report without sorting them again."""
    peak: float = -math.inf
    """The largest loss that has been before the window in the attempt (the reports
    ``losses`` dropped included)."""
    lowest_level: float = math.inf
    """The lowest median of the reports before the window so far in the attempt: a loss that
    climbs slowly (tenfold every few hundred steps, printed at each) never grows a hundredfold
    over the few dozen reports ``losses`` holds, but does over its lowest level."""
    streak: int = 0
    """Non-finite reports in a row; ``streak_since`` and ``streak_from``: the first one's time
    and step."""
    streak_since: int = 0
    streak_from: int | None = None
    last_step: int | None = None
    """The step its latest step line named."""
    steps: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per process (node/rank): the time and step of its latest step line (in event time: a
    line delivered late never looks like a step going back)."""
    stopped: bool = False
    attempt: int = 0
    fired: int = -1
    """The attempt the detector last fired in."""
    diverged: list[tuple[int, int | None]] = field(default_factory=list)
    """(attempt, step) of each attempt that diverged."""
    skips: dict[str, deque[int]] = field(default_factory=dict)
    """Per process (node/rank): times of its latest overflow skips."""
    last_seen: int = 0
    ended_at: int | None = None

    def restart(self) -> None:
        self.attempt += 1
        self.losses.clear()
        self.times.clear()
        self.history.clear()
        self.peak, self.lowest_level = -math.inf, math.inf
        self.streak, self.last_step, self.stopped = 0, None, False
        self.steps.clear()
        self.skips.clear()

    def add(self, loss: float, time: int, step: int | None) -> None:
        if math.isfinite(loss):
            losses, history = self.losses, self.history
            if len(losses) == losses.maxlen:
                del history[bisect.bisect_left(history, losses[0])]
            losses.append(abs(loss))
            self.times.append(time)
            self.streak = 0
            if len(losses) > self.window:
                entered = losses[-self.window - 1]
                bisect.insort(history, entered)
                self.peak = max(self.peak, entered)
            if len(losses) >= 2 * self.window:
                self.lowest_level = min(self.lowest_level, _median(history))
        else:
            if self.streak == 0:
                self.streak_since, self.streak_from = time, step
            self.streak += 1

    def streak_steps(self) -> int:
        """Steps the non-finite reports in a row span (0 when their steps are unknown)."""
        if self.streak < 2 or self.streak_from is None or self.last_step is None:
            return 0
        return self.last_step - self.streak_from

    def growth(self) -> tuple[float, float, float] | None:
        """(window median, the lowest history median of the attempt, peak before the window)
        once the history holds as many reports as the window."""
        losses = self.losses
        if len(losses) < 2 * self.window:
            return None
        recent = sorted(itertools.islice(losses, len(losses) - self.window, None))
        return _median(recent), self.lowest_level, self.peak


class NanDivergenceDetector:
    """progress + signatures + scheduler -> ``nan_divergence`` detections."""

    name: ClassVar[str] = "nan_divergence"
    streams: ClassVar[frozenset[str]] = frozenset({"progress", "signatures", "scheduler"})
    Config: ClassVar[type] = NanDivergenceConfig

    def __init__(self, config: NanDivergenceConfig | None = None) -> None:
        self.config = config or NanDivergenceConfig()
        self.jobs: dict[str, _Job] = {}

    def state_size(self) -> int:
        return len(self.jobs)

    def update(self, batch: Batch) -> list[Detection]:
        frame = batch.frame
        if frame.is_empty() or "job_id" not in frame.columns:
            return []
        if batch.stream == "progress":
            return self._progress(frame)
        frame = frame.filter(pl.col("job_id").is_not_null())
        if batch.stream == "signatures":
            return self._signatures(frame)
        if batch.stream == "scheduler":
            self._scheduler(frame)
        return []

    def advance(self, watermark: int) -> list[Detection]:
        horizon = int(self.config.forget_s * US)
        stale = [
            job_id
            for job_id, job in self.jobs.items()
            if watermark - (job.last_seen if job.ended_at is None else job.ended_at) > horizon
        ]
        for job_id in stale:
            del self.jobs[job_id]
        return []

    def _job(self, job_id: str) -> _Job:
        job = self.jobs.get(job_id)
        if job is None:
            size = self.config.window + self.config.history
            job = _Job(self.config.window, deque(maxlen=size), deque(maxlen=size))
            self.jobs[job_id] = job
        return job

    def _progress(self, frame: pl.DataFrame) -> list[Detection]:
        """Per job, its step and start-up rows in order (a handful a batch: frameworks print a
        loss every few steps)."""
        if "event" not in frame.columns:
            return []
        found = []
        for job_id, time, process, event, step, value in _step_rows(frame):
            job = self._job(job_id)
            job.last_seen = max(job.last_seen, time)
            before = job.steps.get(process)
            later = before is None or time >= before[0]
            went_back = step is not None and before is not None and later and step < before[1]
            begun = bool(job.steps) or job.streak > 0
            if (event in RESTARTS and begun) or went_back or (job.stopped and event == "step"):
                job.restart()
            if step is not None and later:
                job.last_step = step
                job.steps[process] = (time, step)
            if value is None:
                continue
            job.add(value, time, step)
            detection = self._judge_loss(job_id, job, time)
            if detection is not None:
                found.append(detection)
        return found

    def _judge_loss(self, job_id: str, job: _Job, time: int) -> Detection | None:
        if job.fired == job.attempt:
            return None
        config = self.config
        spanned = job.streak_steps()
        if job.streak >= config.nonfinite_reports or spanned >= config.nonfinite_steps:
            over = f" over {spanned} steps" if spanned else ""
            what = f"its last {job.streak} loss reports are NaN or infinite{over}"
            return self._fire(job_id, job, 0.8, job.streak_since, what, {"nonfinite": job.streak})
        grown = job.growth()
        if grown is None:
            return None
        recent, level, peak = grown
        if not (recent >= config.growth * level and recent > peak):
            return None
        ratio = recent / level if level > 0 else math.inf
        surer = min(1.0, math.log10(ratio / config.growth) / 2) if math.isfinite(ratio) else 1.0
        what = (
            f"its loss grew to {recent:.4g} (median of {config.window} reports) from {level:.4g} "
            f"(its lowest median of {len(job.losses) - config.window} reports), above its earlier "
            f"peak {peak:.4g}"
        )
        onset = job.times[-config.window]
        evidence = {"loss": recent, "level": level, "peak": peak}
        return self._fire(job_id, job, 0.6 + 0.2 * surer, onset, what, evidence)

    def _signatures(self, frame: pl.DataFrame) -> list[Detection]:
        if "kind" not in frame.columns or not holds(frame.get_column("kind"), KIND):
            return []
        rows = frame.filter(pl.col("kind") == KIND)
        if rows.is_empty():
            return []
        rows = rows.select(
            "job_id", pl.col("time").dt.epoch("us"), "severity", "signature", _process(rows)
        )
        found = []
        window = int(self.config.skip_window_s * US)
        for job_id, time, severity, signature, process in rows.iter_rows():
            job = self._job(job_id)
            job.last_seen = max(job.last_seen, time)
            if job.fired == job.attempt:
                continue
            if severity == "fatal":
                what = f"the framework gave up on a non-finite loss ({signature})"
                found.append(self._fire(job_id, job, 0.9, time, what, {"signature": signature}))
                continue
            skips = job.skips.setdefault(process, deque())
            skips.append(time)
            while skips[0] < time - window:
                skips.popleft()
            if len(skips) >= self.config.skipped_steps:
                what = (
                    f"one process skipped {len(skips)} steps on overflow within "
                    f"{self.config.skip_window_s:g} s ({signature})"
                )
                evidence = {"skips": len(skips), "signature": signature}
                found.append(self._fire(job_id, job, 0.6, skips[0], what, evidence))
        return found

    def _scheduler(self, frame: pl.DataFrame) -> None:
        if "kind" not in frame.columns:
            return
        rows = frame.filter(pl.col("kind") == "job").select(
            "job_id", pl.col("time").dt.epoch("us"), "state"
        )
        for job_id, time, state in rows.iter_rows():
            job = self.jobs.get(job_id)
            if job is None:
                continue
            state = job_state(state)
            job.last_seen = max(job.last_seen, time)
            if state in JOB_ENDED_STATES:
                job.ended_at = time
            job.stopped = job.stopped or state in STOPPED or state in JOB_ENDED_STATES

    def _fire(
        self,
        job_id: str,
        job: _Job,
        score: float,
        onset: int,
        what: str,
        evidence: dict[str, Any],
    ) -> Detection:
        job.fired = job.attempt
        earlier = [(a, s) for a, s in job.diverged if a < job.attempt]
        job.diverged.append((job.attempt, job.last_step))
        step = "" if job.last_step is None else f" at step {job.last_step}"
        summary = f"job {job_id}: training diverged{step}: {what}"
        if earlier:
            before = ", ".join(
                f"attempt {a + 1}" + ("" if s is None else f" at step {s}") for a, s in earlier
            )
            summary += (
                f"; it diverged before ({before}) and did again after a restart: the same "
                "checkpoint and data, not a node"
            )
            score = 1.0 - (1.0 - score) / 2
        return Detection(
            job_id=job_id,
            kind=KIND,
            score=score,
            detector=self.name,
            summary=summary,
            onset=onset,
            evidence={
                **evidence,
                "attempt": job.attempt + 1,
                "step": job.last_step,
                "repeats": len(earlier),
            },
        )


def _process(frame: pl.DataFrame) -> pl.Expr:
    """The process that printed each row: its node and rank (as far as the row names them)."""
    parts = [pl.col(c).cast(pl.String).fill_null("") for c in ("node", "rank") if c in frame]
    return pl.concat_str(parts or [pl.lit("")], separator="/").alias("process")


def _step_rows(frame: pl.DataFrame) -> list[tuple[Any, ...]]:
    """The rows of a progress batch that have a job and are a step or a (re)start, in time
    order (ties as they came): job id, time (us), process (``node/rank``, each as far as the
    row names it), event, step and loss. Read through numpy and lists: on a second's few rows
    a polars query costs far more than the rows."""
    events = frame.get_column("event").to_numpy()
    jobs = frame.get_column("job_id")
    # a comparison per event read: np.isin sorts an array of Python strings, which costs more
    wanted = present(jobs) & np.logical_or.reduce([events == event for event in EVENTS])
    picked = np.flatnonzero(wanted)
    if not picked.size:
        return []
    times = times_us(frame)[picked]
    if picked.size > 1 and bool((times[1:] < times[:-1]).any()):
        order = np.argsort(times, kind="stable")
        picked, times = picked[order], times[order]
    taken = picked.tolist()

    def column(name: str) -> list[Any]:
        if name not in frame.columns:
            return [None] * len(taken)
        values = frame.get_column(name).to_list()
        return [values[i] for i in taken]

    parts = [column(c) for c in ("node", "rank") if c in frame.columns] or [[""] * len(taken)]
    process = ["/".join("" if v is None else str(v) for v in p) for p in zip(*parts, strict=True)]
    losses = [None if v is None else float(v) for v in column("loss")]
    return list(
        zip(
            jobs.to_numpy()[picked].tolist(),
            times.tolist(),
            process,
            events[picked].tolist(),
            column("step"),
            losses,
            strict=True,
        )
    )
