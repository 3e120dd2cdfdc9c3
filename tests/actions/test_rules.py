from typing import Any

from medic.actions.config import load_rules
from medic.actions.model import Intent, JobFacts
from medic.actions.rules import RuleSet
from medic.detectors.base import Detection


def rules(*routes: dict[str, Any]) -> RuleSet:
    return RuleSet(load_rules({"routes": list(routes)}))


def detection(
    kind: str = "gpu_fault",
    job: str | None = "42",
    culprits: tuple[str, ...] = ("n3",),
    score: float = 1.0,
) -> Detection:
    return Detection(job, kind, tuple(culprits), score=score, detector="t")


def test_default_routes_drain_culprits_then_requeue_excluding_them() -> None:
    match = RuleSet(load_rules()).match(detection(culprits=("n4", "n3")))
    assert match.intents == (
        Intent("drain", "hardware-fault", node="n3", job_id="42"),
        Intent("drain", "hardware-fault", node="n4", job_id="42"),
        Intent("requeue", "hardware-fault", job_id="42", exclude=("n3", "n4")),
    )
    assert match.verdicts[0].matched
    assert "hardware-fault decided" in match.verdicts[1].why


def test_default_routes_restart_a_hang_with_only_stuck_ranks_and_drain_nothing() -> None:
    # The hang detector's answer when nothing points at a node: the stuck ranks, no culprit.
    for score in (0.5, 0.8):
        hang = Detection("42", "hang", (), ranks=(13,), score=score, detector="hang")
        match = RuleSet(load_rules()).match(hang)
        assert match.intents == (Intent("requeue", "unattributed-hang", job_id="42"),)


def test_every_route_says_why_it_did_not_match() -> None:
    ruleset = rules(
        {"name": "kinds", "kinds": ["hang"], "actions": ["requeue"]},
        {"name": "blamed", "culprits": False, "actions": ["requeue"]},
        {"name": "sure", "min_score": 0.9, "actions": ["requeue"]},
        {"name": "listed", "jobs": ["7"], "actions": ["requeue"]},
        {"name": "denied", "jobs_deny": ["42"], "actions": ["requeue"]},
    )
    match = ruleset.match(detection(score=0.5))
    assert [v.why for v in match.verdicts] == [
        "kind gpu_fault not in hang",
        "the detection blames n3",
        "score 0.5 below min_score 0.9",
        "job 42 not in jobs",
        "job 42 is in jobs_deny",
    ]
    assert match.intents == ()


def test_array_tasks_match_their_array_id() -> None:
    ruleset = rules({"name": "array", "jobs": ["4242"], "actions": ["hold"]})
    assert ruleset.match(detection(job="4242_7")).intents[0].job_id == "4242_7"
    assert not ruleset.match(detection(job="42427")).intents


def test_partition_and_user_filters_need_the_facts_and_never_pass_unknowns() -> None:
    ruleset = rules(
        {"name": "gpu-only", "partitions": ["gpu"], "users_deny": ["bob"], "actions": ["hold"]}
    )
    assert ruleset.needs_job_facts
    unknown = ruleset.match(detection(), None)
    assert unknown.verdicts[0].why == "partition unknown (the route filters on it)"
    other = ruleset.match(detection(), JobFacts("42", "cpu", "alice"))
    assert other.verdicts[0].why == "partition cpu not in gpu"
    denied = ruleset.match(detection(), JobFacts("42", "gpu", "bob"))
    assert denied.verdicts[0].why == "user bob is denied"
    allowed = ruleset.match(detection(), JobFacts("42", "gpu", "alice"))
    assert [i.action for i in allowed.intents] == ["hold"]


def test_continue_matching_collects_actions_once_in_execution_order() -> None:
    config = load_rules(
        {
            "receivers": [{"name": "pager", "url": "http://127.0.0.1:9/hook"}],
            "routes": [
                {"name": "notify-all", "notify": ["pager"], "continue_matching": True},
                {"name": "replace", "actions": ["requeue", "drain"], "continue_matching": True},
                {"name": "again", "actions": ["requeue"]},
                {"name": "never", "actions": ["cancel"]},
            ],
        }
    )
    match = RuleSet(config).match(detection())
    assert [(i.action, i.route) for i in match.intents] == [
        ("drain", "replace"),
        ("requeue", "replace"),
        ("notify", "notify-all"),
    ]
    assert [v.matched for v in match.verdicts] == [True, True, True, False]
    assert match.verdicts[3].why == "route again decided"


def test_a_drain_route_on_a_detection_without_culprits_yields_an_unblamed_drain() -> None:
    ruleset = rules({"name": "any", "actions": ["drain"]})
    match = ruleset.match(detection(culprits=()))
    assert match.intents == (Intent("drain", "any", node=None, job_id="42"),)


def test_default_routes_act_on_confirmed_detections_only() -> None:
    # A suspect (silence alone) is logged and notified, never acted on by the shipped routes.
    rule_set = RuleSet(load_rules())
    for culprits in ((), ("n3",)):
        hang = Detection("42", "hang", culprits, score=0.9, detector="hang", tier="suspect")
        match = rule_set.match(hang)
        assert match.intents == ()
        assert any("tier suspect not in confirmed" in v.why for v in match.verdicts)
        confirmed = rule_set.match(Detection("42", "hang", culprits, detector="hang"))
        assert confirmed.intents


def test_a_route_matches_the_tiers_it_names() -> None:
    notify = {"name": "suspects", "tiers": ["suspect"], "actions": ["hold"]}
    rule_set = rules(notify)
    suspect = Detection("42", "hang", (), detector="hang", tier="suspect")
    assert rule_set.match(suspect).intents == (Intent("hold", "suspects", job_id="42"),)
    assert rule_set.match(Detection("42", "hang", (), detector="hang")).intents == ()


def test_an_unknown_tier_is_refused_naming_the_route() -> None:
    import pytest

    from medic.config import ConfigError

    with pytest.raises(ConfigError, match="unknown tier 'maybe'"):
        rules({"name": "x", "tiers": ["maybe"], "actions": ["hold"]})
