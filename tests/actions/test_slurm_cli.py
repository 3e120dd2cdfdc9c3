import pytest

from medic.actions.config import SlurmConfig
from medic.actions.slurm_cli import JOB_FORMAT, SlurmCli
from medic.slurm import CommandResult, run_command
from medic.testing.clock import FakeClock
from medic.testing.slurm import ScriptedRunner

REASON = "medic: gpu_fault job 42 detection abc: Xid 79"


def ok(stdout: str = "") -> CommandResult:
    return CommandResult(0, stdout, "")


def err(message: str, rc: int = 1) -> CommandResult:
    return CommandResult(rc, "", message)


def cli(script: ScriptedRunner, clock: FakeClock | None = None, **config: object) -> SlurmCli:
    clock = clock or FakeClock()
    settings = SlurmConfig(**config)  # type: ignore[arg-type]
    return SlurmCli(settings, runner=script, sleep=clock.sleep, clock=clock)


def node(name: str) -> list[str]:
    return ["sinfo", "-h", "-N", "-n", name, "-o", "%N|%T|%E"]


def node_line(name: str, state: str, reason: str = "none") -> CommandResult:
    return ok(f"{name}|{state}|{reason}\n")


def job(job_id: str = "42") -> list[str]:
    return ["squeue", "-h", "-t", "all", "-j", job_id, "-O", JOB_FORMAT]


def job_line(
    state: str,
    priority: int = 100,
    restarts: int = 0,
    required: str = "",
    job_id: str = "42",
    allocated: str = "",
) -> CommandResult:
    return ok(f"{job_id}|{state}|gpu|alice|{priority}|{restarts}|{required}|{allocated}|\n")


def excluded(job_id: str = "42") -> list[str]:
    return ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%x"]


NODES = ["sinfo", "-h", "-N", "-o", "%N"]
CLUSTER = (NODES, ok("n3\nn4\nn5\nn7\nn3\n"))


DRAIN = ["scontrol", "update", "nodename=n3", "state=drain", f"reason={REASON}"]


def test_drain_sets_the_reason_and_verifies_it() -> None:
    script = ScriptedRunner(
        (node("n3"), node_line("n3", "allocated")),
        (DRAIN, ok()),
        (node("n3"), node_line("n3", "allocated")),
        (node("n3"), node_line("n3", "draining", REASON)),
    )
    outcome = cli(script).drain("n3", REASON)
    assert outcome.status == "done"
    assert outcome.changed
    assert outcome.detail == "node n3 draining, reason set"
    assert script.finished()


def test_draining_a_drained_node_succeeds_without_touching_it() -> None:
    script = ScriptedRunner((node("n3"), node_line("n3", "drained", "bad DIMM (operator)")))
    outcome = cli(script).drain("n3", REASON)
    assert outcome.status == "done"
    assert not outcome.changed
    assert outcome.detail == "node n3 already drained: bad DIMM (operator)"


def test_an_unknown_node_fails_with_the_reason() -> None:
    outcome = cli(ScriptedRunner((node("n9"), ok("")))).drain("n9", REASON)
    assert outcome.status == "failed"
    assert outcome.detail == "node n9 is not known to Slurm"


def test_transient_failures_are_retried_with_backoff() -> None:
    clock = FakeClock()
    down = err("slurm_update error: Unable to contact slurm controller (connect failure)")
    script = ScriptedRunner(
        (node("n3"), node_line("n3", "idle")),
        (DRAIN, down),
        (DRAIN, err("scontrol: timed out after 10 s", rc=124)),
        (DRAIN, ok()),
        (node("n3"), node_line("n3", "drained", REASON)),
    )
    outcome = cli(script, clock, backoff_s=0.2).drain("n3", REASON)
    assert outcome.status == "done"
    assert clock.sleeps == [0.2, 0.4]


def test_retries_end_in_a_failed_outcome_naming_the_attempts() -> None:
    down = err("Unable to contact slurm controller (connect failure)")
    script = ScriptedRunner(*[(node("n3"), down) for _ in range(3)])
    outcome = cli(script, retries=2).drain("n3", REASON)
    assert outcome.status == "failed"
    assert outcome.detail == (
        "sinfo: Unable to contact slurm controller (connect failure) (after 3 attempts)"
    )


def test_a_refusal_is_not_retried() -> None:
    script = ScriptedRunner(
        (node("n3"), node_line("n3", "idle")),
        (DRAIN, err("slurm_update error: Invalid user id")),
        (node("n3"), node_line("n3", "idle")),
    )
    outcome = cli(script).drain("n3", REASON)
    assert outcome.status == "failed"
    assert outcome.detail == "scontrol update: slurm_update error: Invalid user id"
    assert script.finished()


