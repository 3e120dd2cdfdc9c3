"""Incidents: a job's detections grouped as one (the detection that opened it plus the
symptoms that joined it), and the correlator that groups them. History, the pipeline and
the actions all read incidents from here."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from medic.detectors.base import CONFIRMED, Detection
from medic.slurm import RUNNING, job_state
from medic.timeutil import US

# Job states after which a job runs again as a new attempt (a requeued job keeps its id).
RESTART_STATES = (RUNNING,)


HARDWARE_KINDS = ("gpu_fault", "node_failure")
CONSEQUENCE_SLACK_US = 60 * US
"""A job's stall begins at its last step, up to a step before the fault its driver or its peers
report, and its ranks abort within a minute of it: a symptom's onset lies this close to the
fault's, before or after it."""
FAULT_MEMORY_US = 3600 * US
"""How long a job's hardware fault explains what its job does next: NCCL's watchdog times a
collective out 10 to 30 minutes after a GPU or a node stopped answering."""


def began(detection: Detection) -> int:
    """When what ``detection`` reports began: its onset, else its detection."""
    return detection.detected_at if detection.onset is None else detection.onset


def strength(detection: Detection) -> tuple[bool, bool, bool]:
    """How much a detection says: a confirmed one over a suspect, one that blames nodes over
    one that does not, hardware kinds over the others. An incident is named after its strongest
    detection."""
    return detection.confirmed, bool(detection.culprits), detection.kind in HARDWARE_KINDS


SUSPECTED = "suspected "
"""Prefix of the kind of a suspect's findings: a confirmed detection of the same (kind,
culprit) is news to an incident that only suspected it."""


def findings(detection: Detection) -> set[tuple[str, str | None]]:
    """What a detection tells about its job: (kind, culprit) per blamed node, or (kind, None);
    a suspect's kind is ``SUSPECTED`` + its kind."""
    kind = detection.kind if detection.confirmed else SUSPECTED + detection.kind
    if not detection.culprits:
        return {(kind, None)}
    return {(kind, node) for node in detection.culprits}


@dataclass
class Incident:
    """One job's incident: the detection that opened it plus the symptoms that joined it."""

    first: Detection
    last_seen: int
    symptoms: list[Detection] = field(default_factory=list)
    symptom_count: int = 0
    job_stopped: bool = False
    """The scheduler showed the job leave RUNNING (failed, requeued, ...) since the incident
    opened; its next RUNNING row is a new attempt."""
    strongest: Detection | None = None
    """The detection that says most (``strength``); the first until a stronger one joins."""
    seen: set[tuple[str, str | None]] = field(default_factory=set)
    """Every (kind, culprit) its detections brought (``findings``)."""

    def __post_init__(self) -> None:
        self.strongest = self.strongest or self.first
        self.seen |= findings(self.first)
        for detection in self.symptoms:
            self.seen |= findings(detection)

    @property
    def kind(self) -> str:
        assert self.strongest is not None
        return self.strongest.kind

    def news(self, detection: Detection) -> bool:
        """Whether ``detection`` brings a (kind, culprit) the incident has not seen: a new kind,
        or a node not blamed yet (a detection blaming no node adds nothing to a kind seen), or
        the confirmation of what it only suspected. A suspect of what is confirmed already
        brings nothing."""
        seen = self.seen
        if not detection.confirmed:
            confirmed = dataclasses.replace(detection, tier=CONFIRMED)
            seen = seen | {(SUSPECTED + kind, node) for kind, node in self.seen}
            if not self._brings(confirmed, self.seen):
                return False
        return self._brings(detection, seen)

    @staticmethod
    def _brings(detection: Detection, seen: set[tuple[str, str | None]]) -> bool:
        found = findings(detection)
        if detection.culprits:
            return not found <= seen
        kinds = {kind for kind, _ in found}
        return not any(kind in kinds for kind, _ in seen)

    def join(self, detection: Detection, max_symptoms: int) -> None:
        self.last_seen = max(self.last_seen, detection.detected_at)
        self.symptom_count += 1
        if len(self.symptoms) < max_symptoms:
            self.symptoms.append(detection)
        self.seen |= findings(detection)
        assert self.strongest is not None
        if strength(detection) > strength(self.strongest):
            self.strongest = detection


