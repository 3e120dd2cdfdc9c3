from medic.detectors.jobs import JobTracker
from medic.testing.builders import at, batch, log


def test_tracks_state_nodes_ranks_and_reports_end_once() -> None:
    tracker = JobTracker()
    sched = batch(
        "scheduler",
        [{"time": at(0), "kind": "job", "job_id": "7", "state": "RUNNING", "nodes": ["a", "b"]}],
    )
    assert tracker.observe(sched) == []
    logs = batch(
        "logs",
        [log(1, "[rank9]: boom", node="b", job_id="7"), log(2, "x", node="a", job_id="7", rank=0)],
    )
    tracker.observe(logs)
    info = tracker.jobs["7"]
    assert info.nodes == ("a", "b")
    assert info.rank_nodes == {9: "b", 0: "a"}
    assert info.last_seen == {"b": at(1), "a": at(2)}
    assert tracker.jobs_on("b") == ["7"]
    end = batch(
        "scheduler",
        [
            {"time": at(5), "kind": "job", "job_id": "7", "state": "FAILED", "exit_code": 1},
            {"time": at(6), "kind": "job", "job_id": "7", "state": "FAILED", "exit_code": 1},
        ],
    )
    assert tracker.observe(end) == ["7"]
    assert tracker.jobs["7"].exit_code == 1
    assert tracker.jobs_on("b") == []


def test_a_requeued_job_waiting_in_the_queue_holds_none_of_its_old_nodes() -> None:
    """Slurm lists a requeued, pending job with the nodes of its last attempt: evidence on
    those nodes is not the job's until it runs (or writes) again."""
    tracker = JobTracker()

    def state(t: float, state: str, nodes: list[str] | None = None) -> None:
        row = {"time": at(t), "kind": "job", "job_id": "7", "state": state, "nodes": nodes}
        tracker.observe(batch("scheduler", [row]))

    state(0, "RUNNING", ["a"])
    tracker.observe(batch("logs", [log(1, "[rank0]: step 1", node="a", job_id="7")]))
    state(5, "PENDING", ["a"])
    assert tracker.jobs_on("a") == []
    tracker.observe(batch("logs", [log(6, "[rank0]: step 1", node="a", job_id="7")]))
    assert tracker.jobs_on("a") == ["7"], "its lines say it runs before the next poll does"
    state(7, "PENDING")
    state(10, "RUNNING", ["b"])
    assert (tracker.jobs_on("a"), tracker.jobs_on("b")) == ([], ["7"])
