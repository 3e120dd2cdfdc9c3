"""Every fault of a job acted on, and no action repeated after kill -9: `medic serve` in enforce
mode on the real local Slurm, jobs writing their output files (one per node, written by an
``srun`` task there), faults written as their lines (a kernel Xid into the node's kernel log,
CUDA errors into the job's output) or shown by GPU telemetry (``medic agent`` over a fake NVML
on each of the job's nodes, scraped as dcgm-exporter would be)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from medic.ingest.nvml import Agent, AgentConfig
from medic.testing.nvml import FakeGpu, FakeNvml
from tests.conftest import SlurmCluster
from tests.test_service import Served, append, rows, wait_for

# NVIDIA's Xid 79; the kernel line's format as leptonai/gpud#46 shows it
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=3141, GPU has fallen off the bus."
# the sticky CUDA error of the ranks on a lost GPU (pytorch/pytorch#49832)
CUDA_ERROR = "[rank0]: RuntimeError: CUDA error: unspecified launch failure"
# Megatron-LM's training_log line (megatron/training/training.py), each rank's output prefixed
# by torchrun's --tee as "[rankN]: "
STEP = (
    '[rank$SLURM_PROCID]: [$(date "+%F %T")] iteration $(printf %8d $i)/  100000 | '
    "consumed samples: $(printf %12d $((i*512))) | elapsed time per iteration (ms): 500.0 | "
    "lm loss: 2.341E+00 |"
)


class Live:
    """One test's job on the cluster and its medic serve config, cleaned up afterwards."""

    def __init__(self, cluster: SlurmCluster, tmp: Path, nodes: int = 1) -> None:
        self.cluster, self.tmp = cluster, tmp
        self.jobs, self.kern = tmp / "jobs", tmp / "kern"
        self.jobs.mkdir()
        task = (
            f"exec >> {self.jobs}/live-$SLURM_JOB_ID-$SLURMD_NODENAME.out 2>&1; "
            f'i=0; while true; do i=$((i+1)); echo "{STEP}"; sleep 0.5; done'
        )
        script = f"srun --ntasks-per-node=1 bash -c '{task}'"
        self.job_id = cluster.sbatch("--requeue", f"-N{nodes}", script=script)
        self.served: list[Served] = []
        self.settings = ""
        """More of medic.toml, for one test."""

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
{self.settings}
"""
        )
        return path

    def serve(self, env: dict[str, str] | None = None) -> Served:
        served = Served(self.config(), self.tmp / f"serve-{len(self.served)}.log", env)
        self.served.append(served)
        wait_for(lambda: served.metric("medic_ingested_rows_total") > 5, 60)
        return served

    def running(self, restarts: int, timeout: float = 90) -> str:
        """The node the job runs on (its batch host) once it runs with ``restarts`` restarts."""
        return self.job_running(restarts, timeout)["BatchHost"]

    def job_running(self, restarts: int, timeout: float = 90) -> dict[str, str]:
        return self.cluster.wait(
            lambda: self.cluster.job(self.job_id),
            lambda j: j.get("JobState") == "RUNNING" and j.get("Restarts") == str(restarts),
            f"job {self.job_id} running with {restarts} restarts",
            timeout,
        )

    def nodes(self, job: dict[str, str]) -> list[str]:
        listed = self.cluster.run("scontrol", "show", "hostnames", job["NodeList"]).stdout
        return listed.split()

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


class GpuNodes:
    """``medic agent`` on each node of a job, over a fake NVML of four busy H100s, sampling
    every 0.5 s and mapping its GPUs to the job as dcgm-exporter's job-mapping files do."""

    def __init__(self, tmp: Path, job_id: str, nodes: list[str]) -> None:
        self.nvml: dict[str, FakeNvml] = {}
        self.agents: list[Agent] = []
        self.targets: list[str] = []
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        for node in nodes:
            job_map = tmp / "job-map" / node
            job_map.mkdir(parents=True)
            for gpu in range(4):
                (job_map / str(gpu)).write_text(f"{job_id}\n")
            nvml = self.nvml[node] = FakeNvml([FakeGpu(f"GPU-{node}-{i}") for i in range(4)])
            config = AgentConfig("127.0.0.1", 0, 0.5, hostname=node, job_map_dir=str(job_map))
            agent = Agent(config, nvml)
            self.targets.append(f"http://127.0.0.1:{agent.start()}/metrics")
            thread = threading.Thread(target=agent.run, args=(self.stop, lambda _: None))
            thread.start()
            self.agents.append(agent)
            self.threads.append(thread)

    def power_capped(self, node: str, gpu: int) -> None:
        """The GPU's clocks held down by its power cap (NVML's SW power cap reason, 0x4), as a
        part with a lowered power limit runs: every rank then waits for it."""
        found = self.nvml[node].gpus[gpu]
        found.sm_clock, found.power_mw, found.reasons = 1305, 400_000, 0x4

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()
        for agent in self.agents:
            agent.close()


