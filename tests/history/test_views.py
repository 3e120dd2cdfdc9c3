"""The report views on a hand-built history whose answers are known."""

import datetime as dt

import pytest

from medic.history.store import DuckDBStore
from medic.history.writer import HistoryWriter, detection_rows
from medic.incident import Incident
from medic.testing.builders import at, batch
from tests.history.rows import detection, job, progress
from tests.history.scenario import A, B, C, fill


@pytest.fixture
def history(store: DuckDBStore) -> DuckDBStore:
    return fill(store)


def rows(store: DuckDBStore, query: str) -> list[dict[str, object]]:
    return store.sql(query).to_pylist()


def test_time_to_detect_needs_an_onset(history: DuckDBStore) -> None:
    found = rows(history, "SELECT kind, seconds FROM v_time_to_detect ORDER BY seconds")
    assert found == [
        {"kind": "gpu_fault", "seconds": 30.0},
        {"kind": "straggler", "seconds": 300.0},
    ]


def test_time_to_act_is_the_first_slurm_action_taken(history: DuckDBStore) -> None:
    found = rows(
        history,
        "SELECT incident_id, first_action, seconds_from_onset, seconds_from_detection "
        "FROM v_time_to_act",
    )
    assert found == [
        {
            "incident_id": A.id,
            "first_action": "drain",
            "seconds_from_onset": 31.0,
            "seconds_from_detection": 1.0,
        }
    ]


def test_incidents_carry_their_actions_symptoms_and_outcome(history: DuckDBStore) -> None:
    found = {r["incident_id"]: r for r in rows(history, "SELECT * FROM v_incidents")}
    assert found[A.id]["outcome"] == "requeued"
    assert (found[A.id]["decisions"], found[A.id]["suppressed"]) == (3, 0)
    assert (found[A.id]["symptoms"], found[A.id]["closed"]) == (2, True)
    assert found[B.id]["outcome"] == "open"
    assert (found[B.id]["decisions"], found[B.id]["suppressed"]) == (2, 2)
    assert found[B.id]["acted_at"] is None
    assert found[C.id]["outcome"] == "open"


def test_outcome_restarted_when_the_job_runs_again_first(store: DuckDBStore) -> None:
    crash = detection(50, "crash", "9", onset=40)
    store.append("detections", detection_rows([crash]))
    writer = HistoryWriter(store)
    writer.update(batch("scheduler", [job(1, "9", "RUNNING", ["n1"]), job(60, "9", "RUNNING")]))
    writer.record_incidents([Incident(first=crash, last_seen=at(55))])

    assert rows(store, "SELECT outcome FROM v_incidents") == [{"outcome": "restarted"}]


def test_outcome_quiet_when_an_incident_closed_without_a_job_change(store: DuckDBStore) -> None:
    slow = detection(50, "straggler", "9")
    store.append("detections", detection_rows([slow]))
    HistoryWriter(store).record_incidents([Incident(first=slow, last_seen=at(55))])

    assert rows(store, "SELECT outcome FROM v_incidents") == [{"outcome": "quiet"}]


def test_detections_and_actions_per_day(history: DuckDBStore) -> None:
    day = dt.date(2026, 3, 1)
    assert rows(history, "FROM v_detections_daily") == [
        {"day": day, "kind": "gpu_fault", "detections": 1},
        {"day": day, "kind": "hang", "detections": 1},
        {"day": day, "kind": "straggler", "detections": 1},
    ]
    daily = rows(history, "SELECT action, status, guard, actions, taken FROM v_actions_daily")
    assert daily == [
        {"action": "drain", "status": "done", "guard": None, "actions": 1, "taken": 1},
        {"action": "drain", "status": "suppressed", "guard": "cooldown", "actions": 1, "taken": 0},
        {"action": "notify", "status": "done", "guard": None, "actions": 1, "taken": 1},
        {"action": "requeue", "status": "done", "guard": None, "actions": 1, "taken": 1},
        {"action": "requeue", "status": "suppressed", "guard": "monitor", "actions": 1, "taken": 0},
    ]


