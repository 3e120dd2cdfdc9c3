"""The incident correlator: what a job's detections open, bring, or only join."""

from __future__ import annotations

import polars as pl

from medic.detectors.base import Detection
from medic.incident import IncidentCorrelator
from medic.testing.builders import at
from medic.timeutil import US


def seen(
    kind: str,
    t: float,
    culprits: tuple[str, ...] = (),
    onset: float | None = None,
    tier: str = "confirmed",
) -> Detection:
    return Detection(
        "7",
        kind,
        culprits,
        detected_at=at(t),
        onset=None if onset is None else at(onset),
        detector=kind,
        tier=tier,
    )


def scheduler(t: float, state: str) -> pl.DataFrame:
    return pl.DataFrame([{"time": at(t), "kind": "job", "job_id": "7", "state": state}])


def test_what_a_jobs_hardware_fault_leaves_behind_is_its_symptom_not_news() -> None:
    correlator = IncidentCorrelator(600 * US, 8)
    assert correlator.admit(seen("gpu_fault", 100, ("n3",), onset=99)) is not None
    # NCCL's watchdog times the collective out 20 minutes on, the incident's window long past:
    # a hang that began with the fault, blaming no node, is the fault's (and so is a suspect)
    correlator.expire(at(1300))
    assert correlator.admit(seen("hang", 1300, onset=95)) is None
    assert correlator.admit(seen("crash", 1302, onset=101, tier="suspect")) is None
    # what names a node, or a hardware kind, is news still
    assert correlator.admit(seen("node_failure", 1303, ("n4",))) is not None
    assert correlator.admit(seen("hang", 1304, ("n5",), onset=1200)) is not None


def test_a_stall_that_began_well_before_or_after_the_fault_is_news() -> None:
    correlator = IncidentCorrelator(600 * US, 8)
    correlator.admit(seen("gpu_fault", 1000, ("n3",), onset=1000))
    correlator.expire(at(1700))
    assert correlator.admit(seen("hang", 1700, onset=900)) is not None
    # the job went on for ten minutes after the fault, then stalled: another failure
    assert correlator.admit(seen("crash", 1710, onset=1600)) is not None


def test_symptoms_join_the_faults_incident_while_it_is_open() -> None:
    correlator = IncidentCorrelator(600 * US, 8)
    correlator.admit(seen("node_failure", 100, ("n2",), onset=80))
    assert correlator.admit(seen("crash", 130)) is None
    correlator.expire(at(2000))
    (incident,) = correlator.take_closed()
    assert [d.kind for d in incident.symptoms] == ["crash"]


def test_a_requeued_job_runs_a_new_attempt_its_old_fault_explains_nothing_of() -> None:
    correlator = IncidentCorrelator(600 * US, 8)
    correlator.admit(seen("gpu_fault", 100, ("n3",), onset=100))
    correlator.observe_scheduler(scheduler(150, "RUNNING"))
    assert correlator.admit(seen("crash", 160)) is None, "a snapshot, not a restart"
    correlator.observe_scheduler(scheduler(200, "REQUEUED"))
    correlator.observe_scheduler(scheduler(300, "RUNNING"))
    assert correlator.admit(seen("crash", 400)) is not None
    # and a fault is forgotten an hour on, whatever the job did
    correlator.admit(seen("gpu_fault", 500, ("n4",), onset=500))
    correlator.expire(at(500 + 3601))
    assert correlator.faulted == {}


def test_a_restarted_service_knows_the_faults_of_the_incidents_it_reopens() -> None:
    before = IncidentCorrelator(600 * US, 8)
    before.admit(seen("crash", 100))
    before.admit(seen("gpu_fault", 110, ("n3",)))
    after = IncidentCorrelator(600 * US, 8)
    after.restore(before.open.values())
    assert after.faulted == {"7": (at(110), False)}
    assert after.admit(seen("hang", 1300, onset=105)) is None
