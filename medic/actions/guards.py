"""Guards: limits that hold whatever the routes ask, checked in event time.

``Guards.review`` takes the intents of one detection in execution order and returns, for each,
the first guard that stops it and why (or that it may run). An intent that passes is counted at
once against cooldowns and budgets, so the second drain of the same plan already sees the first.
In monitor mode the last guard, ``monitor``, stops every Slurm action, but only after the others
passed and were counted: a monitor-mode run (and a backtest) shows what enforce mode would
have done, budgets and cooldowns included. Windows use the event time handed in, never the wall
clock, so replay behaves like live. All state is bounded: entries leave once their window ends.

Incidents are the pipeline's (``Detection.incident``, see ``medic.incident.IncidentCorrelator``):
every detection that brings news reaches the guards, and the ``incident`` guard lets each action
run once per incident, so an Xid that upgrades a crash gets its node drained while the job,
already requeued for the crash, is not requeued again.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from medic.actions.config import GuardConfig, Mode
from medic.actions.model import JOB_ACTIONS, NODE_ACTIONS, NOTIFY, Intent, JobFacts
from medic.detectors.base import Detection
from medic.timeutil import US

HOUR_US = 3600 * US

GUARDS = (
    "unblamed",
    "no_job",
    "partition",
    "incident",
    "node_cooldown",
    "drains_per_hour",
    "drained_fraction",
    "restart_budget",
    "monitor",
)
"""Every guard name that can appear in the ``guard`` column of the actions table (besides
``journal``, the write-ahead idempotency check, and the reviews after these: ``nvrx`` in
``medic.nvrx`` and ``restart_loop`` in ``medic.actions.restart_loop``), in the order they are
checked."""


@dataclass(frozen=True)
class Verdict:
    """An intent and the guard that stops it (None: it may run), with the guard's reason."""

    intent: Intent
    guard: str | None = None
    reason: str = ""
    incident: str = ""
    """The incident it was reviewed in (its journal key names it: once per incident, across
    restarts too)."""


@dataclass
class _Incident:
    id: str
    touched_at: int
    acted: set[tuple[str, str]] = field(default_factory=set)
    requeued_at: int | None = None


def incident_key(detection: Detection) -> str:
    """The pipeline's incident of the detection; outside a pipeline (``medic rules test``), a
    job's incident is keyed by the job, a jobless one by the nodes it blames."""
    if detection.incident is not None:
        return pipeline_incident_key(detection.incident)
    if detection.job_id is not None:
        return f"job:{detection.job_id}"
    if detection.culprits:
        return "nodes:" + ",".join(sorted(set(detection.culprits)))
    return f"detection:{detection.id}"


def pipeline_incident_key(incident_id: str) -> str:
    return f"incident:{incident_id}"


def _seconds(us: int) -> str:
    return f"{us / US:.0f} s"