def test_nodes_blamed_most(history: DuckDBStore) -> None:
    found = rows(history, "SELECT node, incidents, jobs, kinds, drains FROM v_node_failures")
    assert found == [
        {"node": "n1", "incidents": 2, "jobs": 2, "kinds": ["gpu_fault", "straggler"], "drains": 1},
        {"node": "n3", "incidents": 1, "jobs": 1, "kinds": ["hang"], "drains": 0},
    ]


def test_gpus_with_faults(history: DuckDBStore) -> None:
    found = rows(
        history,
        "SELECT node, gpu, fault_minutes, xids, ecc_dbe, nvlink_errors, "
        "epoch_us(first_fault) AS first_fault FROM v_gpu_failures",
    )
    assert found == [
        {
            "node": "n1",
            "gpu": 1,
            "fault_minutes": 1,
            "xids": [79],
            "ecc_dbe": 2,
            "nvlink_errors": 0,
            "first_fault": at(60),
        }
    ]


def test_restarts_per_job(history: DuckDBStore) -> None:
    found = rows(history, "FROM v_job_restarts")
    assert found == [
        {"job_id": "100", "restarts": 1, "medic_requeues": 1, "incidents": 1},
        {"job_id": "200", "restarts": 0, "medic_requeues": 0, "incidents": 1},
        {"job_id": "300", "restarts": 0, "medic_requeues": 0, "incidents": 1},
    ]


def test_gpu_hours_saved_against_the_watchdog(history: DuckDBStore) -> None:
    found = {
        r["incident_id"]: r
        for r in rows(
            history,
            "SELECT incident_id, response_s, gpus, gpus_from, onset_known, gpu_hours_saved "
            "FROM v_gpu_hours_saved",
        )
    }
    assert set(found) == {A.id, B.id}  # stragglers never wait for the watchdog
    assert found[A.id]["response_s"] == 31.0
    assert (found[A.id]["gpus"], found[A.id]["gpus_from"]) == (4, "telemetry")
    assert found[A.id]["gpu_hours_saved"] == pytest.approx((600 - 31) * 4 / 3600)
    assert (found[B.id]["gpus"], found[B.id]["gpus_from"]) == (16, "allocation")
    assert found[B.id]["onset_known"] is False
    assert found[B.id]["gpu_hours_saved"] == pytest.approx(600 * 16 / 3600)
    shorter = rows(history, "SELECT sum(gpu_hours_saved) AS total FROM gpu_hours_saved(300, 4)")
    assert shorter[0]["total"] == pytest.approx((300 - 31) * 4 / 3600 + 300 * 8 / 3600)


def test_no_saving_when_the_response_outlasts_the_watchdog(store: DuckDBStore) -> None:
    late = detection(1000, "hang", "9", onset=100)
    store.append("detections", detection_rows([late]))
    found = rows(store, "SELECT response_s, gpus, gpu_hours_saved FROM v_gpu_hours_saved")
    assert found == [{"response_s": 900.0, "gpus": None, "gpu_hours_saved": None}]
    with_gpus = HistoryWriter(store)
    with_gpus.update(batch("scheduler", [job(0, "9", "RUNNING", ["n1"])]))
    assert rows(store, "SELECT gpu_hours_saved FROM v_gpu_hours_saved") == [
        {"gpu_hours_saved": 0.0}
    ]


def test_job_progress_counts_steps_and_resets(store: DuckDBStore) -> None:
    writer = HistoryWriter(store)
    lines = [(t, 1 + t // 6) for t in range(0, 120, 6)] + [(130, 5), (170, 8)]
    writer.update(
        progress([{"time": at(t), "job_id": "7", "step": s, "event": "step"} for t, s in lines])
    )
    writer.flush()

    found = rows(store, "SELECT first_step, last_step, steps, step_reset FROM v_job_progress")
    assert found == [
        {"first_step": 1, "last_step": 10, "steps": 9, "step_reset": False},
        {"first_step": 11, "last_step": 20, "steps": 10, "step_reset": False},
        {"first_step": 5, "last_step": 8, "steps": 3, "step_reset": True},
    ]
