"""Every fault of a job acted on, and no action repeated after kill -9: `medic serve` in enforce
mode on the real local Slurm, jobs writing their output files, faults written as their lines
(a kernel Xid into the node's kernel log, CUDA errors into the job's output)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SlurmCluster
from tests.test_service import Served, append, rows, wait_for

# NVIDIA's Xid 79; the kernel line's format as leptonai/gpud#46 shows it
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=3141, GPU has fallen off the bus."
# the sticky CUDA error of the ranks on a lost GPU (pytorch/pytorch#49832)
CUDA_ERROR = "[rank0]: RuntimeError: CUDA error: unspecified launch failure"
# Megatron-LM's training_log line (megatron/training/training.py)
STEP = "[rank0]: iteration $i | consumed samples: $((i*512)) | lm loss: 2.341E+00"


class Live:
    """One test's job on the cluster and its medic serve config, cleaned up afterwards."""

    def __init__(self, cluster: SlurmCluster, tmp: Path) -> None:
        self.cluster, self.tmp = cluster, tmp
        self.jobs, self.kern = tmp / "jobs", tmp / "kern"
        self.jobs.mkdir()
        script = (
            f"exec >> {self.jobs}/live-$SLURM_JOB_ID-$SLURMD_NODENAME.out 2>&1; "
            f'i=0; while true; do i=$((i+1)); echo "{STEP}"; sleep 0.5; done'
        )
        self.job_id = cluster.sbatch("--requeue", "-N1", script=script)
        self.served: list[Served] = []

    def config(self) -> Path:
        path = self.tmp / "medic.toml"
        path.write_text(
            f"""
[service]
listen = "127.0.0.1:0"
state_dir = "{self.tmp / "state"}"
checkpoint_interval_s = 0.5

[history]
path = "{self.tmp / "history.duckdb"}"

[sources.files]
paths = ["{self.jobs}/live-%j-%N.out", "{self.kern}/%N.log"]
poll_interval_s = 0.2

[sources.slurm]
poll_interval_s = 1.0

[rules]
mode = "enforce"
guards = {{ max_drained_nodes = 4 }}
slurm = {{ restart_now = true }}

[[rules.routes]]
name = "own-hardware-fault"
kinds = ["gpu_fault"]
jobs = ["{self.job_id}"]
culprits = true
actions = ["drain", "requeue"]
"""
        )
        return path

    def serve(self, env: dict[str, str] | None = None) -> Served:
        served = Served(self.config(), self.tmp / f"serve-{len(self.served)}.log", env)
        self.served.append(served)
        wait_for(lambda: served.metric("medic_ingested_rows_total") > 5, 60)
        return served

    def running(self, restarts: int, timeout: float = 90) -> str:
        """The node the job runs on once it runs with ``restarts`` restarts."""
        job = self.cluster.wait(
            lambda: self.cluster.job(self.job_id),
            lambda j: j.get("JobState") == "RUNNING" and j.get("Restarts") == str(restarts),
            f"job {self.job_id} running with {restarts} restarts",
            timeout,
        )
        return job["BatchHost"]

    def xid(self, node: str) -> None:
        append(self.kern / f"{node}.log", XID)

    def output(self, node: str) -> Path:
        return self.jobs / f"live-{self.job_id}-{node}.out"

    def drained_by_medic(self, node: str) -> bool:
        found = self.cluster.node(node)
        return "DRAIN" in found.get("State", "") and f"job {self.job_id} " in found["Reason"]

    def actions(self) -> list[tuple[str, str | None, str]]:
        """This job's actions that ran (others' jobs on the shared cluster are detected too)."""
        query = (
            "SELECT action, node, status FROM actions "
            f"WHERE guard IS NULL AND job_id = '{self.job_id}' ORDER BY time, action"
        )
        return [tuple(r) for r in rows(self.tmp / "history.duckdb", query)]

    def detections(self) -> list[tuple[str, list[str]]]:
        query = (
            "SELECT kind, culprits FROM detections "
            f"WHERE job_id = '{self.job_id}' ORDER BY detected_at"
        )
        return [tuple(r) for r in rows(self.tmp / "history.duckdb", query)]

    def close(self) -> None:
        for served in self.served:
            if served.proc.poll() is None:
                served.proc.kill()
                served.proc.wait()
        self.cluster.run("scancel", self.job_id, check=False)
        mine = [n for n in self.cluster.nodes if self.drained_by_medic(n)]
        if mine:
            self.cluster.run("scontrol", "update", f"nodename={','.join(mine)}", "state=resume")


@pytest.fixture
def live(slurm: SlurmCluster, tmp_path: Path) -> Iterator[Live]:
    slurm.reset()  # nodes an earlier test left drained would keep the requeued job pending
    found = Live(slurm, tmp_path)
    yield found
    found.close()


def test_a_second_fault_after_medics_requeue_is_acted_on(live: Live) -> None:
    first = live.running(0)
    served = live.serve()
    live.xid(first)
    second = live.running(1)
    assert second != first and live.drained_by_medic(first)
    wait_for(lambda: live.output(second).exists(), 30)
    time.sleep(1)
    live.xid(second)
    live.running(2)
    assert live.drained_by_medic(second)
    assert served.stop() == 0
    assert live.actions() == [
        ("drain", first, "done"),
        ("requeue", None, "done"),
        ("drain", second, "done"),
        ("requeue", None, "done"),
    ]


def test_an_xid_20_s_after_the_cuda_errors_drains_and_requeues(live: Live) -> None:
    node = live.running(0)
    served = live.serve()
    append(live.output(node), CUDA_ERROR)
    time.sleep(20)
    live.xid(node)
    live.running(1)
    assert live.drained_by_medic(node)
    assert served.stop() == 0
    assert live.detections() == [("crash", []), ("gpu_fault", [node])]
    assert live.actions() == [("drain", node, "done"), ("requeue", None, "done")]


@pytest.mark.parametrize("requeued", [False, True], ids=["before-requeue", "after-requeue"])
def test_kill_9_between_an_action_and_its_verification_repeats_nothing(
    live: Live, requeued: bool
) -> None:
    """``scontrol`` on medic's PATH is the real one, except that a requeue stops (before or
    after running the real command) and says so: medic is killed there, before it verified."""
    shim, marker = live.tmp / "bin", live.tmp / "requeue-started"
    shim.mkdir()
    real = shutil.which("scontrol")
    forward = f'"{real}" "$@"; ' if requeued else ""
    (shim / "scontrol").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = requeue ]; then {forward}echo $$ > "{marker}"; exec sleep 600; fi\n'
        f'exec "{real}" "$@"\n'
    )
    (shim / "scontrol").chmod(0o755)
    node = live.running(0)
    served = live.serve({**os.environ, "PATH": f"{shim}:{os.environ['PATH']}"})
    live.xid(node)
    pid = int(wait_for(lambda: marker.exists() and marker.read_text().strip(), 60))
    served.stop(signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    ledger = (live.tmp / "state" / "ledger.jsonl").read_text().splitlines()
    assert len(ledger) == 2, "the drain and the requeue were claimed before they ran"

    restarted = live.serve()
    time.sleep(15)
    assert restarted.stop() == 0
    assert live.cluster.job(live.job_id)["Restarts"] == ("1" if requeued else "0")
    assert [a for a in live.actions() if a[0] == "requeue"] == []
    assert (live.tmp / "state" / "ledger.jsonl").read_text().splitlines() == ledger
