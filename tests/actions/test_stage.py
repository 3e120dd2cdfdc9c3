import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from medic import schema
from medic.actions.config import load_rules
from medic.actions.journal import Journal
from medic.actions.notifiers import Notifiers
from medic.actions.recorder import RecordingExecutor
from medic.actions.slurm_cli import JOB_FORMAT, SlurmCli
from medic.actions.slurmrest import SlurmRest
from medic.actions.stage import ActionStage, drain_reason
from medic.config import ConfigError
from medic.detectors.base import Detection
from medic.testing.builders import at
from medic.testing.slurm import CommandJob, SlurmCommands

NODES = [f"n{i}" for i in range(100)]


def stage(
    rules: dict[str, Any] | None = None, nodes: Sequence[str] = NODES, window_s: float = 600
) -> ActionStage:
    recorder = RecordingExecutor(nodes)
    return ActionStage(load_rules(rules), recorder, notifier=recorder, incident_window_s=window_s)


def fault(job: str | None = "42", *culprits: str, t: float = 0) -> Detection:
    return Detection(
        job, "gpu_fault", culprits or ("n3",), score=0.9, detector="xid", detected_at=at(t)
    )


def test_monitor_mode_records_every_decision_and_touches_nothing() -> None:
    s = stage()
    s.handle([fault()], at(0))
    table = s.actions_table()
    assert table.schema == schema.ACTIONS
    rows = table.to_pylist()
    assert [(r["action"], r["node"], r["job_id"]) for r in rows] == [
        ("drain", "n3", "42"),
        ("requeue", None, "42"),
    ]
    assert {(r["mode"], r["status"], r["guard"]) for r in rows} == {
        ("monitor", "suppressed", "monitor")
    }
    assert rows[0]["detection_id"] == fault().id
    assert rows[0]["reason"] == (
        "route hardware-fault (gpu_fault of job 42, on n3, score 0.9): drain node n3: "
        "monitor mode: enforce mode would run it"
    )


def test_enforce_mode_executes_through_the_executor() -> None:
    s = stage({"mode": "enforce"})
    s.handle([fault()], at(0))
    rows = s.actions_table().to_pylist()
    assert [(r["action"], r["status"], r["guard"]) for r in rows] == [
        ("drain", "recorded", None),
        ("requeue", "recorded", None),
    ]


def test_a_detection_handled_twice_runs_nothing_twice() -> None:
    s = stage({"mode": "enforce", "guards": {"node_cooldown_s": 0}}, window_s=0)
    s.handle([fault()], at(0))
    s.handle([fault()], at(1))
    rows = s.actions_table().to_pylist()
    assert [r["guard"] for r in rows] == [None, None, "journal", "journal"]


