"""End to end on the real local Slurm: jobs write progress to their output files, faults are
injected, `medic serve` in enforce mode drains and requeues, and a restart repeats nothing."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.conftest import SlurmCluster
from tests.test_service import Served, rows, wait_for

STEP = (
    '[rank0]:[titan] $(date "+%Y-%m-%d %H:%M:%S,000") - root - INFO - step: $i  loss:  2.3456  '
    "memory: 45.67GiB(48.12%)  tps: 5,432  tflops: 123.45  mfu: 39.57%"
)
XID = "NVRM: Xid (PCI:0000:18:00): 79, pid=4242, GPU has fallen off the bus."


def training_script(fault: str, trigger: Path, logs: Path) -> str:
    """A job printing a torchtitan step every 0.5 s into a log per node, as launchers that
    write ``<job>-<node>.out`` do (Slurm's own %N is the host name, the same for every node of
    the local cluster). ``xid``: once the trigger file exists, its first run prints the
    kernel's Xid 79 (a collector forwarding dmesg into the job log). ``hang``: its first run
    stops printing after 30 steps but keeps running."""
    first_run = '[ "${SLURM_RESTART_COUNT:-0}" = 0 ]'
    if fault == "xid":
        inject = f'if {first_run} && [ -e {trigger} ]; then echo "{XID}"; rm -f {trigger}; fi'
    else:
        inject = f"if {first_run} && [ $i -gt 30 ]; then sleep 100000; fi"
    log = f"{logs}/e2e-$SLURM_JOB_ID-$SLURMD_NODENAME.out"
    loop = f'i=0; while true; do i=$((i+1)); {inject}; echo "{STEP}"; sleep 0.5; done'
    return f"exec >> {log} 2>&1; {loop}"


def write_config(tmp: Path, jobs: Path) -> Path:
    config = tmp / "medic.toml"
    config.write_text(
        f"""
[service]
listen = "127.0.0.1:0"
state_dir = "{tmp / "state"}"
checkpoint_interval_s = 0.5

[history]
path = "{tmp / "history.duckdb"}"

[sources.files]
paths = ["{jobs}/e2e-%j-%N.out"]
poll_interval_s = 0.2

[sources.slurm]
poll_interval_s = 1.0

[detectors.hang]
min_silence_s = 15.0
# Confirm a silence-only hang as soon as it is one (the default waits 180 s).
confirm_floor_s = 15.0

[rules]
mode = "enforce"

[rules.guards]
max_drained_fraction = 0.5

[rules.slurm]
restart_now = true
"""
    )
    return config


def test_serve_drains_requeues_and_repeats_nothing_after_restart(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"  # not the cluster's shared job directory: old runs' files stay there
    jobs.mkdir()
    trigger = tmp_path / "inject-xid"
    xid_job = slurm.sbatch("--requeue", script=training_script("xid", trigger, jobs))
    hang_job = slurm.sbatch("--requeue", script=training_script("hang", trigger, jobs))
    xid_node = slurm.wait_job(xid_job)["BatchHost"]
    hang_node = slurm.wait_job(hang_job)["BatchHost"]
    log = tmp_path / "serve-0.log"
    service = Served(write_config(tmp_path, jobs), log)
    try:
        wait_for(lambda: service.metric("medic_ingested_rows_total") > 20, 60)
        trigger.touch()

        drained = slurm.wait(
            lambda: slurm.node(xid_node), _drained_by_medic, "medic's drain", timeout=90
        )
        assert f"gpu_fault job {xid_job}" in drained["Reason"]
        again = slurm.wait(
            lambda: slurm.job(xid_job), _restarted_and_running, "the xid job's rerun", timeout=90
        )
        assert xid_node not in again["NodeList"]
        hang = slurm.wait(
            lambda: slurm.job(hang_job), _restarted_and_running, "the hung job's rerun", timeout=120
        )
        assert hang["Restarts"] == "1"
        assert service.stop() == 0
    finally:
        if service.proc.poll() is None:
            service.proc.send_signal(signal.SIGKILL)
    db = tmp_path / "history.duckdb"
    detections = rows(db, "SELECT job_id, kind, culprits FROM detections ORDER BY job_id")
    assert (xid_job, "gpu_fault", [xid_node]) in detections
    # A hang names a node only on evidence against it: the Xid on its node when both jobs
    # shared one, else none.
    hang_culprits = [xid_node] if hang_node == xid_node else []
    assert (hang_job, "hang", hang_culprits) in detections
    actions = rows(db, "SELECT job_id, action, node, status FROM actions ORDER BY time")
    assert (xid_job, "drain", xid_node, "done") in actions
    assert (xid_job, "requeue", None, "done") in actions
    assert (hang_job, "requeue", None, "done") in actions

    restarted = Served(write_config(tmp_path, jobs), tmp_path / "serve-1.log")
    wait_for(lambda: restarted.metric("medic_ingested_rows_total") > 10, 60)
    time.sleep(20)  # longer than the hang allowance: a repeat would have shown by now
    assert restarted.stop() == 0
    assert rows(db, "SELECT job_id, kind, culprits FROM detections ORDER BY job_id") == detections
    assert rows(db, "SELECT job_id, action, node, status FROM actions ORDER BY time") == actions
    assert slurm.job(xid_job)["Restarts"] == "1"
    assert slurm.job(hang_job)["Restarts"] == "1"


def _drained_by_medic(node: dict[str, str]) -> bool:
    return "DRAIN" in node.get("State", "") and node.get("Reason", "").startswith("medic")


def _restarted_and_running(job: dict[str, str]) -> bool:
    return job.get("Restarts") == "1" and job.get("JobState") == "RUNNING"


pytestmark = pytest.mark.slurm
