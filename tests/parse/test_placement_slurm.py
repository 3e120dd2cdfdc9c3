"""One output file for a whole job (Slurm's default ``slurm-%j.out``), read by `medic serve` on
the real local Slurm: a kernel line that one node's prefix names is blamed on that node, never
on the host that runs medic, and a node Slurm does not know is never named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SlurmCluster
from tests.test_service import Served, append, rows, wait_for

XID = "NVRM: Xid (PCI:0000:5d:00): 79, pid=2718, GPU has fallen off the bus."
"""NVIDIA's Xid 79 as the kernel prints it (leptonai/gpud#46)."""


class SharedOutput:
    """A two-node job whose tasks (one per node) all write to the job's one output file."""

    def __init__(self, cluster: SlurmCluster, tmp: Path) -> None:
        self.cluster, self.tmp = cluster, tmp
        self.jobs = tmp / "jobs"
        self.jobs.mkdir()
        task = 'i=0; while true; do i=$((i+1)); echo "step $i on $SLURMD_NODENAME"; sleep 0.5; done'
        self.job_id = cluster.sbatch(
            "-N2",
            f"--output={self.jobs}/slurm-%j.out",
            "--open-mode=append",
            script=f"srun --ntasks-per-node=1 bash -c '{task}'",
        )
        self.served: Served | None = None

    @property
    def output(self) -> Path:
        return self.jobs / f"slurm-{self.job_id}.out"

    def nodes(self) -> list[str]:
        job = self.cluster.wait(
            lambda: self.cluster.job(self.job_id),
            lambda j: j.get("JobState") == "RUNNING",
            f"job {self.job_id} running",
            90,
        )
        listed = self.cluster.run("scontrol", "show", "hostnames", job["NodeList"]).stdout
        return listed.split()

    def serve(self) -> Served:
        config = self.tmp / "medic.toml"
        config.write_text(
            f"""
[service]
listen = "127.0.0.1:0"
state_dir = "{self.tmp / "state"}"
checkpoint_interval_s = 0.5

[history]
path = "{self.tmp / "history.duckdb"}"

[sources.files]
paths = ["{self.jobs}/slurm-%j.out"]
poll_interval_s = 0.2

[sources.slurm]
poll_interval_s = 1.0

[rules]
mode = "enforce"
guards = {{ max_drained_nodes = 4 }}

[[rules.routes]]
name = "shared-output-hardware-fault"
kinds = ["gpu_fault"]
jobs = ["{self.job_id}"]
culprits = true
actions = ["drain"]
"""
        )
        self.served = Served(config, self.tmp / "serve.log")
        wait_for(lambda: self.served and self.served.metric("medic_ingested_rows_total") > 5, 60)
        return self.served

    def detections(self) -> list[tuple[str, list[str]]]:
        query = (
            "SELECT kind, culprits FROM detections "
            f"WHERE job_id = '{self.job_id}' ORDER BY detected_at"
        )
        return [tuple(r) for r in rows(self.tmp / "history.duckdb", query)]

    def actions(self) -> list[tuple[str, str | None, str]]:
        query = (
            "SELECT action, node, status FROM actions "
            f"WHERE guard IS NULL AND job_id = '{self.job_id}' ORDER BY time, action"
        )
        return [tuple(r) for r in rows(self.tmp / "history.duckdb", query)]

    def drained_by_medic(self, node: str) -> bool:
        found = self.cluster.node(node)
        return "DRAIN" in found.get("State", "") and f"job {self.job_id} " in found["Reason"]

    def close(self) -> None:
        if self.served is not None and self.served.proc.poll() is None:
            self.served.proc.kill()
            self.served.proc.wait()
        self.cluster.run("scancel", self.job_id, check=False)
        mine = [n for n in self.cluster.nodes if self.drained_by_medic(n)]
        if mine:
            self.cluster.run("scontrol", "update", f"nodename={','.join(mine)}", "state=resume")


@pytest.fixture
def shared(slurm: SlurmCluster, tmp_path: Path) -> Iterator[SharedOutput]:
    slurm.reset()
    found = SharedOutput(slurm, tmp_path)
    yield found
    found.close()


def test_a_line_in_the_jobs_one_output_file_is_blamed_on_the_node_its_prefix_names(
    shared: SharedOutput,
) -> None:
    first, second = shared.nodes()
    others = [n for n in shared.cluster.nodes if n not in (first, second)]
    wait_for(lambda: shared.output.exists() and shared.output.read_text().count("step") > 4, 30)
    shared.serve()
    # a node Slurm knows but that is not the job's, one Slurm does not know, then the job's own
    append(shared.output, f"{others[0]}: {XID}", f"gpu-zz9: {XID}", f"{second}: {XID}")
    wait_for(lambda: shared.drained_by_medic(second), 30)
    served = shared.served
    assert served is not None
    assert served.metric('medic_source_events_total{event="unknown_node",source="placement"}') == 2
    assert served.stop() == 0
    assert shared.detections() and {k for k, _ in shared.detections()} == {"gpu_fault"}
    assert {node for _, culprits in shared.detections() for node in culprits} == {second}
    assert shared.actions() == [("drain", second, "done")]
    log = (shared.tmp / "serve.log").read_text()
    assert "'gpu-zz9'" in log and f"'{others[0]}'" in log and "unknown_node" in log
    assert not any(shared.drained_by_medic(n) for n in (first, *others))
