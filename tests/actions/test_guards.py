from typing import Any

from medic.actions.config import GuardConfig
from medic.actions.guards import Guards, Verdict
from medic.actions.model import Intent, JobFacts
from medic.detectors.base import Detection
from medic.testing.builders import at


def guards(mode: str = "enforce", window_s: float = 600, **config: Any) -> Guards:
    return Guards(GuardConfig(**config), mode, window_s)  # type: ignore[arg-type]


def fault(job: str | None = "42", *culprits: str, onset: int | None = None) -> Detection:
    return Detection(job, "gpu_fault", culprits or ("n3",), detector="t", onset=onset)


def drain(node: str | None = "n3", job: str | None = "42") -> Intent:
    return Intent("drain", "r", node=node, job_id=job)


def requeue(job: str | None = "42") -> Intent:
    return Intent("requeue", "r", job_id=job, exclude=("n3",))


def stops(verdicts: list[Verdict]) -> list[str | None]:
    return [v.guard for v in verdicts]


def test_monitor_mode_stops_every_slurm_action_but_not_notifications() -> None:
    g = guards("monitor", cluster_nodes=100)
    notify = Intent("notify", "r", job_id="42", receiver="pager")
    verdicts = g.review(fault(), [drain(), requeue(), notify], None, at(0))
    assert stops(verdicts) == ["monitor", "monitor", None]
    assert verdicts[0].reason == "monitor mode: enforce mode would run it"


def test_monitor_mode_counts_what_enforce_would_have_done() -> None:
    g = guards("monitor", cluster_nodes=100)
    g.review(fault("1"), [drain()], None, at(0))
    later = g.review(fault("2"), [drain()], None, at(10))
    assert stops(later) == ["node_cooldown"]


def test_never_drains_a_node_no_detection_blamed() -> None:
    g = guards(cluster_nodes=100)
    verdicts = g.review(fault("42", "n3"), [drain(None), drain("n9")], None, at(0))
    assert stops(verdicts) == ["unblamed", "unblamed"]
    assert "never drains an unblamed node" in verdicts[0].reason


def test_job_actions_need_a_job() -> None:
    verdicts = guards().review(fault(None), [requeue(None)], None, at(0))
    assert stops(verdicts) == ["no_job"]


def test_partition_allow_list_fails_safe_on_an_unknown_partition() -> None:
    g = guards(partitions=("gpu",), cluster_nodes=100)
    assert stops(g.review(fault("1"), [requeue("1")], None, at(0))) == ["partition"]
    cpu = JobFacts("2", "cpu", "alice")
    verdicts = g.review(fault("2"), [requeue("2")], cpu, at(0))
    assert verdicts[0].reason == "partition cpu is not in the allow-list (gpu)"
    gpu = JobFacts("3", "gpu", "alice")
    assert stops(g.review(fault("3"), [requeue("3")], gpu, at(0))) == [None]


def test_one_action_per_incident_until_the_window_after_its_last_detection_ends() -> None:
    g = guards(window_s=600, cluster_nodes=100, node_cooldown_s=0)
    assert stops(g.review(fault(), [requeue()], None, at(0))) == [None]
    again = g.review(fault(), [requeue()], None, at(300))
    assert stops(again) == ["incident"]
    assert again[0].reason == "job 42 already got requeue in this incident"
    assert stops(g.review(fault(), [requeue()], None, at(901))) == [None]


def test_a_detection_whose_onset_follows_medics_requeue_is_a_new_incident() -> None:
    g = guards(cluster_nodes=100)
    g.review(fault(), [requeue()], None, at(0))
    old_attempt = g.review(fault(onset=at(-5)), [requeue()], None, at(5))
    assert stops(old_attempt) == ["incident"]
    new_attempt = g.review(fault("42", "n5", onset=at(120)), [requeue()], None, at(130))
    assert stops(new_attempt) == [None]


def test_node_cooldown_in_event_time() -> None:
    g = guards(node_cooldown_s=600, cluster_nodes=100)
    g.review(fault("1"), [drain()], None, at(0))
    verdicts = g.review(fault("2"), [drain()], None, at(599))
    assert stops(verdicts) == ["node_cooldown"]
    assert verdicts[0].reason == "node n3 was acted on 599 s ago (node_cooldown_s = 600)"
    assert stops(g.review(fault("3"), [drain()], None, at(600))) == [None]


def test_drain_budget_caps_the_drained_fraction_on_a_large_cluster() -> None:
    g = guards(max_drained_nodes=1, max_drained_fraction=0.1, node_cooldown_s=0)
    nodes = [f"n{i}" for i in range(5)]
    verdicts = [
        g.review(fault(str(i), node), [drain(node, str(i))], None, at(i), cluster_nodes=20)[0]
        for i, node in enumerate(nodes)
    ]
    assert stops(verdicts) == [None, None] + ["drained_fraction"] * 3
    assert verdicts[2].reason == (
        "draining n2 would leave 3 nodes drained by medic, over the budget of 2 for 20 nodes "
        "(max_drained_nodes = 1, max_drained_fraction = 0.1)"
    )