def test_a_drain_whose_command_failed_but_that_shows_in_slurm_is_done() -> None:
    script = ScriptedRunner(
        (node("n3"), node_line("n3", "allocated")),
        (DRAIN, err("scontrol: error: Unexpected message received")),
        (node("n3"), node_line("n3", "draining", REASON)),
        (node("n3"), node_line("n3", "draining", REASON)),
    )
    outcome = cli(script).drain("n3", REASON)
    assert outcome.status == "done"
    assert outcome.detail == (
        "node n3 draining, reason set (scontrol update said: scontrol: error: Unexpected "
        "message received)"
    )
    assert script.finished()


def test_a_hold_and_a_cancel_are_judged_by_what_slurm_shows() -> None:
    script = ScriptedRunner(
        (job(), job_line("PENDING")),
        (["scontrol", "hold", "42"], err("scontrol: error: Unexpected message received")),
        (job(), job_line("PENDING", priority=0)),
        (job(), job_line("PENDING", priority=0)),
        (job(), job_line("RUNNING")),
        (["scancel", "42"], err("scancel: error: Kill job error on job id 42")),
        (job(), job_line("RUNNING")),
    )
    s = cli(script)
    held = s.hold("42")
    assert (held.status, held.detail) == (
        "done",
        "job 42 held (PENDING) (scontrol hold said: scontrol: error: Unexpected message received)",
    )
    cancelled = s.cancel("42")
    assert (cancelled.status, cancelled.detail) == (
        "failed",
        "scancel 42: scancel: error: Kill job error on job id 42",
    )
    assert script.finished()


def test_an_effect_that_never_shows_fails_verification() -> None:
    clock = FakeClock()
    steps = [(node("n3"), node_line("n3", "idle")), (DRAIN, ok())]
    steps += [(node("n3"), node_line("n3", "idle")) for _ in range(6)]
    outcome = cli(ScriptedRunner(*steps), clock, verify_timeout_s=0.5, poll_s=0.1).drain(
        "n3", REASON
    )
    assert outcome.status == "failed"
    assert outcome.detail == "drain of n3 not seen within 0.5 s (state idle)"


def test_resume_is_idempotent() -> None:
    script = ScriptedRunner(
        (node("n3"), node_line("n3", "drained", REASON)),
        (["scontrol", "update", "nodename=n3", "state=resume"], ok()),
        (node("n3"), node_line("n3", "idle")),
        (node("n3"), node_line("n3", "idle")),
    )
    s = cli(script)
    assert s.resume("n3").detail == "node n3 idle"
    assert s.resume("n3").detail == "node n3 is idle, not drained"


def test_requeue_waits_for_pending_then_excludes_the_culprits_and_starts_now() -> None:
    script = ScriptedRunner(
        CLUSTER,
        (job(), job_line("RUNNING", allocated="n3")),
        (["scontrol", "show", "hostnames", "n3"], ok("n3\n")),
        (["scontrol", "requeue", "42"], ok()),
        (job(), job_line("COMPLETING", restarts=1)),
        (job(), job_line("PENDING", restarts=1)),
        (excluded(), ok("n7\n")),
        (["scontrol", "show", "hostnames", "n7"], ok("n7\n")),
        (
            ["scontrol", "update", "jobid=42", "ExcNodeList=n3,n4,n7", "StartTime=now"],
            ok(),
        ),
        (excluded(), ok("n[3-4],n7\n")),
        (["scontrol", "show", "hostnames", "n[3-4],n7"], ok("n3\nn4\nn7\n")),
    )
    outcome = cli(script, restart_now=True).requeue("42", ("n3", "n4"))
    assert outcome.status == "done"
    assert outcome.detail == "job 42 requeued (restarts 1), excluding n3, n4, n7"
    assert script.finished()