@pytest.fixture
def live(slurm: SlurmCluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Live]:
    """The test's job on one node, or on ``request.param`` nodes (indirect parametrisation)."""
    slurm.reset()  # nodes an earlier test left drained would keep the requeued job pending
    found = Live(slurm, tmp_path, getattr(request, "param", 1))
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
def test_kill_9_between_an_action_and_its_verification_requeues_exactly_once(
    live: Live, requeued: bool
) -> None:
    """``scontrol`` on medic's PATH is the real one, except that a requeue stops (before or
    after running the real command) and says so: medic is killed there, before it verified.
    The restarted service resumes the requeue from the journal, reading the job's restart
    count first: it requeues the job that was not, and only excludes the node of the one that
    was."""
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
    journal = live.tmp / "state" / "journal.jsonl"
    ops = [json.loads(line)["op"] for line in journal.read_text().splitlines()]
    assert ops == ["plan", "issued", "verified", "issued"], "planned before the first ran"

    restarted = live.serve()
    job = live.job_running(1)
    time.sleep(5)
    assert restarted.stop() == 0
    assert live.cluster.job(live.job_id)["Restarts"] == "1"
    assert job["BatchHost"] != node
    requeues = [a for a in live.actions() if a[0] == "requeue"]
    if node in live.nodes({"NodeList": job["ExcNodeList"]}):
        assert requeues == [("requeue", None, "done")]
    else:
        # requeued without its exclusion before the kill, the job may run again (on another
        # node: its node was drained first) before medic is back; Slurm excludes nodes of
        # pending jobs only, and the outcome says what Slurm shows
        assert requeued, "only the requeue the killed medic ran can have started unexcluded"
        assert requeues == [("requeue", None, "partial")]
    assert json.loads(journal.read_text().splitlines()[-1])["op"] == "closed"


@pytest.mark.parametrize("live", [2], indirect=True, ids=["two-nodes"])
def test_a_gpu_fault_on_another_node_after_a_straggler_is_acted_on(live: Live) -> None:
    """A straggler (a power-capped GPU, seen in telemetry) is drained as its route says; a
    kernel Xid 79 on the job's other node, in the same incident, still drains that node and
    requeues the job."""
    slow, other = live.nodes(live.job_running(0))
    gpus = GpuNodes(live.tmp, live.job_id, [slow, other])
    try:
        gpus.power_capped(slow, 3)
        live.settings = f"""
[sources.prometheus]
targets = {gpus.targets!r}
interval_s = 0.5

[detectors.straggler]
window_s = 2.0
sample_s = 2.0
peer_k = 2
peer_n = 3

[[rules.routes]]
name = "slow-node"
kinds = ["straggler"]
jobs = ["{live.job_id}"]
culprits = true
actions = ["drain"]
"""
        served = live.serve()
        wait_for(lambda: live.drained_by_medic(slow), 90)
        assert live.cluster.job(live.job_id)["Restarts"] == "0", "the route only drains"
        live.xid(other)
        live.cluster.wait(
            lambda: live.cluster.job(live.job_id),
            lambda j: j.get("Restarts") == "1",
            f"job {live.job_id} requeued",
            60,
        )
        assert live.drained_by_medic(other)
        assert served.stop() == 0
    finally:
        gpus.close()
    assert live.detections() == [("straggler", [slow]), ("gpu_fault", [other])]
    query = f"SELECT DISTINCT incident_id FROM detections WHERE job_id = '{live.job_id}'"
    assert len(rows(live.tmp / "history.duckdb", query)) == 1, "one incident, upgraded"
    assert live.actions() == [
        ("drain", slow, "done"),
        ("drain", other, "done"),
        ("requeue", None, "done"),
    ]


def test_a_job_that_failed_before_serve_started_is_neither_detected_nor_acted_on(
    live: Live,
) -> None:
    """squeue lists ended jobs for MinJobAge: a failure from before medic started is history;
    a failure after it started is a crash, and the route requeues it (a held job, released
    once medic runs, fails after it started)."""
    fail = 'if [ -z "$SLURM_RESTART_COUNT" ]; then exit 3; fi; sleep 600'
    before = live.cluster.sbatch("--requeue", script=fail)
    after = live.cluster.sbatch("--requeue", "--hold", script=fail)
    try:
        live.cluster.wait_job(before, "FAILED")
        live.settings = f"""
[[rules.routes]]
name = "failed-jobs"
kinds = ["crash"]
jobs = ["{before}", "{after}"]
actions = ["requeue"]
"""
        served = live.serve()
        wait_for(lambda: 'event="ended_before_start"' in served.get("/metrics").text, 30)
        live.cluster.run("scontrol", "release", after)
        live.cluster.wait(
            lambda: live.cluster.job(after),
            lambda j: j.get("Restarts") == "1",
            f"job {after} requeued",
            60,
        )
        time.sleep(3)
        assert served.stop() == 0
        assert live.cluster.job(before)["Restarts"] == "0"
    finally:
        live.cluster.run("scancel", before, after, check=False)
    db = live.tmp / "history.duckdb"
    query = "SELECT job_id, kind FROM detections WHERE job_id IN (?, ?) ORDER BY job_id"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(query, [before, after]).fetchall() == [(after, "crash")]
        query = "SELECT job_id, action, status FROM actions WHERE job_id IN (?, ?)"
        assert con.execute(query, [before, after]).fetchall() == [(after, "requeue", "done")]