class Guards:
    """Guard state (incidents, cooldowns, budgets) and the checks over it."""

    def __init__(self, config: GuardConfig, mode: Mode, incident_window_s: float) -> None:
        self.config = config
        self.mode = mode
        self.incident_window_us = round(incident_window_s * US)
        """How long an incident's state is kept after its last detection: the pipeline's
        incident window (``[pipeline] incident_window_s``), after which it closes there too."""
        self.incidents: dict[str, _Incident] = {}
        self.node_acted_at: dict[str, int] = {}
        self.drain_times: deque[int] = deque()
        self.restarts: dict[str, deque[int]] = {}
        self.drained: set[str] = set()
        """Nodes medic drained that are still drained, as far as it knows."""

    def state_size(self) -> int:
        return len(self.incidents) + len(self.node_acted_at) + len(self.restarts)

    def sync_drained(self, nodes: Iterable[str]) -> None:
        """Take Slurm's word for which nodes medic has drained (an operator may have resumed
        some, or medic restarted)."""
        self.drained = set(nodes)

    def restore_requeue(self, incident_id: str, job_id: str, at: int) -> None:
        """A requeue of ``job_id`` done at ``at`` in the pipeline incident ``incident_id`` by a
        previous run (read back from the history): it counts against the job's restart budget,
        and a detection whose onset follows it is a new attempt, as if this run had done it."""
        key = pipeline_incident_key(incident_id)
        incident = self.incidents.setdefault(key, _Incident(key, touched_at=at))
        self._count(Intent("requeue", "history", job_id=job_id), incident, at)

    def undo_requeue(self, job_id: str, at: int) -> None:
        """A requeue counted at ``at`` that did not happen (the restart-loop guard turned it into
        a hold) does not use up the job's restart budget."""
        times = self.restarts.get(job_id)
        if times and times[-1] == at:
            times.pop()

    def undo_drain(self, node: str) -> None:
        """A drain that did not take effect does not count towards the drained fraction."""
        self.drained.discard(node)

    def review(
        self,
        detection: Detection,
        intents: Iterable[Intent],
        facts: JobFacts | None,
        now: int,
        cluster_nodes: int | None = None,
    ) -> list[Verdict]:
        """The verdict on each intent, counting those that pass (see the module docstring)."""
        self._expire(now)
        incident = self._incident(detection, now)
        verdicts = []
        for intent in intents:
            stop = self._check(intent, detection, facts, incident, now, cluster_nodes)
            if stop is None and intent.action != NOTIFY and self.mode == "monitor":
                stop = ("monitor", "monitor mode: enforce mode would run it")
            if stop is None or stop[0] == "monitor":
                self._count(intent, incident, now)
            guard, reason = stop or (None, "")
            verdicts.append(Verdict(intent, guard, reason, incident.id))
        return verdicts

    def _check(
        self,
        intent: Intent,
        detection: Detection,
        facts: JobFacts | None,
        incident: _Incident,
        now: int,
        cluster_nodes: int | None,
    ) -> tuple[str, str] | None:
        action = intent.action
        if action == "drain" and (intent.node is None or intent.node not in detection.culprits):
            return "unblamed", "no detection blamed a node: medic never drains an unblamed node"
        if action in JOB_ACTIONS and intent.job_id is None:
            return "no_job", f"the detection names no job to {action}"
        if action != NOTIFY and self.config.partitions:
            stop = self._partition(facts)
            if stop:
                return "partition", stop
        if (action, intent.target) in incident.acted:
            return "incident", f"{intent.target} already got {action} in this incident"
        if action in NODE_ACTIONS and intent.node is not None:
            last = self.node_acted_at.get(intent.node)
            if last is not None and now - last < self.config.node_cooldown_s * US:
                return "node_cooldown", (
                    f"node {intent.node} was acted on {_seconds(now - last)} ago "
                    f"(node_cooldown_s = {self.config.node_cooldown_s:g})"
                )
        if action == "drain" and intent.node is not None:
            return self._drain_budget(intent.node, cluster_nodes)
        if action == "requeue" and intent.job_id is not None:
            return self._restart_budget(intent.job_id)
        return None

    def _partition(self, facts: JobFacts | None) -> str | None:
        allowed = ", ".join(self.config.partitions)
        if facts is None or facts.partition is None:
            return f"the job's partition is unknown; only {allowed} may be acted on"
        if facts.partition not in self.config.partitions:
            return f"partition {facts.partition} is not in the allow-list ({allowed})"
        return None

    def _drain_budget(self, node: str, cluster_nodes: int | None) -> tuple[str, str] | None:
        cap = self.config.max_drains_per_hour
        if len(self.drain_times) >= cap:
            return "drains_per_hour", (
                f"{len(self.drain_times)} drains in the last hour (max_drains_per_hour = {cap})"
            )
        total = self.config.cluster_nodes or cluster_nodes
        budget = self.drain_budget(total)
        after = len(self.drained | {node})
        if after > budget:
            size = f"{total} nodes" if total is not None else "a cluster of unknown size"
            return "drained_fraction", (
                f"draining {node} would leave {after} nodes drained by medic, over the budget "
                f"of {budget} for {size} (max_drained_nodes = {self.config.max_drained_nodes}, "
                f"max_drained_fraction = {self.config.max_drained_fraction:g})"
            )
        return None

    def drain_budget(self, cluster_nodes: int | None) -> int:
        """How many nodes medic may hold drained at once: ``max_drained_nodes``, or the
        ``max_drained_fraction`` of the cluster when that is more (the cluster's size unknown,
        the count alone)."""
        count = self.config.max_drained_nodes
        if cluster_nodes is None:
            return count
        return max(count, math.floor(self.config.max_drained_fraction * cluster_nodes))

    def _restart_budget(self, job_id: str) -> tuple[str, str] | None:
        times = self.restarts.get(job_id, ())
        cap = self.config.max_restarts_per_job
        if len(times) >= cap:
            return "restart_budget", (
                f"job {job_id} was requeued {len(times)} times within "
                f"{self.config.restart_window_s:g} s (max_restarts_per_job = {cap})"
            )
        return None

    def _incident(self, detection: Detection, now: int) -> _Incident:
        key = incident_key(detection)
        incident = self.incidents.get(key)
        new_attempt = (
            incident is not None
            and incident.requeued_at is not None
            and detection.onset is not None
            and detection.onset > incident.requeued_at
        )
        if incident is None or new_attempt:
            attempt = key if incident is None else f"{key} after {detection.onset}"
            incident = self.incidents[key] = _Incident(attempt, touched_at=now)
        incident.touched_at = now
        return incident

    def _count(self, intent: Intent, incident: _Incident, now: int) -> None:
        incident.acted.add((intent.action, intent.target))
        if intent.action in NODE_ACTIONS and intent.node is not None:
            self.node_acted_at[intent.node] = now
        if intent.action == "drain" and intent.node is not None:
            self.drain_times.append(now)
            self.drained.add(intent.node)
        if intent.action == "requeue" and intent.job_id is not None:
            self.restarts.setdefault(intent.job_id, deque()).append(now)
            incident.requeued_at = now

    def _expire(self, now: int) -> None:
        window = self.incident_window_us
        for key in [k for k, inc in self.incidents.items() if now - inc.touched_at > window]:
            del self.incidents[key]
        cooldown = self.config.node_cooldown_s * US
        for node in [n for n, t in self.node_acted_at.items() if now - t >= cooldown]:
            del self.node_acted_at[node]
        while self.drain_times and now - self.drain_times[0] >= HOUR_US:
            self.drain_times.popleft()
        restart_window = self.config.restart_window_s * US
        for job_id, times in list(self.restarts.items()):
            while times and now - times[0] >= restart_window:
                times.popleft()
            if not times:
                del self.restarts[job_id]
