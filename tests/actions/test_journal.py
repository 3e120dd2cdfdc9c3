import json
import subprocess
import sys
from pathlib import Path

import pytest

from medic.actions.config import load_rules
from medic.actions.journal import Journal, Step, step_key
from medic.actions.model import done
from medic.actions.stage import ActionStage
from medic.detectors.base import Detection
from medic.testing.builders import at
from medic.testing.slurm import FakeSlurm

NODES = [f"n{i}" for i in range(10)]


def plan(journal: Journal, t: float, incident: str = "i1") -> Step:
    step = Step(step_key(incident, "drain", "node n3"), "drain", "node n3", "r", node="n3")
    journal.plan(at(t), incident, {"id": "d"}, "gpu_fault of job 42", [step])
    return step


def test_a_planned_key_is_claimed_across_a_restart_and_bad_lines_are_skipped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    step = plan(Journal(path), 0)
    with path.open("a") as file:
        file.write('not json\n{"op": "issued", "decision": "nope", "step": 0, "time": 1}\n')
    reopened = Journal(path)
    assert reopened.planned_by(step.key) is not None
    assert reopened.skipped_lines == 2
    assert [e.unverified for e in reopened.unfinished()] == [[0]]


def test_lines_are_readable_records_of_incident_action_target_and_job(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    step = Step("i1 requeue job 42", "requeue", "job 42", "r", job_id="42", exclude=("n3",))
    entry = journal.plan(at(0), "i1", {"id": "d"}, "gpu_fault", [step])
    journal.issued(entry, 0, at(1))
    journal.verified(entry, 0, done("job 42 requeued"), at(2))
    journal.close(entry, at(2))
    first, *rest = (json.loads(line) for line in path.read_text().splitlines())
    assert first["op"] == "plan"
    assert first["incident"] == "i1"
    assert first["steps"][0] | {"restarts": None} == {
        "key": "i1 requeue job 42",
        "action": "requeue",
        "target": "job 42",
        "route": "r",
        "node": None,
        "job_id": "42",
        "receiver": None,
        "exclude": ["n3"],
        "reason": None,
        "restarts": None,
    }
    assert [(r["op"], r.get("status")) for r in rest] == [
        ("issued", None),
        ("verified", "done"),
        ("closed", None),
    ]
    assert Journal(path).unfinished() == []


def test_closed_decisions_past_the_retention_are_dropped_and_compacted(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path, retention_s=10)
    for t in range(3):
        entry = journal.entries[journal.planned_by(plan(journal, t, f"i{t}").key) or ""]
        journal.close(entry, at(t))
    plan(journal, 30, "open")  # drops the three closed ones, which are 30 s old
    assert len(journal) == 1
    journal.compact()
    assert [json.loads(line)["incident"] for line in path.read_text().splitlines()] == ["open"]
    assert len(Journal(path)) == 1


def test_an_unfinished_decision_is_never_dropped() -> None:
    journal = Journal(retention_s=10)
    plan(journal, 0)
    plan(journal, 100, "i2")
    assert len(journal) == 2


def test_the_kill_hook_ends_the_process_right_after_the_nth_line(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    code = (
        "import sys; from pathlib import Path; from medic.actions.journal import Journal, Step\n"
        f"j = Journal.for_service(Path({str(path)!r}))\n"
        "for i in range(5):\n"
        "    j.plan(i, f'i{i}', {}, '', [Step(f'k{i}', 'drain', 'node n1', 'r')])\n"
    )
    env = {"MEDIC_JOURNAL_KILL_AFTER": "2", "PYTHONPATH": str(Path.cwd())}
    proc = subprocess.run([sys.executable, "-c", code], env=env, check=False)
    assert proc.returncode == 137
    assert len(path.read_text().splitlines()) == 2


class Killed(Exception):
    pass


def fault() -> Detection:
    return Detection("42", "gpu_fault", ("n3",), score=0.9, detector="xid", detected_at=at(0))


def enforce(slurm: FakeSlurm, journal: Journal) -> ActionStage:
    return ActionStage(load_rules({"mode": "enforce"}), slurm, journal=journal)


@pytest.mark.parametrize("kill_after", range(1, 7))
def test_a_decision_cut_at_any_line_is_finished_once_after_a_restart(
    tmp_path: Path, kill_after: int
) -> None:
    """Drain then requeue, the service killed after each journal line: the restarted stage
    drains the node and requeues the job, with its exclusion, exactly once."""
    path = tmp_path / "journal.jsonl"
    slurm = FakeSlurm(NODES, jobs=["42"])
    journal = Journal(path, kill_after=kill_after)

    def kill(code: int) -> None:
        raise Killed

    journal.exit = kill  # type: ignore[method-assign]
    with pytest.raises(Killed):
        enforce(slurm, journal).handle([fault()], at(0))

    restarted = enforce(slurm, Journal(path))
    restarted.resume(at(5))
    restarted.handle([fault()], at(6))  # the same detection again: nothing more
    assert slurm.drained.keys() == {"n3"}
    assert slurm.commands == {("drain", "n3"): 1, ("requeue", "42"): 1}
    assert slurm.jobs["42"].excluded == {"n3"}
    rows = restarted.actions_table().to_pylist()
    resumed = [(r["action"], r["status"]) for r in rows if r["guard"] is None]
    assert resumed == ([] if kill_after == 6 else [("drain", "done"), ("requeue", "done")])
    assert Journal(path).unfinished() == []


def test_a_notification_cut_after_it_was_issued_is_not_sent_again(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    step = Step("i1 notify receiver ops", "notify", "receiver ops", "r", receiver="ops")
    entry = journal.plan(at(0), "i1", {"id": "d"}, "gpu_fault", [step])
    journal.issued(entry, 0, at(0))
    sent: list[str] = []

    class Notifier:
        def notify(self, receiver: str, payload: dict[str, object]) -> object:
            sent.append(receiver)
            return done("sent")

    stage = ActionStage(
        load_rules({"mode": "enforce"}),
        FakeSlurm(NODES),
        notifier=Notifier(),  # type: ignore[arg-type]
        journal=Journal(path),
    )
    stage.resume(at(1))
    assert sent == []
    [row] = stage.actions_table().to_pylist()
    assert row["status"] == "failed"
    assert row["reason"].endswith("interrupted while sending: not sent again")


def test_medic_actions_shows_each_decision_and_how_far_its_steps_got(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from medic.cli import main

    path = tmp_path / "journal.jsonl"
    slurm = FakeSlurm(NODES, jobs=["42"])
    journal = Journal(path, kill_after=3)

    def kill(code: int) -> None:
        raise Killed

    journal.exit = kill  # type: ignore[method-assign]
    with pytest.raises(Killed):
        enforce(slurm, journal).handle([fault()], at(0))
    result = CliRunner().invoke(main, ["actions", "--journal", str(path), "--unfinished"])
    assert result.exit_code == 0, result.output
    head, drain, requeue = result.output.splitlines()
    assert "UNFINISHED" in head
    assert head.endswith(
        f"incident job:42, detection {fault().id}: gpu_fault of job 42, on n3, score 0.9"
    )
    assert drain == "    drain node n3 (job 42)  done: node n3 draining, reason set"
    assert requeue == "    requeue job 42  planned"
    enforce(slurm, Journal(path)).resume(at(5))
    result = CliRunner().invoke(main, ["actions", "--journal", str(path), "--unfinished"])
    assert result.output == "no unfinished decisions\n"
    result = CliRunner().invoke(main, ["actions", "--journal", str(path)])
    assert "finished" in result.output
    assert "requeue job 42  done: job 42 requeued (restarts 1), excluding n3" in result.output


def test_a_decision_is_resumed_once_slurm_answers_again(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    slurm = FakeSlurm(NODES, jobs=["42"])
    journal = Journal(path, kill_after=1)

    def kill(code: int) -> None:
        raise Killed

    journal.exit = kill  # type: ignore[method-assign]
    with pytest.raises(Killed):
        enforce(slurm, journal).handle([fault()], at(0))
    slurm.up = False
    restarted = enforce(slurm, Journal(path))
    restarted.resume(at(5))
    assert len(restarted.journal.unfinished()) == 1
    assert restarted.actions_table().num_rows == 0
    slurm.up = True
    restarted.resume(at(10))
    assert restarted.journal.unfinished() == []
    assert slurm.commands == {("drain", "n3"): 1, ("requeue", "42"): 1}
