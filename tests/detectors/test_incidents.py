"""The incident book shared by the evidence detectors: one detection per job and culprit node,
and the pipeline that lets each new (kind, culprit) of a job through to the rules."""

from __future__ import annotations

import pytest

from medic.ingest.replay import Delay, ReplayConfig, ReplaySource
from tests.detectors.scenarios import Job, detect, kernel, seconds

# NVIDIA's Xid catalogue: 79 (GPU has fallen off the bus); the format as in leptonai/gpud#46
XID_79_N1 = "NVRM: Xid (PCI:0000:0b:00): 79, pid=2231, GPU has fallen off the bus."
XID_79_N3 = "NVRM: Xid (PCI:0000:3a:00): 79, pid=4410, GPU has fallen off the bus."
# pytorch/pytorch#49832: the sticky error the ranks of the lost GPU report
CUDA_ERROR = "[rank{rank}]: RuntimeError: CUDA error: unspecified launch failure"


def scenario(job: Job, duration: int = 200) -> tuple[list[dict], list[dict], list[dict]]:
    return job.progress(0, duration), job.telemetry(0, duration), [job.start()]


def test_a_fault_on_another_node_of_the_job_is_a_new_detection() -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs.append(kernel(40.2, "n3", XID_79_N3))
    logs.append(kernel(41.0, "n3", XID_79_N3))
    logs.append(kernel(130.5, "n1", XID_79_N1))
    found = detect(200, logs, gpu, sched)
    assert [(d.kind, d.culprits, round(seconds(d.detected_at))) for d in found] == [
        ("gpu_fault", ("n3",), 40),
        ("gpu_fault", ("n1",), 130),
    ]
    assert found[1].incident == found[0].id, "one incident for the history"


@pytest.mark.parametrize("xid_after_s", [-5.0, 0.0, 3.0, 20.0, 30.0])
def test_the_xid_is_acted_on_whether_it_comes_before_or_after_the_cuda_errors(
    xid_after_s: float,
) -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs += job.rank_logs(60.0, CUDA_ERROR, ranks=range(16, 24))
    logs.append(kernel(60.0 + xid_after_s, "n3", XID_79_N3))
    found = detect(200, logs, gpu, sched)
    blamed = [d for d in found if d.culprits]
    assert [(d.kind, d.culprits, d.job_id) for d in blamed] == [("gpu_fault", ("n3",), "100")]
    assert seconds(blamed[0].detected_at) == pytest.approx(60.0 + xid_after_s, abs=1)
    assert {d.kind for d in found} <= {"crash", "gpu_fault"}


def test_logs_alone_place_a_job_so_a_kernel_xid_becomes_its_gpu_fault() -> None:
    job = Job()
    logs = job.progress(0, 120)
    logs.append(kernel(50.3, "n3", XID_79_N3))
    found = detect(120, logs)
    assert [(d.kind, d.culprits, d.job_id) for d in found] == [("gpu_fault", ("n3",), "100")]
    assert seconds(found[0].detected_at) == pytest.approx(50.3, abs=0.5)


def test_a_job_the_scheduler_places_elsewhere_is_not_blamed_for_a_kernel_xid() -> None:
    job = Job(nodes=("n1", "n2"))
    stray = Job(nodes=("n3",), job_id="200")
    logs = job.progress(0, 120) + stray.progress(0, 120)
    logs.append(kernel(50.3, "n3", XID_79_N3))
    placed_elsewhere = {**stray.start(), "nodes": ["n4"]}
    found = detect(120, logs, scheduler=[job.start(), placed_elsewhere])
    assert found == []


def test_a_job_still_pending_in_the_last_slurm_poll_is_placed_by_its_lines() -> None:
    """The job started between two polls: Slurm last said PENDING, its lines say it runs."""
    job = Job()
    logs = job.progress(1, 120)
    logs.append(kernel(3.3, "n3", XID_79_N3))
    pending = {**job.start(0.5), "state": "PENDING", "nodes": None}
    found = detect(120, logs, scheduler=[pending])
    assert [(d.kind, d.culprits, d.job_id) for d in found] == [("gpu_fault", ("n3",), "100")]


def test_a_requeued_job_waiting_in_the_queue_is_not_blamed_for_its_old_nodes() -> None:
    """Slurm lists a requeued, pending job with the nodes of its last attempt."""
    job = Job()
    logs = job.progress(0, 40)
    logs.append(kernel(50.3, "n3", XID_79_N3))
    requeued = {**job.start(45), "state": "PENDING"}
    assert detect(120, logs, scheduler=[job.start(), requeued]) == []


def test_a_job_that_stopped_logging_long_ago_is_not_blamed() -> None:
    job = Job()
    logs = job.progress(0, 30)
    logs.append(kernel(1100.0, "n3", XID_79_N3))
    assert detect(1200, logs) == []


@pytest.mark.parametrize("seed", range(6))
def test_logs_delivered_0_to_30_s_late_by_node_give_the_same_attribution(seed: int) -> None:
    job = Job()
    logs, gpu, sched = scenario(job)
    logs += job.rank_logs(60.0, CUDA_ERROR, ranks=range(16, 24))
    logs.append(kernel(60.5, "n3", XID_79_N3))
    delayed = ReplayConfig(delays=(Delay("logs", 0, 30),), seed=seed)
    found = detect(200, logs, gpu, sched, replay=delayed)
    blamed = [(d.kind, d.culprits, d.job_id) for d in found if d.culprits]
    assert blamed == [("gpu_fault", ("n3",), "100")]
    assert {d.kind for d in found} <= {"crash", "gpu_fault"}


def test_a_gpu_fault_after_a_straggler_of_the_same_job_is_acted_on_too() -> None:
    from medic.actions.config import load_rules
    from medic.actions.recorder import RecordingExecutor
    from medic.actions.stage import ActionStage
    from medic.detectors.registry import build_detectors
    from medic.pipeline import Pipeline
    from medic.testing.builders import log, recording
    from tests.detectors.test_straggler import HOT, job_slowing, one_gpu

    job = job_slowing(1.4, one_gpu("n2", 3, HOT), until=1200)
    job.logs.append(log(1000.5, XID_79_N3, node="n3", job_id=None, source="system"))
    rec = recording(
        1200,
        logs=sorted(job.logs, key=lambda r: r["time"]),
        gpu=job.gpu,
        scheduler=job.scheduler,
    )
    nodes = sorted({row["node"] for row in job.gpu})
    rules = load_rules({"mode": "enforce", "guards": {"max_drained_nodes": 2}})
    stage = ActionStage(rules, RecordingExecutor(nodes))
    pipeline = Pipeline(build_detectors(enabled=["straggler", "gpu_fault"]), responders=[stage])
    found = pipeline.run(ReplaySource(rec))
    assert [(d.kind, d.culprits) for d in found] == [("straggler", ("n2",)), ("gpu_fault", ("n3",))]
    assert found[1].incident == found[0].id
    taken = [
        (r["action"], r["node"]) for r in stage.actions_table().to_pylist() if r["guard"] is None
    ]
    assert taken == [("drain", "n2"), ("requeue", None), ("drain", "n3"), ("requeue", None)]
