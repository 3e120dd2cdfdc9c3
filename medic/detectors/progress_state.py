"""Per-job progress state folded from the ``progress`` stream: the step clock and the phases.

The hang and the straggler detector each watch jobs through a ``WatchedJobs``, one shared by
both when they forget jobs after the same silence (``share_watched_jobs``). Its
``ProgressTracker`` turns progress rows
into what those models need: new training steps (with the gap since the previous one and
whether that gap was clean, i.e. spanned no checkpoint, evaluation or counter restart), the
time of the last sign of life, the open phase (checkpoint or evaluation) with how long such
phases have lasted in this job, and the last step each printing rank reached.

The progress stream holds events, not raw lines (a step or a phase boundary each), so the fold
visits them one by one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from medic.detectors.jobs import JobTracker
from medic.detectors.telemetry import node_jobs
from medic.frames import present, times_us
from medic.ingest.base import Batch

PHASE_OF = {
    "checkpoint_start": "checkpoint",
    "checkpoint_load": "checkpoint",
    "eval_start": "eval",
    "eval_step": "eval",
}
PHASE_END = {"checkpoint_end": "checkpoint", "eval_end": "eval"}
FINAL_EVENTS = frozenset({"train_end", "job_end"})
MAX_RANKS = 4096
"""Most printing ranks remembered per job (a bound; ranks beyond it are not tracked)."""


COLUMNS = (
    "time",
    "job_id",
    "node",
    "rank",
    "framework",
    "event",
    "step",
    "step_time_s",
    "throughput",
)
"""The ``progress`` columns the fold reads, in the order it unpacks them (time in integer
microseconds)."""


Step = tuple[str, int, int | None, int | None, bool, bool, float | None, float | None, str]
"""One new training step of one job: ``(job_id, time, step, gap_us, fresh, clean, step_time_s,
throughput, framework)``.

* ``gap_us``: the time since the job's previous training step; None for its first.
* ``fresh``: no phase (checkpoint, evaluation) and no counter restart came since the previous
  step: what the line prints describes ordinary training steps.
* ``clean``: ``fresh`` and there was a previous step: the gap is a healthy-model sample.

