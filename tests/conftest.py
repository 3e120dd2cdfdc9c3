"""Shared fixtures. ``slurm``: the real local Slurm cluster of ``scripts/slurm-local``.

``scripts/test`` starts the cluster before pytest (as root, as in CI), exports
``MEDIC_SLURM=<state dir>`` and stops it afterwards; a cluster started by hand with
``scripts/slurm-local start`` is found too. Without one, Slurm tests skip with the reason,
except under ``CI=true``, where that is a failure.

``scripts/test`` runs pytest in two pytest-xdist workers; every test that uses the one
cluster is put in one xdist group, so those run one after another in a single worker (each
resets the cluster, drains and requeues nodes, and counts on the queue it leaves).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLURM_LOCAL = ROOT / "scripts" / "slurm-local"
KEY = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=")


def parse_show(line: str) -> dict[str, str]:
    """One line of ``scontrol -o show job|node`` as a dict (the first of a repeated key wins)."""
    found = list(KEY.finditer(line))
    fields: dict[str, str] = {}
    for match, following in zip(found, [*found[1:], None], strict=True):
        end = following.start() if following else len(line)
        fields.setdefault(match.group(1), line[match.end() : end].strip())
    return fields


@dataclass(frozen=True)
class SlurmCluster:
    """A handle to the local cluster: its nodes, a job directory, and readers that poll."""

    state_dir: Path
    nodes: tuple[str, ...]

    @property
    def jobs_dir(self) -> Path:
        return self.state_dir / "jobs"

    @property
    def rest_socket(self) -> Path:
        return self.state_dir / "slurmrestd.sock"

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: rc {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def sbatch(self, *options: str, script: str = "sleep 600") -> str:
        """Submit a batch job (``options`` are sbatch's); returns its id."""
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        out = self.run(
            "sbatch",
            "--parsable",
            f"--chdir={self.jobs_dir}",
            f"--output={self.jobs_dir}/job-%j.out",
            *options,
            "--wrap",
            script,
        ).stdout
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        return parse_show(self.run("scontrol", "-o", "show", "job", job_id).stdout)

    def node(self, name: str) -> dict[str, str]:
        return parse_show(self.run("scontrol", "-o", "show", "node", name).stdout)

    def drained(self) -> set[str]:
        return set(self.run("sinfo", "-h", "-N", "-t", "drain", "-o", "%N").stdout.split())

    def wait(
        self,
        read: Callable[[], dict[str, str]],
        ok: Callable[[dict[str, str]], bool],
        what: str,
        timeout: float = 30.0,
    ) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        value = read()
        while not ok(value):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {value}")
            time.sleep(0.1)
            value = read()
        return value

    def wait_job(self, job_id: str, state: str = "RUNNING") -> dict[str, str]:
        return self.wait(
            lambda: self.job(job_id), lambda j: j.get("JobState") == state, f"job {job_id} {state}"
        )

    def reset(self) -> None:
        """Cancel every job and resume every drained node, so each test starts clean."""
        jobs = self.run("squeue", "-h", "-o", "%i").stdout.split()
        if jobs:
            self.run("scancel", *jobs)
        drained = self.drained()
        if drained:
            self.run("scontrol", "update", f"nodename={','.join(sorted(drained))}", "state=resume")
        self.wait(
            lambda: {"busy": self.run("squeue", "-h", "-t", "R,CG,S", "-o", "%i").stdout},
            lambda v: not v["busy"].strip(),
            "jobs to end",
            timeout=90.0,  # a loaded 2-core machine can take over 30 s to end a killed job
        )


def _find_cluster() -> SlurmCluster | str:
    """The running local cluster, or why there is none."""
    state_dir = Path(os.environ.get("MEDIC_SLURM") or ROOT / ".slurm")
    status = subprocess.run(
        [str(SLURM_LOCAL), "status"], capture_output=True, text=True, check=False, timeout=30
    )
    if status.returncode != 0:
        return (
            f"no local Slurm ({status.stderr.strip() or 'scripts/slurm-local status failed'}): "
            "scripts/test starts one when run as root, or run scripts/slurm-local start"
        )
    nodes = sorted({line.split()[0] for line in status.stdout.splitlines() if line.strip()})
    return SlurmCluster(state_dir, tuple(nodes))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests sharing one cluster run as one xdist group, in one worker. xdist hands out the
    largest groups first, one to each worker: the Slurm group (mostly waiting on the cluster)
    and the quality floor (backtests in two processes) start together and overlap."""
    for item in items:
        if "slurm" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm"))
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Fail loudly when pytest-xdist stops grouping: its loadgroup tags each grouped test's
    node id with ``@group``, which pytest 9.2 no longer lets it do (pytest-xdist#1386), and the
    Slurm tests would then race each other on the one cluster."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid
    ]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist did not group {len(lost)} tests (e.g. {lost[0]}): "
            "install the pytest version pyproject.toml names"
        )


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    found = _find_cluster()
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true needs the local Slurm: {found}")
        pytest.skip(found)
    found.reset()
    yield found
    found.reset()


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """The address of a Ray cluster on this machine (medic.testing.ray_local: a head and one
    worker node, one CPU each), stopped with every process it started at the end of the
    session. The tests that use it run in one xdist group, so one cluster serves them all."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
    from medic.testing.ray_local import start_cluster

    cluster = start_cluster()
    try:
        yield cluster.address
    finally:
        cluster.stop()