def test_a_job_that_may_land_on_a_node_it_ran_on_is_not_started_at_once() -> None:
    """Slurm kills a requeued job started before cred_expire on a node it ran on ("Job
    credential revoked", FAILED): restart_now only when the culprits were all its nodes."""
    script = ScriptedRunner(
        CLUSTER,
        (job(), job_line("RUNNING", allocated="n[3,5]")),
        (["scontrol", "show", "hostnames", "n[3,5]"], ok("n3\nn5\n")),
        (["scontrol", "requeue", "42"], ok()),
        (job(), job_line("PENDING", restarts=1)),
        (excluded(), ok("\n")),
        (["scontrol", "update", "jobid=42", "ExcNodeList=n3"], ok()),
        (excluded(), ok("n3\n")),
        (["scontrol", "show", "hostnames", "n3"], ok("n3\n")),
    )
    outcome = cli(script, restart_now=True).requeue("42", ("n3",))
    assert outcome.detail == (
        "job 42 requeued (restarts 1), excluding n3; it may run on n5 again, so it waits out "
        "Slurm's credential expiry"
    )
    assert script.finished()


def test_requeue_of_a_pending_job_only_moves_it_off_the_culprits() -> None:
    script = ScriptedRunner(
        CLUSTER,
        (job(), job_line("PENDING", restarts=1, required="n[2-3]")),
        (excluded(), ok("\n")),
        (["scontrol", "show", "hostnames", "n[2-3]"], ok("n2\nn3\n")),
        (["scontrol", "update", "jobid=42", "ExcNodeList=n3", "ReqNodeList="], ok()),
        (excluded(), ok("n3\n")),
        (["scontrol", "show", "hostnames", "n3"], ok("n3\n")),
    )
    outcome = cli(script).requeue("42", ("n3",))
    assert outcome.status == "done"
    assert not outcome.changed
    assert outcome.detail == "job 42 was already pending (restarts 1), excluding n3"


@pytest.mark.parametrize("state", ["CANCELLED", "COMPLETED", "TIMEOUT"])
def test_a_job_ended_on_purpose_is_not_brought_back(state: str) -> None:
    """Slurm requeues an ended job too (it runs again): one cancelled by its user after medic's
    detection (Slurm sources poll every few seconds) must stay ended."""
    script = ScriptedRunner(CLUSTER, (job(), job_line(state)))
    outcome = cli(script).requeue("42", ("n3",))
    assert (outcome.status, outcome.changed) == ("done", False)
    assert outcome.detail == f"job 42 ended on purpose ({state}): not requeued"
    assert script.finished()


def test_a_failed_job_is_requeued() -> None:
    script = ScriptedRunner(
        (job(), job_line("FAILED")),
        (["scontrol", "requeue", "42"], ok()),
        (job(), job_line("PENDING", restarts=1)),
        (excluded(), ok("\n")),
    )
    outcome = cli(script).requeue("42", ())
    assert outcome.detail == "job 42 requeued (restarts 1)"
    assert script.finished()


def test_requeue_of_a_job_slurm_forgot_fails() -> None:
    script = ScriptedRunner((job("99"), err("slurm_load_jobs error: Invalid job id specified")))
    outcome = cli(script).requeue("99", ())
    assert outcome.detail == "job 99 is not known to Slurm"


def test_requeue_refused_by_slurm() -> None:
    script = ScriptedRunner(
        (job(), job_line("RUNNING")),
        (
            ["scontrol", "requeue", "42"],
            err("Requested operation is presently disabled for job 42"),
        ),
        (job(), job_line("RUNNING")),
    )
    outcome = cli(script).requeue("42", ())
    assert outcome.status == "failed"
    assert "presently disabled" in outcome.detail
    assert script.finished()


def test_a_requeue_whose_command_failed_but_happened_is_done() -> None:
    """The outcome is what Slurm shows afterwards: the restart count went up."""
    script = ScriptedRunner(
        CLUSTER,
        (job(), job_line("RUNNING", restarts=2, allocated="n3")),
        (["scontrol", "show", "hostnames", "n3"], ok("n3\n")),
        (["scontrol", "requeue", "42"], err("Invalid node name specified")),
        (job(), job_line("PENDING", restarts=3)),
        (job(), job_line("PENDING", restarts=3)),
        (excluded(), ok("\n")),
        (["scontrol", "update", "jobid=42", "ExcNodeList=n3"], ok()),
        (excluded(), ok("n3\n")),
        (["scontrol", "show", "hostnames", "n3"], ok("n3\n")),
    )
    outcome = cli(script).requeue("42", ("n3",))
    assert outcome.status == "done"
    assert outcome.detail == (
        "job 42 requeued (restarts 3), excluding n3 "
        "(scontrol requeue said: Invalid node name specified)"
    )
    assert script.finished()