A plain tuple, not a NamedTuple: the garbage collector stops tracking a tuple of plain values
at its first pass over it, but never an instance of a tuple subclass. The fold of a large batch
makes tens of thousands of steps; tracked, they reach the collector's oldest generation and set
off full collections, each a walk over all of medic's objects (about 50 ms; three or four per
million log lines in ``bench/pipeline_throughput.py``)."""


@dataclass(slots=True)
class Phase:
    kind: str
    started: int
    framework: str


@dataclass(slots=True)
class JobProgress:
    """What the progress stream has shown of one job."""

    first_step_at: int | None = None
    last_step_at: int | None = None
    last_step: int | None = None
    last_event_at: int | None = None
    phase: Phase | None = None
    phase_touched: bool = False
    longest_phase_us: dict[str, int] = field(default_factory=dict)
    phase_ended: dict[str, int] = field(default_factory=dict)
    """Per phase kind, the time of the latest line that ended one."""
    finished_at: int | None = None
    rank_steps: dict[int, tuple[int, str]] = field(default_factory=dict)
    """rank -> (last step it printed, node), for ranks that print steps."""

    def phase_allowance_us(self, kind: str, cold_us: int, floor_us: int, factor: float) -> int:
        """How long a phase of ``kind`` may run: ``factor`` times the longest this job has had
        (at least ``floor_us``), or ``cold_us`` before the job finished one."""
        longest = self.longest_phase_us.get(kind)
        return cold_us if longest is None else max(floor_us, round(factor * longest))


class ProgressTracker:
    """Folds ``progress`` batches into per-job ``JobProgress``; reports new training steps."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobProgress] = {}

    def __len__(self) -> int:
        return len(self.jobs)

    def forget(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)

    def observe(self, frame: pl.DataFrame) -> list[Step]:
        """Fold progress rows (time-sorted) in; return the new training steps, in time order.
        A step printed by several ranks counts once; a late print of an earlier step is
        ignored.

        A training step is folded inline, the phase events apart (``_phase_event``): steps are
        nearly every row, and a call per row costs as much as the rest of the fold."""
        if frame.is_empty():
            return []
        steps: list[Step] = []
        columns = [  # times as integer microseconds, every other value as it is
            times_us(frame).tolist() if name == "time" else frame.get_column(name).to_list()
            for name in COLUMNS
        ]
        jobs, phase_event, close_phase = self.jobs, self._phase_event, self._close_phase
        newest: dict[str, int] = {}  # each job's last sign of life in the batch
        for time, job_id, node, rank, framework, event, number, step_time_s, throughput in zip(
            *columns, strict=True
        ):
            job = jobs.get(job_id)
            if job is None:
                job = jobs[job_id] = JobProgress()
            if time > newest.get(job_id, time - 1):
                newest[job_id] = time
            if event != "step":
                phase_event(job, time, event, framework)
                continue
            phase, last = job.phase, job.last_step
            if phase is not None:
                if phase.kind == "eval" and not _ends_eval(phase, framework, number, last):
                    continue  # an evaluation bar counting its own batches
                if number is None and last is not None:
                    # A line with no step number (Hugging Face Trainer's log dict) in a phase
                    # of a job whose other lines number its steps: it says nothing of training
                    # being back (its stdout, flushed after the save's first lines on stderr,
                    # often follows them); the next numbered step does.
                    continue
            if rank is not None and number is not None:
                ranks = job.rank_steps
                if rank in ranks or len(ranks) < MAX_RANKS:
                    ranks[rank] = (number, node)
            restarted = False
            if number is not None and last is not None and number <= last:
                if number == last and (step_time_s is not None or throughput is not None):
                    _repaced(steps, job_id, time, number, step_time_s, throughput)
                if number == last or number > last // 2:
                    continue  # the same step again, or a late print of a recent one
                restarted = True  # the counter started over (a new epoch's bar, a resumed run)
            if phase is not None:
                close_phase(job, time)
            job.finished_at = None  # a training loop that starts again (a second stage) is watched
            previous = job.last_step_at
            gap = None if previous is None else time - previous
            fresh = not job.phase_touched and not restarted
            if job.first_step_at is None:
                job.first_step_at = time
            job.last_step_at = time
            if number is not None:
                job.last_step = number
            job.phase_touched = False
            clean = fresh and gap is not None and gap > 0
            steps.append(
                (job_id, time, number, gap, fresh, clean, step_time_s, throughput, framework)
            )
        for job_id, time in newest.items():
            job = jobs[job_id]
            if job.last_event_at is None or time > job.last_event_at:
                job.last_event_at = time
        return steps

    def _phase_event(self, job: JobProgress, time: int, event: str, framework: str) -> None:
        """Fold a row that is no training step in: a phase begins or ends, or training does."""
        if event in FINAL_EVENTS:
            job.finished_at = time
            return
        if event in PHASE_END:
            self._close_phase(job, time)
            over = PHASE_END[event]
            job.phase_ended[over] = max(time, job.phase_ended.get(over, time))
            job.phase_touched = True
            return
        kind = PHASE_OF.get(event)
        if kind is not None and (job.phase is None or job.phase.kind != kind):
            ended = job.phase_ended.get(kind)
            if ended is not None and time <= ended:
                # Its end came first: a shipper delivered the node's later second first
                # (Fluent Bit, Vector and Promtail ship batches, and retry them, independently).
                # The phase is over; it lasted until that end.
                job.longest_phase_us[kind] = max(job.longest_phase_us.get(kind, 0), ended - time)
            else:
                self._close_phase(job, time)
                job.phase = Phase(kind, time, framework)
        job.phase_touched = True

    @staticmethod
    def _close_phase(job: JobProgress, time: int) -> None:
        phase = job.phase
        if phase is None:
            return
        lasted = max(0, time - phase.started)
        job.longest_phase_us[phase.kind] = max(job.longest_phase_us.get(phase.kind, 0), lasted)
        job.phase = None


REPRINT_US = 1_000_000
"""A print of a job's newest step this soon after it is the same report's second line."""


def _repaced(
    steps: list[Step],
    job_id: str,
    time: int,
    number: int,
    step_time_s: float | None,
    throughput: float | None,
) -> None:
    """Give the job's newest step of ``steps`` the pace a second print of it carries, when that
    step gave none and came within ``REPRINT_US``: one report over two lines, its counter on one
    and its pace on the other (DeepSpeed logs ``step=N, skipped=.., lr=..`` and then its
    throughput timer's ``global_step=N, ..., CurrSamplesPerSec=..``). Only a batch's own steps
    are looked at: the two lines come a moment apart."""
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step[0] != job_id:
            continue
        if (
            step[2] == number
            and step[6] is None
            and step[7] is None
            and time - step[1] <= REPRINT_US
        ):
            steps[index] = (*step[:6], step_time_s, throughput, step[8])
        return