class IncidentCorrelator:
    """Groups each job's detections into incidents, for the history and notifications (as
    Alertmanager groups alerts). Grouping never hides news from the rules: a detection that
    brings a new (kind, culprit) to its job's open incident (an Xid after a crash, a fault on
    another node) is emitted, marked with the incident; only repeats of what the incident
    already holds are kept back. A job's incident stays open while its detections come within
    ``window_us`` of the previous one, and closes when the job runs again after stopping (a
    requeue) or the window passes; de-duplicating actions is the guards' and the journal's job.

    A confirmed hardware fault (a GPU's, a node's) explains what its job does next, until the job
    runs again: a hang, a crash or a suspect that blames no node and began with the fault
    (within ``CONSEQUENCE_SLACK_US``: NCCL's watchdog timing out, 30 minutes on, the collective
    the dead GPU never joined; the peers' aborts) is its symptom, joined to the fault's incident
    while that is open and never emitted: the fault's routes already drain its node and requeue
    the job. A stall that began later, the job having gone on, is news."""

    def __init__(self, window_us: int, max_symptoms: int) -> None:
        self.window_us = window_us
        self.max_symptoms = max_symptoms
        self.open: dict[str, Incident] = {}
        self.closed: list[Incident] = []
        self.faulted: dict[str, tuple[int, bool]] = {}
        """Job -> (the onset of its attempt's first confirmed hardware fault, whether the job
        stopped since): what follows it is its symptom (``_follows_fault``)."""

    def admit(self, detection: Detection) -> Detection | None:
        """``detection`` marked with its incident when it must be emitted (it opens an incident
        or brings news to one), else None (it only joins its incident)."""
        if detection.job_id is None:
            return detection
        if self._follows_fault(detection):
            incident = self.open.get(detection.job_id)
            if incident is not None:
                incident.join(detection, self.max_symptoms)
            return None
        self._note_fault(detection)
        incident = self.open.get(detection.job_id)
        if incident is not None and detection.detected_at - incident.last_seen <= self.window_us:
            news = incident.news(detection)
            incident.join(detection, self.max_symptoms)
            return dataclasses.replace(detection, incident=incident.first.id) if news else None
        if incident is not None:
            self.closed.append(self.open.pop(detection.job_id))
        self.open[detection.job_id] = Incident(first=detection, last_seen=detection.detected_at)
        return dataclasses.replace(detection, incident=detection.id)

    def _follows_fault(self, detection: Detection) -> bool:
        """Whether ``detection`` is a symptom of its job's confirmed hardware fault: of another
        kind, blaming no node, and begun within ``CONSEQUENCE_SLACK_US`` of it."""
        fault = self.faulted.get(detection.job_id or "")
        if fault is None or detection.kind in HARDWARE_KINDS or detection.culprits:
            return False
        return abs(began(detection) - fault[0]) <= CONSEQUENCE_SLACK_US

    def _note_fault(self, detection: Detection) -> None:
        """Mark the job of a confirmed hardware fault faulted, from its attempt's first one."""
        job_id, hardware = detection.job_id, detection.kind in HARDWARE_KINDS
        if job_id is not None and detection.confirmed and hardware:
            self.faulted.setdefault(job_id, (began(detection), False))

    def observe_scheduler(self, frame: pl.DataFrame) -> None:
        """A job that stopped and then runs again (a requeue) begins a new attempt: its open
        incident closes, and its fault explains nothing more. A RUNNING row of a job that never
        stopped (a poller's snapshot after a restart) changes nothing."""
        if (not self.open and not self.faulted) or frame.is_empty():
            return
        watched = [*self.open, *self.faulted]
        rows = frame.filter((pl.col("kind") == "job") & pl.col("job_id").is_in(watched))
        for job_id, state in rows.select("job_id", "state").iter_rows():
            running = job_state(state) in RESTART_STATES
            fault = self.faulted.get(job_id)
            if fault is not None:
                if running and fault[1]:
                    del self.faulted[job_id]
                elif not running:
                    self.faulted[job_id] = (fault[0], True)
            incident = self.open.get(job_id)
            if incident is None:
                continue
            if running and incident.job_stopped:
                self.closed.append(self.open.pop(job_id))
            elif not running:
                incident.job_stopped = True

    def restore(self, incidents: Iterable[Incident]) -> None:
        """Reopen incidents a previous run had open (read back from the history), so a restarted
        service does not alert again on what it already reported, nor on its hardware faults'
        symptoms (a fault read back without its onset dates from its detection)."""
        for incident in incidents:
            job_id = incident.first.job_id
            if job_id is None:
                continue
            self.open[job_id] = incident
            for detection in (incident.first, *incident.symptoms):
                self._note_fault(detection)

    def expire(self, now: int) -> None:
        stale = [job for job, inc in self.open.items() if now - inc.last_seen > self.window_us]
        for job in stale:
            self.closed.append(self.open.pop(job))
        for job in [j for j, (onset, _) in self.faulted.items() if now - onset > FAULT_MEMORY_US]:
            del self.faulted[job]

    def take_closed(self) -> list[Incident]:
        """Closed incidents since the last call (for the history), forgetting them here."""
        closed, self.closed = self.closed, []
        return closed