def test_an_empty_file_backed_journal_is_the_one_written(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    recorder = RecordingExecutor(NODES)
    s = ActionStage(load_rules({"mode": "enforce"}), recorder, journal=Journal(path))
    s.handle([fault()], at(0))
    ops = [json.loads(line)["op"] for line in path.read_text().splitlines()]
    assert ops == ["plan", "issued", "verified", "issued", "verified", "closed"]
    again = ActionStage(load_rules({"mode": "enforce"}), recorder, journal=Journal(path))
    again.handle([fault()], at(1))
    assert [r["guard"] for r in again.actions_table().to_pylist()] == ["journal", "journal"]


def test_guards_hold_under_a_flood_of_100_detections() -> None:
    s = stage({"mode": "enforce"})
    flood = [fault(str(i % 40), f"n{i % 30}", t=i) for i in range(100)]
    s.handle(flood, at(100))
    rows = s.actions_table().to_pylist()
    done = Counter(r["action"] for r in rows if r["status"] == "recorded")
    assert done["drain"] == 10  # max_drained_fraction 0.1 of 100 nodes, max 10 per hour
    assert done["requeue"] == 40  # one per job: the rest are the same incidents
    suppressed = Counter(r["guard"] for r in rows if r["status"] == "suppressed")
    assert suppressed["incident"] == 60  # the repeated jobs' requeues
    assert set(suppressed) == {"incident", "node_cooldown", "drains_per_hour"}
    drained = {r["node"] for r in rows if r["action"] == "drain" and r["status"] == "recorded"}
    assert len(drained) == 10


def test_routes_asking_for_what_the_executor_cannot_do_are_refused_at_load() -> None:
    rest = SlurmRest(client=httpx.Client())
    with pytest.raises(ConfigError) as error:
        ActionStage(load_rules(), rest)
    assert str(error.value) == (
        "rules: route 'hardware-fault' asks for drain, which the slurmrestd executor cannot do"
    )


def slurm(partition: str = "gpu") -> SlurmCommands:
    """Ten nodes, job 42 pending in ``partition`` and job 7 running on n3."""
    jobs = {"42": CommandJob("PENDING", partition), "7": CommandJob(nodes=("n3",))}
    return SlurmCommands(NODES[:10], jobs)


def cli_stage(runner: SlurmCommands, rules: dict[str, Any]) -> ActionStage:
    config = load_rules({"mode": "enforce", **rules})
    return ActionStage(config, SlurmCli(config.slurm, runner=runner, sleep=lambda _: None))


def test_partition_filters_ask_slurm_for_the_job() -> None:
    route = {"name": "gpu", "partitions": ["gpu"], "actions": ["hold"]}
    runner = slurm("gpu")
    runner.refuse["hold"] = "slurm_suspend error: Access/permission denied"
    decisions = cli_stage(runner, {"routes": [route]}).respond(fault(), at(0))
    assert runner.calls[0] == ["squeue", "-h", "-t", "all", "-j", "42", "-O", JOB_FORMAT]
    assert [(d.action, d.status) for d in decisions] == [("hold", "failed")]
    assert decisions[0].reason.endswith(
        "scontrol hold: slurm_suspend error: Access/permission denied"
    )
    other = cli_stage(slurm("cpu"), {"routes": [route]}).respond(fault(), at(0))
    assert other == []


def test_a_failed_drain_does_not_use_up_the_drained_fraction() -> None:
    runner = slurm()
    runner.refuse["update"] = "slurm_update error: Invalid user id"
    rules = {"routes": [{"name": "d", "actions": ["drain"]}], "guards": {"node_cooldown_s": 0}}
    s = cli_stage(runner, rules)
    first = s.respond(fault("1", "n3"), at(0))
    assert [(d.status, d.guard) for d in first] == [("failed", None)]
    second = s.respond(fault("2", "n3"), at(1))
    assert [(d.status, d.guard) for d in second] == [("failed", None)]


def test_notifications_carry_the_detection_and_what_was_done() -> None:
    bodies: list[dict[str, Any]] = []

    def hook(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200)

    rules = {
        "mode": "enforce",
        "receivers": [{"name": "oncall", "url": "https://hooks.example.org/m"}],
        "routes": [{"name": "all", "actions": ["drain", "requeue"], "notify": ["oncall"]}],
    }
    config = load_rules(rules)
    webhooks = Notifiers(config.receivers, client=httpx.Client(transport=httpx.MockTransport(hook)))
    s = ActionStage(config, RecordingExecutor(NODES), notifier=webhooks)
    decisions = s.respond(fault(), at(0))
    assert [(d.action, d.status) for d in decisions][-1] == ("notify", "done")
    body = bodies[0]
    assert body["detection"]["id"] == fault().id
    assert body["detection"]["culprits"] == ["n3"]
    assert [(d["action"], d["status"]) for d in body["decisions"]] == [
        ("drain", "recorded"),
        ("requeue", "recorded"),
    ]
    assert body["mode"] == "enforce"


def test_drain_reason_names_the_detection_on_one_bounded_line() -> None:
    d = Detection("42", "gpu_fault", ("n3",), summary="Xid 79\non n3 " + "x" * 300)
    reason = drain_reason("medic", d)
    assert reason.startswith(f"medic: gpu_fault job 42 detection {d.id}: Xid 79 on n3 x")
    assert "\n" not in reason
    assert len(reason) == 200
