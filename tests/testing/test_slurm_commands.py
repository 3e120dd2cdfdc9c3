"""The public Slurm command runner: Slurm 22.05's answers, and SlurmCli driven through it."""

from __future__ import annotations

from medic.actions.config import SlurmConfig
from medic.actions.slurm_cli import SlurmCli
from medic.ingest.base import Batch
from medic.ingest.slurm import SlurmSource, SlurmSourceConfig
from medic.testing.builders import T0
from medic.testing.clock import FakeClock, TickingClock
from medic.testing.slurm import CommandJob, SlurmCommands, hostnames


def cluster() -> SlurmCommands:
    jobs = {"7": CommandJob(nodes=("n1", "n2")), "8": CommandJob("PENDING"), "9": CommandJob()}
    jobs["9"].requeue = False
    return SlurmCommands(["n1", "n2", "n3"], jobs)


def cli(slurm: SlurmCommands) -> SlurmCli:
    clock = FakeClock()
    config = SlurmConfig(backoff_s=0, poll_s=0.01, verify_timeout_s=0.05)
    return SlurmCli(config, runner=slurm, sleep=clock.sleep, clock=clock)


def state(s: SlurmCli, node: str) -> str | None:
    found = s.read_node(node)
    return None if found is None else found.state


def test_slurm_refusals_are_answered_as_22_05_words_them() -> None:
    slurm = cluster()
    update = ["scontrol", "update", "nodename=n9", "state=drain", "reason=x"]
    assert slurm(update, 5).stderr == "slurm_update error: Invalid node name specified"
    no_reason = slurm(["scontrol", "update", "nodename=n1", "state=drain"], 5)
    assert no_reason.returncode == 1 and "must specify a reason" in no_reason.stderr
    resume = slurm(["scontrol", "update", "nodename=n3", "state=resume"], 5)
    assert resume.stderr == "slurm_update error: Invalid node state specified"
    assert slurm(["scontrol", "requeue", "8"], 5).stderr == "Job is pending execution for job 8"
    disabled = slurm(["scontrol", "requeue", "9"], 5).stderr
    assert disabled == "Requested operation is presently disabled for job 9"
    assert slurm(["scancel", "99999"], 5).returncode == 0  # silent, as scancel is
    assert slurm(["sinfo", "-h", "-N", "-n", "n9", "-o", "%N|%T|%E"], 5).stdout == ""
    assert slurm(["scontrol", "ping"], 5).returncode == 2 and slurm.unanswered == [
        ["scontrol", "ping"]
    ]


def test_slurm_cli_drains_requeues_holds_and_cancels_through_it() -> None:
    slurm = cluster()
    s = cli(slurm)
    assert s.drain("n1", "medic: test").status == "done"
    assert slurm.drained == {"n1": "medic: test"}
    assert state(s, "n1") == "draining"  # job 7 still runs on it
    requeued = s.requeue("7", exclude=["n1"])
    assert requeued.status == "done", requeued.detail
    assert slurm.jobs["7"].restarts == 1 and slurm.jobs["7"].excluded == {"n1"}
    assert state(s, "n1") == "drained"
    assert s.hold("8").status == "done" and slurm.jobs["8"].priority == 0
    assert s.cancel("8").status == "done" and slurm.jobs["8"].state == "CANCELLED"
    assert s.resume("n1").status == "done" and slurm.drained == {}


def test_a_refused_command_and_a_down_controller_change_nothing() -> None:
    slurm = cluster()
    slurm.refuse["update"] = "slurm_update error: Invalid user id"
    assert cli(slurm).drain("n1", "medic: test").status == "failed"
    slurm.refuse.clear()
    slurm.up = False
    assert cli(slurm).drain("n1", "medic: test").status == "failed"
    assert slurm.drained == {}


def test_hostnames_expand_as_scontrol_show_hostnames() -> None:
    assert hostnames("n[1-3,7],gpu01") == ["n1", "n2", "n3", "n7", "gpu01"]
    assert hostnames("gpu[08-10]") == ["gpu08", "gpu09", "gpu10"]


def test_the_clock_moves_only_when_told() -> None:
    clock = FakeClock(10.0)
    clock.sleep(0.5)
    clock.advance(1)
    assert clock() == 11.5 and clock.sleeps == [0.5]


async def test_the_slurm_source_sees_what_the_executor_did() -> None:
    slurm = cluster()
    source = SlurmSource(SlurmSourceConfig(), runner=slurm, clock=TickingClock(T0))
    await source.poll()
    cli(slurm).drain("n1", "medic: test")
    events = await source.poll()
    rows = [row for e in events if isinstance(e, Batch) for row in e.data.to_pylist()]
    assert [(r["node"], r["state"], r["reason"]) for r in rows if r["kind"] == "node"] == [
        ("n1", "ALLOCATED+DRAIN", "medic: test")
    ]
