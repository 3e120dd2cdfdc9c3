"""The actions stage against a real Slurm 22.05 (scripts/slurm-local): real jobs, real drains."""

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from medic.actions.config import SlurmConfig, load_rules
from medic.actions.slurm_cli import SlurmCli
from medic.actions.slurmrest import SlurmRest
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.testing.builders import at
from tests.conftest import SlurmCluster

pytestmark = pytest.mark.slurm


@pytest.fixture
def cluster(slurm: SlurmCluster) -> Iterator[SlurmCluster]:
    slurm.reset()
    yield slurm


def stage(rules: dict[str, Any]) -> ActionStage:
    config = load_rules(rules)
    slurm = SlurmConfig(restart_now=True, verify_timeout_s=15)
    return ActionStage(config, SlurmCli(slurm))


def fault(job_id: str, node: str, t: float = 0) -> Detection:
    return Detection(
        job_id,
        "gpu_fault",
        (node,),
        score=0.95,
        detector="xid",
        summary=f"Xid 79 on {node}",
        detected_at=at(t),
    )


ENFORCE = {"mode": "enforce", "guards": {"max_drained_fraction": 0.5}}


def test_drain_names_the_detection_and_the_requeued_job_runs_on_another_node(
    cluster: SlurmCluster,
) -> None:
    job_id = cluster.sbatch()
    culprit = cluster.wait_job(job_id)["NodeList"]
    detection = fault(job_id, culprit)
    decisions = stage(ENFORCE).respond(detection, at(0))
    assert [(d.action, d.status) for d in decisions] == [("drain", "done"), ("requeue", "done")]
    node = cluster.node(culprit)
    assert "DRAIN" in node["State"]
    assert node["Reason"].startswith(f"medic: gpu_fault job {job_id} detection {detection.id}")
    rerun = cluster.wait(
        lambda: cluster.job(job_id),
        lambda j: j["JobState"] == "RUNNING" and j["Restarts"] == "1",
        "the requeued job to run again",
    )
    assert rerun["NodeList"] != culprit
    assert culprit in rerun["ExcNodeList"]


def test_a_job_cancelled_after_its_detection_stays_cancelled(cluster: SlurmCluster) -> None:
    """The detection was made while the job ran; its user cancelled it before the actions ran:
    the node is drained, but the job is not brought back (``scontrol requeue`` would)."""
    job_id = cluster.sbatch()
    culprit = cluster.wait_job(job_id)["NodeList"]
    cluster.run("scancel", job_id)
    cluster.wait_job(job_id, "CANCELLED")
    decisions = stage(ENFORCE).respond(fault(job_id, culprit), at(0))
    assert [(d.action, d.status) for d in decisions] == [("drain", "done"), ("requeue", "done")]
    assert decisions[1].reason.endswith(f"job {job_id} ended on purpose (CANCELLED): not requeued")
    time.sleep(2)
    job = cluster.job(job_id)
    assert (job["JobState"], job["Restarts"]) == ("CANCELLED", "0")


def test_draining_a_drained_node_succeeds_and_keeps_the_operators_reason(
    cluster: SlurmCluster,
) -> None:
    node = cluster.nodes[0]
    cluster.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=operator: DIMM")
    outcome = SlurmCli().drain(node, "medic: something")
    assert (outcome.status, outcome.changed) == ("done", False)
    assert cluster.node(node)["Reason"].startswith("operator: DIMM")
    resumed = SlurmCli().resume(node)
    assert (resumed.status, resumed.changed) == ("done", True)
    assert SlurmCli().resume(node).changed is False