def test_a_requeue_without_its_exclusion_is_partial() -> None:
    script = ScriptedRunner(
        CLUSTER,
        (job(), job_line("RUNNING", restarts=2, allocated="n3")),
        (["scontrol", "show", "hostnames", "n3"], ok("n3\n")),
        (["scontrol", "requeue", "42"], ok()),
        (job(), job_line("PENDING", restarts=3)),
        (excluded(), ok("\n")),
        (["scontrol", "update", "jobid=42", "ExcNodeList=n3"], err("Job is no longer pending")),
        (excluded(), ok("\n")),
    )
    outcome = cli(script).requeue("42", ("n3",))
    assert outcome.status == "partial"
    assert outcome.ok
    assert outcome.detail == (
        "job 42 requeued (restarts 3), but not excluded from n3 "
        "(scontrol update: Job is no longer pending)"
    )
    assert script.finished()


def test_a_requeue_already_seen_in_slurm_is_not_issued_again() -> None:
    """After a restart, a requeue planned when the job had restarted twice, and whose restart
    count is now 3, happened: only its exclusion is made sure of."""
    script = ScriptedRunner(
        CLUSTER,
        (job(), job_line("PENDING", restarts=3)),
        (excluded(), ok("n3\n")),
        (["scontrol", "show", "hostnames", "n3"], ok("n3\n")),
    )
    outcome = cli(script).requeue("42", ("n3",), since_restarts=2)
    assert outcome.status == "done"
    assert outcome.detail == "job 42 requeued (restarts 3), excluding n3"
    assert script.finished()


def test_a_requeue_naming_a_node_slurm_does_not_know_is_refused_before_anything_runs() -> None:
    script = ScriptedRunner(CLUSTER)
    outcome = cli(script).requeue("42", ("vm",))
    assert outcome.status == "failed"
    assert outcome.detail == "node vm is not known to Slurm: requeue of job 42 refused, nothing run"
    assert script.finished()


def test_hold_and_release_verify_the_priority() -> None:
    script = ScriptedRunner(
        (job(), job_line("PENDING", priority=100)),
        (["scontrol", "hold", "42"], ok()),
        (job(), job_line("PENDING", priority=0)),
        (job(), job_line("PENDING", priority=0)),
        (job(), job_line("PENDING", priority=0)),
        (["scontrol", "release", "42"], ok()),
        (job(), job_line("PENDING", priority=90)),
    )
    s = cli(script)
    assert s.hold("42").detail == "job 42 held (PENDING)"
    again = s.hold("42")
    assert (again.detail, again.changed) == ("job 42 already held (PENDING)", False)
    assert s.release("42").detail == "job 42 released (PENDING)"


def test_cancel_is_idempotent_for_ended_jobs() -> None:
    script = ScriptedRunner(
        (job(), job_line("RUNNING")),
        (["scancel", "42"], ok()),
        (job(), job_line("CANCELLED")),
        (job(), job_line("COMPLETED")),
    )
    s = cli(script)
    assert s.cancel("42").detail == "job 42 cancelled"
    assert s.cancel("42").detail == "job 42 already ended (COMPLETED)"


def test_garbage_from_squeue_is_a_failed_outcome() -> None:
    outcome = cli(ScriptedRunner((job(), ok("what is this\n")))).cancel("42")
    assert outcome.status == "failed"
    assert outcome.detail == "squeue: unexpected output 'what is this'"


def test_job_facts_node_count_and_drained_nodes() -> None:
    script = ScriptedRunner(
        (job(), job_line("RUNNING")),
        (["sinfo", "-h", "-N", "-o", "%N"], ok("n1\nn2\nn2\nn3\n")),
        (["sinfo", "-h", "-N", "-t", "drain", "-o", "%N|%E"], ok("n2|medic: x|y\n")),
    )
    s = cli(script)
    facts = s.job("42")
    assert facts is not None
    assert (facts.partition, facts.user, facts.state) == ("gpu", "alice", "RUNNING")
    assert s.node_count() == 3
    assert s.node_count() == 3  # cached: no second sinfo
    assert s.drained_nodes() == {"n2": "medic: x|y"}


def test_run_command_turns_timeouts_and_missing_programs_into_results() -> None:
    assert run_command(["true"], 5).returncode == 0
    missing = run_command(["/nonexistent/scontrol"], 5)
    assert missing.returncode == 127
    slow = run_command(["sleep", "5"], 0.1)
    assert slow.returncode == 124
    assert slow.message == "sleep: timed out after 0.1 s"


@pytest.mark.parametrize("state", ["drained", "draining", "drng", "drained*"])
def test_drained_states(state: str) -> None:
    script = ScriptedRunner((node("n3"), node_line("n3", state, "x")))
    assert not cli(script).drain("n3", REASON).changed