def _ends_eval(phase: Phase, framework: str, number: int | None, last: int | None) -> bool:
    """Whether a step row (of ``framework``, numbered ``number``; the job's last step was
    ``last``) is training again, not an evaluation bar inside the eval phase."""
    if framework == phase.framework or number is None or last is None:
        return True
    return number > last


class WatchedJobs:
    """The jobs a progress-based detector watches, and when to let each one go.

    Folds scheduler batches (placement, ends) and progress batches. A job is done when Slurm
    ends it or its training loop says it finished, and released when nothing was heard of it
    for ``forget_after_s``. An ended job stays as a tombstone for ``forget_after_s`` so that
    late lines of it do not start a new watch (a requeued job that runs again is watched
    afresh).
    """

    def __init__(self, forget_after_s: float) -> None:
        self.forget_after_us = round(forget_after_s * 1_000_000)
        self.scheduler = JobTracker()
        self.progress = ProgressTracker()
        self.placement: pl.DataFrame | None = None
        self._ended: list[str] = []
        self._scheduler_seen: tuple[Batch, list[str]] | None = None
        self._progress_seen: tuple[pl.DataFrame, list[Step]] | None = None
        self._released: tuple[int, list[str]] | None = None
        """The last batch, frame and time folded in, and what they gave: detectors sharing
        this watch each pass them, and every one gets the answer of the first."""

    def __len__(self) -> int:
        return len(self.progress) + len(self.scheduler)

    def observe_scheduler(self, batch: Batch) -> list[str]:
        """Fold a scheduler batch in; return the jobs it ended."""
        if self._scheduler_seen is not None and self._scheduler_seen[0] is batch:
            return self._scheduler_seen[1]
        ended = self.scheduler.observe(batch)
        self._scheduler_seen = (batch, ended)
        for job_id in ended:
            self.progress.forget(job_id)
        placement = node_jobs(self.scheduler)
        if self.placement is None or not placement.equals(self.placement):
            # Kept as the same object while it holds: GPU windows read the batches labelled
            # with one placement in one query.
            self.placement = placement
        self._ended = [j.job_id for j in self.scheduler.jobs.values() if not j.running]
        return ended

    def observe_progress(self, frame: pl.DataFrame) -> list[Step]:
        """Fold progress rows of jobs that have not ended; return their new training steps."""
        if self._progress_seen is not None and self._progress_seen[0] is frame:
            return self._progress_seen[1]
        rows = frame
        if self._ended:  # read as arrays: a query costs more than a second's few rows
            jobs = rows.get_column("job_id")
            known = present(jobs)
            ended = known & np.isin(jobs.to_numpy(), self._ended)
            if ended.any():
                rows = rows.filter(pl.Series(known & ~ended))
        steps = self.progress.observe(rows)
        self._progress_seen = (frame, steps)
        return steps

    def release(self, now: int) -> list[str]:
        """Jobs silent past ``forget_after_s`` at ``now``, forgotten here; ended jobs' tombstones
        expire too. (A job whose training finished stays, marked, until then.)"""
        if self._released is not None and self._released[0] == now:
            return self._released[1]
        horizon = now - self.forget_after_us
        gone = [
            job_id
            for job_id, job in self.progress.jobs.items()
            if (job.last_event_at or now) < horizon
        ]
        for job_id in gone:
            self.progress.forget(job_id)
        stale = [
            job_id
            for job_id, info in self.scheduler.jobs.items()
            if info.ended_at is not None and info.ended_at < horizon
        ]
        for job_id in stale:
            self.scheduler.forget(job_id)
        if stale:
            self._ended = [j.job_id for j in self.scheduler.jobs.values() if not j.running]
        self._released = (now, gone)
        return gone

    def done(self, job_id: str) -> bool:
        """Whether Slurm ended the job or its training said it finished."""
        info = self.scheduler.jobs.get(job_id)
        if info is not None and not info.running:
            return True
        job = self.progress.jobs.get(job_id)
        return job is not None and job.finished_at is not None


class WatchesJobs:
    """A detector that follows jobs through a ``WatchedJobs``."""

    jobs: WatchedJobs

    def use_jobs(self, jobs: WatchedJobs) -> None:
        self.jobs = jobs


def share_watched_jobs(detectors: Iterable[object]) -> None:
    """One ``WatchedJobs`` for the detectors that forget jobs after the same silence: they fold
    the same scheduler and progress batches, so one copy does the work once (the per-row
    progress fold is most of what a burst of log lines costs them)."""
    shared: dict[int, WatchedJobs] = {}
    for detector in detectors:
        if isinstance(detector, WatchesJobs):
            detector.use_jobs(shared.setdefault(detector.jobs.forget_after_us, detector.jobs))
