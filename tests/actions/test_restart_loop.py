"""The restart-loop guard: a job is requeued only when it made progress since its last restart;
after ``max_restarts_without_progress`` futile restarts it is held and someone is told, after
``max_same_failure_restarts`` when they all failed the same way. The last test runs the loop on
the real local Slurm."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from medic.actions.config import SlurmConfig, load_rules
from medic.actions.model import Outcome, done
from medic.actions.notifiers.dispatch import Notifiers
from medic.actions.recorder import RecordingExecutor
from medic.actions.restart_loop import JobAttempts, failure_key
from medic.actions.slurm_cli import SlurmCli
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.ingest.base import Batch
from medic.parse.progress import PROGRESS
from medic.testing.builders import at, batch
from tests.actions.notifiers.server import serve
from tests.conftest import SlurmCluster

RULES: dict[str, Any] = {
    "mode": "enforce",
    "guards": {"max_restarts_per_job": 10},
    "receivers": [{"name": "oncall", "url": "http://127.0.0.1:9/hook"}],
    "routes": [{"name": "crash", "kinds": ["crash"], "actions": ["requeue"]}],
    "restart_loop": {"max_restarts_without_progress": 2, "notify": ["oncall"]},
}


def progress(job_id: str, t0: float, steps: Sequence[int], checkpoint: int | None = None) -> Batch:
    """Step lines one second apart from ``t0``, then a checkpoint save when given."""
    rows: list[dict[str, Any]] = [
        {"time": at(t0 + i), "step": s, "event": "step"} for i, s in enumerate(steps)
    ]
    if checkpoint is not None:
        rows.append({"time": at(t0 + len(steps)), "step": checkpoint, "event": "checkpoint_end"})
    for row in rows:
        row.update(job_id=job_id, node="n1", framework="megatron")
    columns = {f.name: [r.get(f.name) for r in rows] for f in PROGRESS}
    return Batch("progress", pa.Table.from_pydict(columns, schema=PROGRESS))


def crash(job_id: str, t: float, *signatures: str) -> Detection:
    return Detection(
        job_id,
        "crash",
        score=0.9,
        detector="crash",
        summary="rank 0 died",
        detected_at=at(t),
        onset=at(t - 1),
        evidence={"signatures": list(signatures), "nodes": [f"n{t:g}"], "evidence": int(t)},
    )


class Notes:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def notify(self, receiver: str, payload: dict[str, Any]) -> Outcome:
        self.sent.append((receiver, payload))
        return done("noted")


def verdicts(stage: ActionStage, detection: Detection) -> list[tuple[str, str, str | None]]:
    return [(d.action, d.status, d.guard) for d in stage.respond(detection, detection.detected_at)]


def test_a_job_that_keeps_crashing_before_its_next_checkpoint_is_held_after_two_restarts() -> None:
    notes = Notes()
    stage = ActionStage(load_rules(RULES), RecordingExecutor(), notifier=notes)
    stage.attempts.update(progress("7", 0, range(1, 101), checkpoint=100))
    assert verdicts(stage, crash("7", 200)) == [("requeue", "recorded", None)]
    stage.attempts.update(progress("7", 300, [100, 101]))
    assert verdicts(stage, crash("7", 400)) == [("requeue", "recorded", None)]
    stage.attempts.update(progress("7", 500, [100, 101]))
    assert verdicts(stage, crash("7", 600)) == [
        ("requeue", "suppressed", "restart_loop"),
        ("hold", "recorded", None),
        ("notify", "done", None),
    ]
    assert len(stage.guards.restarts["7"]) == 2, "the requeue held back uses no restart budget"
    [(receiver, payload)] = notes.sent
    assert receiver == "oncall" and payload["detection"]["job_id"] == "7"
    assert "no progress in its last 2 restarts" in payload["decisions"][0]["reason"]


def test_the_same_failure_after_a_futile_restart_is_held_sooner_than_a_different_one() -> None:
    """The same signature again from the same checkpoint, on other nodes: the job's, held
    after one restart; a different failure each time gets the two restarts of a loop."""
    outcomes = {}
    for name, second in (("same", "cuda_illegal_address"), ("other", "nccl_timeout")):
        stage = ActionStage(load_rules(RULES), RecordingExecutor(), notifier=Notes())
        stage.attempts.update(progress("7", 0, range(1, 101), checkpoint=100))
        assert verdicts(stage, crash("7", 200, "cuda_illegal_address"))[0][2] is None
        stage.attempts.update(progress("7", 300, [100, 101]))
        outcomes[name] = [v[2] for v in verdicts(stage, crash("7", 400, second))]
    assert outcomes == {"same": ["restart_loop", None, None], "other": [None]}


def test_the_same_failure_after_a_restart_by_slurm_is_held_too() -> None:
    """Whoever restarted the job (here Slurm, medic only monitoring), the failure each attempt
    ended in counts."""
    stage = ActionStage(
        load_rules({**RULES, "mode": "monitor"}), RecordingExecutor(), notifier=Notes()
    )
    stage.attempts.update(progress("7", 0, range(1, 101), checkpoint=100))
    assert verdicts(stage, crash("7", 200, "oom")) == [("requeue", "suppressed", "monitor")]
    for t, state in ((210, "REQUEUED"), (211, "PENDING"), (220, "RUNNING")):
        stage.attempts.update(
            batch("scheduler", [{"time": at(t), "kind": "job", "job_id": "7", "state": state}])
        )
    stage.attempts.update(progress("7", 300, [100, 101]))
    assert verdicts(stage, crash("7", 400, "oom"))[:2] == [
        ("requeue", "suppressed", "restart_loop"),
        ("hold", "suppressed", "monitor"),
    ]


def test_the_same_failure_after_progress_is_requeued() -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor(), notifier=Notes())
    stage.attempts.update(progress("7", 0, range(1, 101), checkpoint=100))
    for t in (200, 400, 600):
        assert verdicts(stage, crash("7", t, "oom")) == [("requeue", "recorded", None)]
        stage.attempts.update(progress("7", t + 100, [100, 101], checkpoint=t))


def test_a_failure_is_named_by_its_kind_and_identifying_evidence() -> None:
    first, again = crash("7", 200, "xid_79"), crash("7", 400, "xid_79")
    assert failure_key(first) == failure_key(again) == ("crash", (), ("signatures", ("xid_79",)))
    assert failure_key(crash("7", 200)) is None, "no evidence names it: never the same"
    diverged = Detection("7", "nan_divergence", evidence={"loss": 3e6, "step": 1200})
    assert failure_key(diverged) == ("nan_divergence", (), ("step", 1200))


def test_the_same_fault_on_another_node_is_another_failure() -> None:
    """An Xid 79 on n2 after the requeue that left n1 behind is a second bad node, not the job
    repeating itself; on the same node again it is the same failure."""
    evidence = {"signatures": ["xid_79"]}
    on_n1 = Detection("7", "gpu_fault", culprits=("n1",), evidence=evidence)
    on_n2 = Detection("7", "gpu_fault", culprits=("n2",), evidence=evidence)
    assert failure_key(on_n1) != failure_key(on_n2)
    assert failure_key(on_n1) == failure_key(
        Detection("7", "gpu_fault", culprits=("n1",), evidence=evidence)
    )


def test_a_restart_that_saves_a_checkpoint_is_progress() -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor(), notifier=Notes())
    stage.attempts.update(progress("8", 0, range(1, 50), checkpoint=40))
    for attempt in range(4):
        t = 100 + attempt * 100
        assert verdicts(stage, crash("8", t)) == [("requeue", "recorded", None)]
        stage.attempts.update(progress("8", t + 10, [40, 41, 42], checkpoint=42 + attempt))


def test_a_job_without_checkpoint_lines_progresses_by_stepping_past_its_best() -> None:
    attempts = JobAttempts()
    attempts.update(progress("9", 0, [1, 2, 3]))
    attempts.requeued("9", at(10))
    attempts.update(progress("9", 20, [1, 2, 3, 4]))
    attempts.requeued("9", at(30))
    attempts.update(progress("9", 40, [1, 2]))
    job = attempts.job("9")
    assert job is not None and job.futile_restarts() == 1


def test_a_job_that_logs_no_progress_is_not_judged() -> None:
    stage = ActionStage(load_rules(RULES), RecordingExecutor(), notifier=Notes())
    for t in (100, 200, 300, 400):
        assert verdicts(stage, crash("10", t)) == [("requeue", "recorded", None)]


def test_slurm_restarts_end_an_attempt_too() -> None:
    attempts = JobAttempts()
    attempts.update(progress("11", 0, [1, 2, 3], checkpoint=3))
    for t, state in ((10, "REQUEUED"), (11, "PENDING"), (20, "RUNNING")):
        attempts.update(
            batch("scheduler", [{"time": at(t), "kind": "job", "job_id": "11", "state": state}])
        )
    attempts.update(progress("11", 30, [3, 4]))
    job = attempts.job("11")
    assert job is not None and len(job.starts) == 2 and job.futile_restarts() == 1


def test_monitor_mode_says_it_would_hold() -> None:
    stage = ActionStage(
        load_rules({**RULES, "mode": "monitor"}), RecordingExecutor(), notifier=Notes()
    )
    stage.attempts.update(progress("12", 0, [1, 2], checkpoint=2))
    stage.attempts.requeued("12", at(10))
    stage.attempts.requeued("12", at(20))
    assert verdicts(stage, crash("12", 30))[:2] == [
        ("requeue", "suppressed", "restart_loop"),
        ("hold", "suppressed", "monitor"),
    ]


@pytest.mark.slurm
def test_a_restart_loop_on_the_real_slurm_is_held_and_told_as_a_message_of_its_own(
    slurm: SlurmCluster,
) -> None:
    """After the configured count of futile restarts the job is held in Slurm. Each crash is
    told to the job's thread; the second requeue tells nothing new and is folded, the hold is
    news: a new message in the same thread, not folded away."""
    hooks_server = serve()
    hooks = next(hooks_server)
    rules = {
        **RULES,
        "receivers": [{"name": "oncall", "url": hooks.url()}],
        "routes": [
            {"name": "crash", "kinds": ["crash"], "actions": ["requeue"], "notify": ["oncall"]}
        ],
    }
    job_id = slurm.sbatch(script="sleep 600")
    try:
        slurm.wait_job(job_id)
        time.sleep(2)  # a requeue racing the batch step's launch fails the job (Slurm 22.05)
        config = load_rules(rules)
        executor = SlurmCli(SlurmConfig(restart_now=True, verify_timeout_s=20))
        stage = ActionStage(config, executor, notifier=Notifiers(config.receivers))
        stage.attempts.update(progress(job_id, 0, range(1, 21), checkpoint=20))
        for restart, t in enumerate((100, 200), start=1):
            assert ("requeue", "done", None) in verdicts(stage, crash(job_id, t))
            slurm.wait(
                lambda: slurm.job(job_id),
                lambda j, n=restart: j["JobState"] == "RUNNING" and j["Restarts"] == str(n),
                f"restart {restart}",
            )
            time.sleep(2)
            stage.attempts.update(progress(job_id, t + 10, [20, 21]))
        found = verdicts(stage, crash(job_id, 300))
        assert found[:2] == [("requeue", "suppressed", "restart_loop"), ("hold", "done", None)]
        assert set(found[2:]) == {("notify", "done", None)}, found
        held = slurm.job(job_id)  # requeued held: it no longer holds its node
        assert (held["JobState"], held["Priority"], held["Restarts"]) == ("PENDING", "0", "3")
    finally:
        slurm.run("scancel", job_id, check=False)
        next(hooks_server, None)
    told = [[f"{d['action']} {d['status']}" for d in r.body["decisions"]] for r in hooks.received]
    assert told[0] == ["requeue done"], told
    assert [r.body["group"] for r in hooks.received] == [f"job:{job_id}"] * 2, told
    assert "hold done" in told[1]