def test_monitor_mode_changes_nothing(cluster: SlurmCluster) -> None:
    job_id = cluster.sbatch()
    culprit = cluster.wait_job(job_id)["NodeList"]
    before = (cluster.job(job_id), cluster.node(culprit)["State"], cluster.drained())
    decisions = stage({"guards": {"max_drained_fraction": 0.5}}).respond(
        fault(job_id, culprit), at(0)
    )
    assert {(d.status, d.guard) for d in decisions} == {("suppressed", "monitor")}
    after = (cluster.job(job_id), cluster.node(culprit)["State"], cluster.drained())
    for snapshot in (before, after):
        snapshot[0].pop("RunTime")
    assert after == before


def test_guards_hold_under_a_flood_of_100_detections(cluster: SlurmCluster) -> None:
    jobs = [cluster.sbatch(f"--nodelist={node}") for node in cluster.nodes]
    placed = {job_id: cluster.wait_job(job_id)["NodeList"] for job_id in jobs}
    flood = [
        fault(job_id, placed[job_id], t=i * 0.5)
        for i, job_id in enumerate(jobs[i % len(jobs)] for i in range(100))
    ]
    s = stage(ENFORCE)
    s.handle(flood, at(60))
    rows = s.actions_table().to_pylist()
    executed = Counter(r["action"] for r in rows if r["status"] == "done")
    half = len(cluster.nodes) // 2
    assert executed == {"drain": half, "requeue": len(jobs)}
    assert cluster.drained() == {r["node"] for r in rows if r["status"] == "done" and r["node"]}
    # Every job's node is blamed 100/n times: the first drain of each node runs or hits the
    # drained fraction; repeats of a drained node or a requeued job are the same incident.
    repeats = 100 // len(jobs) - 1
    guards = Counter(r["guard"] for r in rows if r["status"] == "suppressed")
    assert guards == {
        "drained_fraction": (len(jobs) - half) * (repeats + 1),
        "incident": (half + len(jobs)) * repeats,
    }
    assert {cluster.job(j)["Restarts"] for j in jobs} == {"1"}


def test_slurmrestd_holds_releases_and_cancels(cluster: SlurmCluster) -> None:
    job_id = cluster.sbatch("--begin=now+3600")
    rest = SlurmRest(SlurmConfig(executor="rest", rest_socket=str(cluster.rest_socket)))
    facts = rest.job(job_id)
    assert facts is not None
    assert (facts.partition, facts.user, facts.state) == ("debug", "root", "PENDING")
    assert rest.hold(job_id).status == "done"
    assert cluster.job(job_id)["Priority"] == "0"
    assert rest.release(job_id).status == "done"
    assert cluster.job(job_id)["Priority"] != "0"
    assert rest.cancel(job_id).detail == f"job {job_id} cancelled"
    assert cluster.job(job_id)["JobState"] == "CANCELLED"
    assert rest.node_count() == len(cluster.nodes)


def test_a_hold_requeues_a_running_job_held_and_frees_its_node(cluster: SlurmCluster) -> None:
    """``scontrol hold`` leaves a running job on its node; the restart loop's hold must free it
    (a job pinned to that node then runs), and a --no-requeue job is held as it runs, said so."""
    slurm = SlurmCli(SlurmConfig(verify_timeout_s=15))
    job_id = cluster.sbatch()
    node = cluster.wait_job(job_id)["NodeList"]
    outcome = slurm.hold(job_id)
    assert outcome.status == "done", outcome.detail
    assert outcome.detail == f"job {job_id} requeued held (PENDING, restarts 1): nodes freed"
    held = cluster.job(job_id)
    assert (held["JobState"], held["Priority"]) == ("PENDING", "0")
    assert "held" in held["Reason"]
    waiting = cluster.sbatch(f"--nodelist={node}")
    assert cluster.wait_job(waiting)["NodeList"] == node
    assert slurm.hold(job_id).detail == f"job {job_id} already held (PENDING)"
    stuck = cluster.sbatch("--no-requeue")
    cluster.wait_job(stuck)
    kept = slurm.hold(stuck)
    assert kept.status == "done"
    assert kept.detail.startswith(f"job {stuck} held but still RUNNING on its nodes")
