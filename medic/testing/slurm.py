"""An in-memory Slurm behind the Executor seam, for tests of what medic does to a cluster.

It keeps the state an executor reads back (drained nodes and their reasons, each job's state,
restart count and excluded nodes) and counts the commands that change it, so a test can assert
that an action ran exactly once. It behaves as ``SlurmCli`` does: a node or job it does not know
fails, draining a drained node changes nothing, a requeue whose restart count rose since
``since_restarts`` is not issued again, and a requeue naming an unknown node to exclude is
refused before anything runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from medic.actions.model import JobFacts, Outcome, done, failed

DOWN = failed("Unable to contact slurm controller (connect failure)")


@dataclass
class FakeJob:
    state: str = "RUNNING"
    restarts: int = 0
    excluded: set[str] = field(default_factory=set)
    held: bool = False


class FakeSlurm:
    """Executor over an in-memory cluster (see the module docstring)."""

    name = "fake-slurm"
    supports = frozenset({"drain", "resume", "requeue", "hold", "release", "cancel"})

    def __init__(self, nodes: Iterable[str], jobs: Iterable[str] = ()) -> None:
        self.drained: dict[str, str] = {}
        self.nodes = set(nodes)
        self.jobs = {job_id: FakeJob() for job_id in jobs}
        self.commands: Counter[tuple[str, str]] = Counter()
        """Commands that changed the cluster, by (action, target)."""
        self.up = True
        """False: the controller does not answer (every call fails, nothing changes)."""

    def drain(self, node: str, reason: str) -> Outcome:
        if not self.up:
            return DOWN
        if node not in self.nodes:
            return failed(f"node {node} is not known to Slurm")
        if node in self.drained:
            return done(f"node {node} already drained: {self.drained[node]}", changed=False)
        self.commands["drain", node] += 1
        self.drained[node] = reason
        return done(f"node {node} draining, reason set")

    def resume(self, node: str) -> Outcome:
        if node not in self.nodes:
            return failed(f"node {node} is not known to Slurm")
        if self.drained.pop(node, None) is None:
            return done(f"node {node} is idle, not drained", changed=False)
        self.commands["resume", node] += 1
        return done(f"node {node} idle")

    def requeue(
        self, job_id: str, exclude: Sequence[str] = (), since_restarts: int | None = None
    ) -> Outcome:
        if not self.up:
            return DOWN
        unknown = sorted(set(exclude) - self.nodes)
        if unknown:
            return failed(f"node {', '.join(unknown)} is not known to Slurm")
        job = self.jobs.get(job_id)
        if job is None:
            return failed(f"job {job_id} is not known to Slurm")
        already = since_restarts is not None and job.restarts > since_restarts
        if not already:
            self.commands["requeue", job_id] += 1
            job.restarts += 1
            job.state = "PENDING"
        job.excluded |= set(exclude)
        where = f", excluding {', '.join(sorted(job.excluded))}" if job.excluded else ""
        return done(f"job {job_id} requeued (restarts {job.restarts}){where}")

    def hold(self, job_id: str) -> Outcome:
        return self._hold(job_id, True)

    def release(self, job_id: str) -> Outcome:
        return self._hold(job_id, False)

    def cancel(self, job_id: str) -> Outcome:
        job = self.jobs.get(job_id)
        if job is None:
            return failed(f"job {job_id} is not known to Slurm")
        if job.state == "CANCELLED":
            return done(f"job {job_id} already ended (CANCELLED)", changed=False)
        self.commands["cancel", job_id] += 1
        job.state = "CANCELLED"
        return done(f"job {job_id} cancelled")

    def _hold(self, job_id: str, held: bool) -> Outcome:
        job = self.jobs.get(job_id)
        if job is None:
            return failed(f"job {job_id} is not known to Slurm")
        if job.held != held:
            self.commands["hold" if held else "release", job_id] += 1
            job.held = held
        return done(f"job {job_id} {'held' if held else 'released'} ({job.state})")

    def job(self, job_id: str) -> JobFacts | None:
        job = self.jobs.get(job_id)
        return None if job is None else JobFacts(job_id, state=job.state, restarts=job.restarts)

    def node_count(self) -> int | None:
        return len(self.nodes) if self.up else None

    def node_checks(self) -> None:
        return None

    def drained_nodes(self) -> dict[str, str] | None:
        return dict(self.drained)
