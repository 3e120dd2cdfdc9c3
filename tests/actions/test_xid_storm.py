"""An Xid storm after a job's own crash: every node of the job logs Xid 45 (NVIDIA: preemptive
cleanup, the driver tearing down the dead job's contexts: it only corroborates an earlier error)
and telemetry shows it too. The crash is the job's own bug; no node may be isolated for it."""

from __future__ import annotations

from medic.actions.config import load_rules
from medic.actions.recorder import RecordingExecutor
from medic.actions.stage import ActionStage
from tests.detectors.scenarios import Job, detect, kernel

NODES = tuple(f"n{i}" for i in range(1, 17))
XID_45 = "NVRM: Xid (PCI:0000:{bus:02x}:00): 45, pid={pid}, name=pt_main_thread, Ch 00000010"
RULES = {"mode": "enforce", "guards": {"max_drained_fraction": 1.0, "max_drains_per_hour": 100}}


def test_an_xid_45_storm_on_every_node_never_drains_a_node() -> None:
    job = Job(nodes=NODES, gpus=8)
    logs = job.progress(0, 60)
    logs += job.rank_logs(
        61, "[rank{rank}]: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", [5]
    )
    for n, node in enumerate(NODES):
        for gpu in range(8):
            message = XID_45.format(bus=0x10 + gpu * 0x10, pid=4000 + gpu)
            logs.append(kernel(62 + n * 0.05 + gpu * 0.01, node, message))
    gpu = job.telemetry(0, 120)
    for row in gpu:
        if 62 <= (row["time"] - gpu[0]["time"]) / 1e6 < 64:
            row["xid"] = 45
    found = detect(120, logs, gpu, [job.start(), job.end(63, "FAILED", 1)])
    assert [d.kind for d in found] == ["crash"], [(d.kind, d.summary) for d in found]
    stage = ActionStage(load_rules(RULES), RecordingExecutor(NODES))
    for detection in found:
        stage.respond(detection, detection.detected_at)
    drains = [d for d in stage.log.decisions if d.action == "drain"]
    assert drains == [], [(d.node, d.reason) for d in drains]
    assert all(not d.culprits for d in found), [(d.kind, d.culprits) for d in found]
