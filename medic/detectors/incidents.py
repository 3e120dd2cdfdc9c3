"""Which jobs a piece of hardware evidence concerns, and one detection per job and culprit.

Shared by ``gpu_fault`` and ``node_failure`` (and by ``crash``, for placement): evidence seen
on a node concerns the jobs running there (from the scheduler, from what the node's GPUs
report, or, for a job the scheduler does not place, from the job's own recent log lines on the
node: a logs-only deployment still gets its kernel Xid lines attributed), and a job that
*failed* a moment ago (its peers often crash before a dead node's silence is certain); a job
that ended on purpose (completed, cancelled, timed out) is past caring. Each job gets one
detection per culprit node until it runs again: its earliest evidence first, then one for each
node that later evidence blames (a fault on another node of the job is a new fault, to be acted
on; more lines about a node already blamed are not).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from medic.detectors.attribution import Evidence, JobEvidence
from medic.detectors.base import CONFIRMED, Detection
from medic.detectors.jobs import JobTracker, started_jobs
from medic.detectors.liveness import Liveness
from medic.ingest.base import Batch
from medic.slurm import JOB_FAILURE_STATES
from medic.timeutil import US

Headline = Callable[[str, JobEvidence], str]
LOG_PLACEMENT_US = 900 * US
"""A job that wrote a line from a node within this span runs there, as far as logs tell."""


@dataclass(frozen=True)
class JobChanges:
    """Jobs a scheduler batch started (or restarted after a requeue) and ended."""

    started: list[str]
    ended: list[str]


class IncidentBook:
    """Job placement and state, the jobs already reported, and the recently ended ones."""

    def __init__(self, kind: str, detector: str, grace_us: int, liveness: Liveness) -> None:
        self.kind = kind
        self.detector = detector
        self.grace_us = grace_us
        self.liveness = liveness
        """Telemetry names the job each GPU holds, for jobs the scheduler stream never shows."""
        self.jobs = JobTracker()
        self.reported: set[str] = set()
        self.blamed: dict[str, set[str]] = {}
        """Reported job -> the nodes its detections blamed."""
        self.ended: dict[str, int] = {}
        """Job -> end time, until ``forget_ended`` frees it."""

    def __len__(self) -> int:
        return len(self.jobs) + len(self.reported) + len(self.ended) + len(self.blamed)

    def observe(self, batch: Batch) -> JobChanges:
        """Fold a scheduler batch in: the jobs it (re)started and the jobs it ended."""
        started = [
            job_id
            for job_id in started_jobs(batch.frame)
            if job_id not in self.jobs.jobs or not self.jobs.jobs[job_id].running
        ]
        for job_id in started:
            self.reported.discard(job_id)
            self.blamed.pop(job_id, None)
            self.ended.pop(job_id, None)
        ended = self.jobs.observe(batch)
        for job_id in ended:
            self.ended[job_id] = self.jobs.jobs[job_id].ended_at or 0
        return JobChanges(started, ended)

    def concerned(self, job_id: str | None, node: str | None, time: int) -> list[str]:
        """The jobs that evidence seen at ``time`` (on ``node``, or of ``job_id``) concerns."""
        if job_id is not None:
            candidates = [job_id]
        elif node:
            candidates = self.jobs.jobs_on(node, ended_since=time - self.grace_us)
            candidates += sorted(self._telemetry_jobs(node) - set(candidates))
            candidates += sorted(self._log_jobs(node, time) - set(candidates))
        else:
            candidates = []
        return [job for job in candidates if self._responsible(job, time)]

    def is_reported(self, job_id: str, node: str | None) -> bool:
        """Whether evidence on ``node`` (None: no node) adds nothing to what was reported of the
        job: the job was reported and the node is unknown or already blamed."""
        if job_id not in self.reported:
            return False
        return node is None or node in self.blamed.get(job_id, ())

    def _telemetry_jobs(self, node: str) -> set[str]:
        """Jobs the node's GPUs last reported holding, unless they reported it before the job's
        current attempt started (a requeued job that left a dead node behind)."""
        seen = self.liveness.node_seen_at(node) or 0
        jobs = set()
        for job_id in self.liveness.jobs_on(node):
            info = self.jobs.jobs.get(job_id)
            if info is None or info.started_at is None or seen >= info.started_at:
                jobs.add(job_id)
        return jobs

    def _log_jobs(self, node: str, time: int) -> set[str]:
        """Jobs that wrote from the node lately, unless the scheduler places them elsewhere, or
        has them queued since their last line there (a line after that shows the job started
        before the scheduler's next poll says so)."""
        jobs = set()
        for job_id in self.liveness.log_jobs_on(node, time - LOG_PLACEMENT_US):
            info = self.jobs.jobs.get(job_id)
            if info is None:
                jobs.add(job_id)
            elif info.pending_since is not None:
                if job_id in self.liveness.log_jobs_on(node, info.pending_since + 1):
                    jobs.add(job_id)
            elif not info.nodes or node in info.nodes:
                jobs.add(job_id)
        return jobs

    def _responsible(self, job_id: str, time: int) -> bool:
        """Running then, or failed shortly before (a job seen only in this evidence counts)."""
        info = self.jobs.jobs.get(job_id)
        if info is None:
            return True
        if info.ended_at is None or info.ended_at >= time:
            return True
        return info.state in JOB_FAILURE_STATES and info.ended_at >= time - self.grace_us

    def report(
        self,
        evidence: list[tuple[str | None, Evidence]],
        headline: Headline,
        confirmed_at: int | None = None,
        tier: str = CONFIRMED,
    ) -> list[Detection]:
        """One detection per concerned job that the evidence tells something new about (see
        ``is_reported``), from its earliest such evidence.

        Evidence that takes time to be sure of (a silence) concerns the jobs as they are when
        it is ``confirmed_at``: a job that ended normally meanwhile took its GPUs with it.
        Suspects (``tier``) leave the job unreported: its confirmation is news."""
        incidents: dict[str, JobEvidence] = {}
        for job_id, item in sorted(evidence, key=lambda pair: pair[1].time):
            at = item.time if confirmed_at is None else confirmed_at
            for job in self.concerned(job_id, item.node, at):
                if not self.is_reported(job, item.node):
                    incidents.setdefault(job, JobEvidence(job)).add([item])
        found = []
        for job, incident in incidents.items():
            culprits = incident.culprits()
            if job in self.reported and not culprits:
                continue
            if tier == CONFIRMED:
                self.reported.add(job)
                self.blamed.setdefault(job, set()).update(culprits)
            found.append(
                Detection(
                    job_id=job,
                    kind=self.kind,
                    culprits=culprits,
                    ranks=incident.ranks(),
                    score=incident.confidence(),
                    detector=self.detector,
                    summary=incident.summary(headline(job, incident)),
                    onset=incident.onset,
                    evidence=incident.details(),
                    tier=tier,
                )
            )
        return found

    def forget_ended(self, cutoff: int) -> None:
        """Free the jobs that ended before ``cutoff`` (keep them past the grace, so that stale
        telemetry naming an ended job does not bring it back)."""
        for job_id in [j for j, end in self.ended.items() if end < cutoff]:
            del self.ended[job_id]
            self.jobs.forget(job_id)
            self.reported.discard(job_id)
            self.blamed.pop(job_id, None)


class ReadsLiveness:
    """A detector that reads a ``Liveness``. The pipeline gives all of them one
    (``share_liveness``): they fold the same ``gpu_latest`` batches, so one copy does the work
    once instead of once per detector (each prunes what it no longer needs)."""

    liveness: Liveness

    def use_liveness(self, liveness: Liveness) -> None:
        self.liveness = liveness


class WatchesLiveness(ReadsLiveness):
    """A detector whose incident book reads the ``Liveness`` too."""

    book: IncidentBook

    def use_liveness(self, liveness: Liveness) -> None:
        self.liveness = liveness
        self.book.liveness = liveness


def share_liveness(detectors: Iterable[object]) -> None:
    shared = Liveness()
    for detector in detectors:
        if isinstance(detector, ReadsLiveness):
            detector.use_liveness(shared)
