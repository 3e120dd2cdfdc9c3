"""The node lifecycle on the real local Slurm 22.05: a drained node is checked by a job pinned to
it and resumed when the check passes, kept drained when it fails; a drain by someone else is
never touched."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from medic.actions.config import SlurmConfig
from medic.actions.lifecycle import NodeLifecycle
from medic.actions.node_journal import NodeJournal
from medic.actions.recovery import Recovery
from medic.actions.recovery_config import LifecycleConfig
from medic.actions.slurm_cli import SlurmCli
from medic.actions.stage import ActionStage
from medic.history.store import DuckDBStore
from medic.ingest.base import Batch, Watermark
from medic.ingest.slurm import OWN_JOB_COMMENT, SlurmSource, SlurmSourceConfig
from medic.pipeline import Pipeline
from medic.testing.builders import at, batch, log
from medic.timeutil import US
from tests.actions.test_check_output import DCGM_4
from tests.conftest import SlurmCluster

pytestmark = pytest.mark.slurm


@pytest.fixture
def node(slurm: SlurmCluster) -> Iterator[str]:
    """An idle node for this test, given back resumed and unreserved."""
    idle = slurm.run("sinfo", "-h", "-N", "-t", "idle", "-o", "%N").stdout.split()
    if not idle:
        pytest.skip("no idle node in the local Slurm")
    name = random.choice(idle)  # other sessions may test on this cluster at the same time
    yield name
    slurm.run("scancel", f"--name=medic-check-{name}", check=False)
    slurm.run("scontrol", "delete", f"reservationname=medic-check-{name}", check=False)
    if "DRAIN" in slurm.node(name)["State"]:
        slurm.run("scontrol", "update", f"nodename={name}", "state=resume", check=False)


def drain(slurm: SlurmCluster, node: str, reason: str = "medic: test fault") -> None:
    slurm.run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")


def lifecycle(tmp_path: Path, command: str, store: DuckDBStore) -> NodeLifecycle:
    config = LifecycleConfig(
        enabled=True,
        check_command=command,
        sbatch_args=(),
        output_dir=str(tmp_path / "checks"),
        check_after_s=0,
        check_timeout_s=120,
    )
    slurm = SlurmCli(SlurmConfig(verify_timeout_s=15))
    return NodeLifecycle(config, slurm, NodeJournal(store), "medic")


def run_until_settled(cycle: NodeLifecycle, node: str, timeout_s: float = 60) -> list[str]:
    """Tick until the node's check has ended; the node's events."""
    deadline = time.monotonic() + timeout_s
    cycle.tick(time.time_ns() // 1000)
    assert node in cycle.checking(), [e.event for e in cycle.journal.by_node[node]]
    while node in cycle.checking():
        assert time.monotonic() < deadline, "the check did not end"
        time.sleep(0.5)
        cycle.tick(time.time_ns() // 1000)
    return [e.event for e in cycle.journal.by_node[node]]


def test_a_passing_check_resumes_the_drained_node(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    drain(slurm, node)
    with DuckDBStore() as store:
        cycle = lifecycle(tmp_path, 'echo "check ok on $SLURMD_NODENAME"', store)
        events = run_until_settled(cycle, node)
        assert events == ["drained", "check_started", "check_passed", "resumed"]
        passed = cycle.journal.last(node, "check_passed")
        assert passed is not None and passed.detail == f"check ok on {node}"
        stored = store.sql("SELECT event FROM node_events ORDER BY time").column(0).to_pylist()
        assert stored == events
    state = slurm.node(node)
    assert "DRAIN" not in state["State"] and "MAINT" not in state["State"], state["State"]
    assert f"medic-check-{node} " not in slurm.run("scontrol", "show", "reservation").stdout


def test_a_failing_check_keeps_the_node_drained_with_the_checks_words(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    drain(slurm, node)
    with DuckDBStore() as store:
        cycle = lifecycle(tmp_path, 'echo "GPU 3: diag failed"; exit 4', store)
        events = run_until_settled(cycle, node)
    assert events == ["drained", "check_started", "check_failed"]
    state = slurm.node(node)
    assert "DRAIN" in state["State"]
    assert state["Reason"].startswith("medic: health check failed: check job")
    assert "FAILED exit 4: GPU 3: diag failed" in state["Reason"]
    assert f"medic-check-{node} " not in slurm.run("scontrol", "show", "reservation").stdout


def test_the_check_budget_keeps_a_node_that_keeps_failing(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    drain(slurm, node)
    with DuckDBStore() as store:
        cycle = lifecycle(tmp_path, "exit 1", store)
        cycle.config = dataclasses.replace(cycle.config, max_checks_per_node=1)
        run_until_settled(cycle, node)
        cycle.tick(time.time_ns() // 1000 + US)
        events = [e.event for e in cycle.journal.by_node[node]]
    assert events == ["drained", "check_started", "check_failed", "drained", "kept"]
    assert "DRAIN" in slurm.node(node)["State"]


def test_a_drain_by_someone_else_is_never_checked_nor_resumed(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    drain(slurm, node, "ops: DIMM swap")
    with DuckDBStore() as store:
        cycle = lifecycle(tmp_path, "true", store)
        cycle.tick(time.time_ns() // 1000)
        assert node not in cycle.checking()
        assert cycle.journal.last(node) is None
    state = slurm.node(node)
    assert "DRAIN" in state["State"] and state["Reason"].startswith("ops: DIMM swap")


def test_a_lemon_is_kept_drained_and_flagged_without_a_check(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    drain(slurm, node)
    kept: list[str] = []
    with DuckDBStore() as store:
        cycle = lifecycle(tmp_path, "true", store)
        cycle.lemon = lambda name, now: 5.0 if name == node else 0.0
        cycle.alert = lambda event: kept.append(f"{event.node}: {event.detail}")
        cycle.tick(time.time_ns() // 1000)
        cycle.tick(time.time_ns() // 1000)
        events = [e.event for e in cycle.journal.by_node[node]]
    assert events == ["drained", "lemon", "kept"]
    assert kept == [f"{node}: lemon score 5.00 >= 3"]
    assert "DRAIN" in slurm.node(node)["State"]


def test_the_service_loop_checks_and_resumes_a_node_medic_drained(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    lifecycle_settings = {
        "enabled": True,
        "check_command": "echo healthy",
        "sbatch_args": [],
        "output_dir": str(tmp_path / "checks"),
        "check_after_s": 0,
    }
    settings = {"rules": {"mode": "enforce", "lifecycle": lifecycle_settings}}
    with DuckDBStore() as store:
        recovery = Recovery.from_settings(settings, store, tmp_path, time.time_ns() // 1000)
        recovery.attach(ActionStage.from_settings(settings, notifier=recovery.notifiers))
        assert recovery.lifecycle is not None
        drain(slurm, node, "medic: gpu_fault job 9 detection abc: Xid 79")
        deadline = time.monotonic() + 60
        while recovery.journal.last(node, "resumed") is None:
            assert time.monotonic() < deadline, list(recovery.journal.by_node[node])
            recovery.tick(time.time_ns() // 1000, {})
            time.sleep(0.5)
        drained = recovery.journal.last(node, "drained")
        assert drained is not None and drained.job_id == "9"
    assert "DRAIN" not in slurm.node(node)["State"]


def test_a_dcgm_failure_fails_the_check_even_with_exit_status_0(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    table = tmp_path / "diag.txt"
    table.write_text(DCGM_4)
    drain(slurm, node)
    with DuckDBStore() as store:
        cycle = lifecycle(tmp_path, f"cat {table}", store)
        assert run_until_settled(cycle, node) == ["drained", "check_started", "check_failed"]
    assert "COMPLETED exit 0: memory: Fail; memory: GPU1: Fail" in slurm.node(node)["Reason"]


def test_a_check_reservation_left_over_by_a_dead_medic_drains_its_node_again(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    prefix = "medic-orphan-test"  # its own name, so concurrent runs' checks are not touched
    reservation = f"{prefix}-{node}"
    slurm.run(
        "scontrol",
        "create",
        "reservation",
        f"reservationname={reservation}",
        f"nodes={node}",
        "users=root",
        "starttime=now",
        "duration=UNLIMITED",
        "flags=maint,ignore_jobs",
    )
    try:
        with DuckDBStore() as store:
            cycle = lifecycle(tmp_path, "true", store)
            cycle.config = dataclasses.replace(
                cycle.config, reservation_prefix=prefix, check_timeout_s=0.001
            )
            time.sleep(0.1)
            cycle.tick(time.time_ns() // 1000)
            events = [(e.event, e.detail) for e in cycle.journal.by_node[node]]
        assert events == [
            ("check_failed", f"check interrupted: reservation {reservation} left over")
        ]
        assert reservation not in slurm.run("scontrol", "show", "reservation").stdout
        state = slurm.node(node)
        assert "DRAIN" in state["State"]
        assert state["Reason"].startswith("medic: health check failed: check interrupted")
    finally:
        slurm.run("scontrol", "delete", f"reservationname={reservation}", check=False)


def test_a_failing_check_job_is_medics_own_and_reaches_no_detector(
    slurm: SlurmCluster, node: str, tmp_path: Path
) -> None:
    """The check job's failure is the lifecycle's alone: the Slurm source leaves it out (by its
    comment), the journal names it, and its rows are kept from the pipeline, which would
    otherwise report it as a crashed job (and the stage requeue it)."""
    source = SlurmSource(SlurmSourceConfig())
    asyncio.run(source.poll())  # a job that ends before the first poll is never reported
    drain(slurm, node)
    with DuckDBStore() as store:
        cycle = lifecycle(tmp_path, 'echo "RuntimeError: check failed"; exit 4', store)
        assert run_until_settled(cycle, node)[-1] == "check_failed"
        started = cycle.journal.last(node, "check_started")
    assert started is not None and started.job_id is not None
    check = started.job_id
    assert slurm.job(check)["Comment"] == f"{OWN_JOB_COMMENT} of {node}"
    assert cycle.journal.check_jobs() == {check}
    polled = asyncio.run(source.poll())
    jobs = [b.frame for b in polled if isinstance(b, Batch) and b.stream == "scheduler"]
    seen = {j for frame in jobs for j in frame.get_column("job_id").drop_nulls().to_list()}
    assert check not in seen and check in source.own_jobs
    lines = batch("logs", [log(0, "[rank0]: RuntimeError: check failed", job_id=check)])
    ended = batch(
        "scheduler",
        [{"time": at(1), "kind": "job", "job_id": check, "state": "FAILED", "exit_code": 4}],
    )
    pipeline = Pipeline.from_settings({})
    own = source.own_jobs | cycle.journal.check_jobs()
    found = pipeline.run([lines.without_jobs(own), ended.without_jobs(own), Watermark(at(120))])
    assert found == []
    assert Pipeline.from_settings({}).run([lines, ended, Watermark(at(120))]) != []