def test_a_small_cluster_may_still_lose_the_absolute_count_of_nodes() -> None:
    g = guards(max_drained_nodes=1, max_drained_fraction=0.1, node_cooldown_s=0)
    first = g.review(fault("1", "n1"), [drain("n1", "1")], None, at(0), cluster_nodes=4)
    second = g.review(fault("2", "n2"), [drain("n2", "2")], None, at(1), cluster_nodes=4)
    assert stops(first + second) == [None, "drained_fraction"]
    assert g.drain_budget(4) == 1
    assert g.drain_budget(100) == 10


def test_drain_budget_follows_slurm_and_holds_without_a_cluster_size() -> None:
    g = guards(max_drained_nodes=1, max_drained_fraction=0.1)
    assert stops(g.review(fault(), [drain()], None, at(0))) == [None]
    g.sync_drained({"n1", "n2"})
    assert stops(g.review(fault("7", "n4"), [drain("n4", "7")], None, at(1), 20)) == [
        "drained_fraction"
    ]
    g.sync_drained({"n1"})
    assert stops(g.review(fault("8", "n5"), [drain("n5", "8")], None, at(2), 20)) == [None]


def test_monitor_mode_says_what_enforce_would_do_without_a_cluster_size() -> None:
    g = guards("monitor", max_drained_nodes=1, node_cooldown_s=0)
    first = g.review(fault("1", "n1"), [drain("n1", "1")], None, at(0))
    second = g.review(fault("2", "n2"), [drain("n2", "2")], None, at(1))
    assert stops(first + second) == ["monitor", "drained_fraction"]
    assert "for a cluster of unknown size" in second[0].reason


def test_an_upgrade_in_one_pipeline_incident_drains_but_does_not_requeue_again() -> None:
    g = guards(cluster_nodes=100)
    crash = Detection("42", "hang", (), detector="t", incident="i1")
    assert stops(g.review(crash, [requeue()], None, at(0))) == [None]
    xid = Detection("42", "gpu_fault", ("n3",), detector="t", incident="i1", onset=at(-2))
    assert stops(g.review(xid, [drain(), requeue()], None, at(20))) == [None, "incident"]
    other = Detection("42", "gpu_fault", ("n3",), detector="t", incident="i2", onset=at(-2))
    assert stops(g.review(other, [requeue()], None, at(30))) == [None]


def test_a_requeue_restored_from_the_history_counts() -> None:
    g = guards(cluster_nodes=100, max_restarts_per_job=1)
    g.restore_requeue("i1", "42", at(0))
    same = Detection("42", "gpu_fault", ("n3",), detector="t", incident="i1", onset=at(-1))
    verdicts = g.review(same, [requeue()], None, at(5))
    assert stops(verdicts) == ["incident"]
    later = Detection("42", "gpu_fault", ("n5",), detector="t", incident="i1", onset=at(30))
    assert stops(g.review(later, [requeue()], None, at(40))) == ["restart_budget"]


def test_drains_per_hour_slides_with_event_time() -> None:
    g = guards(max_drains_per_hour=2, cluster_nodes=1000)
    for i in range(2):
        g.review(fault(str(i), f"n{i}"), [drain(f"n{i}", str(i))], None, at(i))
    third = g.review(fault("9", "n9"), [drain("n9", "9")], None, at(100))
    assert stops(third) == ["drains_per_hour"]
    assert third[0].reason == "2 drains in the last hour (max_drains_per_hour = 2)"
    assert stops(g.review(fault("9", "n9"), [drain("n9", "9")], None, at(3600))) == [None]


def test_restart_budget_per_job() -> None:
    g = guards(window_s=0, max_restarts_per_job=2, restart_window_s=3600)
    results = [stops(g.review(fault(), [requeue()], None, at(60 * i)))[0] for i in range(4)]
    assert results == [None, None, "restart_budget", "restart_budget"]
    assert stops(g.review(fault(), [requeue()], None, at(3600))) == [None]


def test_state_is_freed_when_windows_end() -> None:
    g = guards(cluster_nodes=1000)
    for i in range(50):
        g.review(fault(str(i), f"n{i}"), [drain(f"n{i}", str(i)), requeue(str(i))], None, at(i))
    assert g.state_size() > 0
    g.review(fault("x", "nx"), [], None, at(10 * 86_400))
    assert g.state_size() == 1  # only the incident just opened
