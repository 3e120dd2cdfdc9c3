"""Every kind of receiver against a real HTTP server on 127.0.0.1: its format, grouping per
incident, rate limits, retries, secrets, and exactly one delivery per incident group across a
service restart."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from medic.actions.config import load_rules
from medic.actions.node_journal import NodeEvent
from medic.actions.notifiers import Alert, Notifiers, ReceiverConfig
from medic.actions.notifiers.formats import detection_alert
from medic.actions.recorder import RecordingExecutor
from medic.actions.recovery import Recovery
from medic.actions.stage import ActionStage
from medic.config import ConfigError
from medic.detectors.base import Detection
from medic.testing.builders import at
from medic.testing.clock import FakeClock
from tests.actions.notifiers.server import HookServer, serve

KINDS = ("webhook", "slack", "pagerduty", "alertmanager")


@pytest.fixture
def hooks() -> Iterator[HookServer]:
    yield from serve()


def receiver(hooks: HookServer, kind: str = "webhook", **extra: Any) -> ReceiverConfig:
    settings: dict[str, Any] = {"url": hooks.url(f"/{kind}"), **extra}
    if kind == "pagerduty" and "token_env" not in extra:
        settings["token_env"] = "MEDIC_TEST_ROUTING_KEY"
    return ReceiverConfig(name="oncall", kind=kind, **settings)  # type: ignore[arg-type]


def notifiers(config: ReceiverConfig, state: Path | None = None, **kw: Any) -> Notifiers:
    return Notifiers([config], state=state, sleep=lambda _: None, **kw)


def payload(job_id: str = "42", t: float = 0, kind: str = "gpu_fault") -> dict[str, Any]:
    detection = Detection(job_id, kind, ("n3",), score=0.9, detector="xid", detected_at=at(t))
    return {
        "detection": {**detection.row(), "id": detection.id},
        "mode": "enforce",
        "decisions": [{"action": "drain", "node": "n3", "job_id": job_id, "status": "done"}],
        "text": f"medic: {kind} of job {job_id} on n3",
    }


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_posts_its_format(
    kind: str, hooks: HookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDIC_TEST_ROUTING_KEY", "R0UTING")
    outcome = notifiers(receiver(hooks, kind)).notify("oncall", payload())
    assert outcome.status == "done", outcome.detail
    [got] = hooks.received
    assert got.path == f"/{kind}"
    body = got.body
    if kind == "webhook":
        assert body["detection"]["job_id"] == "42" and body["group"] == "job:42"
        assert body["decisions"][0]["action"] == "drain"
    elif kind == "slack":
        assert set(body) == {"text"} and "medic: gpu_fault of job 42 on n3" in body["text"]
    elif kind == "pagerduty":
        assert body["routing_key"] == "R0UTING" and body["event_action"] == "trigger"
        assert body["dedup_key"] == "medic/job:42"
        assert body["payload"]["severity"] == "critical"
        assert body["payload"]["source"] == "n3"
        assert body["payload"]["timestamp"] == "2026-03-01T10:00:00Z"
    else:
        assert body["version"] == "4" and body["status"] == "firing"
        [alert] = body["alerts"]
        assert alert["labels"]["alertname"] == "medic_gpu_fault"
        assert alert["labels"]["job_id"] == "42" and alert["endsAt"] == "0001-01-01T00:00:00Z"
        assert body["groupKey"] == '{}:{group="job:42"}'


def test_one_incident_group_is_notified_once_and_a_new_one_again(hooks: HookServer) -> None:
    hub = notifiers(receiver(hooks))
    hub.notify("oncall", payload("42", 0))
    folded = hub.notify("oncall", payload("42", 60, kind="crash"))
    hub.notify("oncall", payload("43", 61))
    hub.notify("oncall", payload("42", 60 + 3601))
    assert [r.body["group"] for r in hooks.received] == ["job:42", "job:43", "job:42"]
    assert (folded.status, folded.changed) == ("done", False)


def group_of(kind: str, body: dict[str, Any]) -> str:
    """The job a body of this kind is about."""
    if kind == "slack":
        return body["text"].split("of job ")[1].split()[0].rstrip(",")
    if kind == "pagerduty":
        return str(body["dedup_key"]).removeprefix("medic/job:")
    if kind == "alertmanager":
        return str(body["groupLabels"]["group"]).removeprefix("job:")
    return str(body["group"]).removeprefix("job:")


@pytest.mark.parametrize("kind", KINDS)
def test_exactly_once_per_group_across_a_restart(
    kind: str, hooks: HookServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDIC_TEST_ROUTING_KEY", "R0UTING")
    state = tmp_path / "notifications.jsonl"
    config = receiver(hooks, kind, retries=0)
    notifiers(config, state).notify("oncall", payload("42", 0))
    hooks.answers = [503]
    before_restart = notifiers(config, state)
    before_restart.notify("oncall", payload("42", 30))
    assert before_restart.notify("oncall", payload("43", 31)).status == "failed"
    # the service restarts: the new instance reads the state, redelivers the pending group once
    restarted = notifiers(config, state)
    restarted.notify("oncall", payload("42", 90))
    restarted.notify("oncall", payload("43", 91))
    restarted.flush()
    restarted.flush()
    notifiers(config, state).flush()
    # job 42 once; job 43 refused once (503), then delivered once after the restart
    assert [group_of(kind, r.body) for r in hooks.received] == ["42", "43", "43"]


def test_a_rate_limited_notification_waits_and_goes_out_later(hooks: HookServer) -> None:
    clock = FakeClock()
    hub = notifiers(receiver(hooks, max_per_minute=2), clock=clock)
    outcomes = [hub.notify("oncall", payload(str(job), job)) for job in (1, 2, 3)]
    assert [o.changed for o in outcomes] == [True, True, False]
    assert "queued (rate limit 2/min)" in outcomes[2].detail
    hub.flush()
    assert len(hooks.received) == 2
    clock.now = 30.0
    hub.flush()
    assert [r.body["group"] for r in hooks.received] == ["job:1", "job:2", "job:3"]


def test_server_errors_and_429_are_retried_client_errors_are_final(hooks: HookServer) -> None:
    hooks.answers = [503, 429, 200, 404]
    hub = notifiers(receiver(hooks, retries=2))
    assert hub.notify("oncall", payload("1")).status == "done"
    refused = hub.notify("oncall", payload("2"))
    assert (refused.status, refused.detail) == ("failed", "webhook oncall: HTTP 404")
    hub.flush()
    assert len(hooks.received) == 4


def test_secrets_come_from_files_or_the_environment_and_are_never_logged(
    hooks: HookServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret_url = hooks.url("/services/T000/B000/XXXXSECRET")
    url_file = tmp_path / "slack-url"
    url_file.write_text(secret_url + "\n")
    monkeypatch.setenv("MEDIC_TEST_TOKEN", "tok-SECRET")
    state = tmp_path / "notifications.jsonl"
    slack = ReceiverConfig(name="chat", kind="slack", url_file=str(url_file), retries=1)
    hook = ReceiverConfig(name="oncall", url=hooks.url(), token_env="MEDIC_TEST_TOKEN")
    hub = Notifiers([slack, hook], state=state, sleep=lambda _: None)
    caplog.set_level(logging.DEBUG)
    assert hub.notify("chat", payload("1")).status == "done"
    assert hub.notify("oncall", payload("1")).status == "done"
    assert hooks.received[0].path == "/services/T000/B000/XXXXSECRET"
    assert hooks.received[1].headers["Authorization"] == "Bearer tok-SECRET"
    url_file.write_text("http://127.0.0.1:9/services/T000/B000/XXXXSECRET\n")  # nothing listens
    outcome = hub.notify("chat", payload("2"))
    hub.flush()
    assert outcome.status == "failed"
    written = state.read_text() + caplog.text + outcome.detail
    assert "XXXXSECRET" not in written and "tok-SECRET" not in written


def test_a_missing_secret_is_a_one_line_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEDIC_NO_SUCH_KEY", raising=False)
    config = ReceiverConfig(name="pd", kind="pagerduty", token_env="MEDIC_NO_SUCH_KEY")
    outcome = Notifiers([config]).notify("pd", payload())
    assert (
        outcome.detail == "receiver 'pd': environment variable MEDIC_NO_SUCH_KEY (token) is unset"
    )


def test_receivers_are_checked_at_load() -> None:
    with pytest.raises(ConfigError, match="pagerduty needs a routing key"):
        load_rules({"receivers": [{"name": "pd", "kind": "pagerduty"}]})
    with pytest.raises(ConfigError, match="must be one of"):
        load_rules({"receivers": [{"name": "x", "kind": "teams", "url": "http://h"}]})
    with pytest.raises(ConfigError, match="restart_loop: unknown receiver 'nobody'"):
        load_rules({"restart_loop": {"notify": ["nobody"]}})


def test_the_stage_notifies_each_kind_through_the_local_server(
    hooks: HookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDIC_TEST_ROUTING_KEY", "R0UTING")
    rules = {
        "mode": "enforce",
        "receivers": [
            {"name": kind, "kind": kind, "url": hooks.url(f"/{kind}")}
            | ({"token_env": "MEDIC_TEST_ROUTING_KEY"} if kind == "pagerduty" else {})
            for kind in KINDS
        ],
        "routes": [{"name": "all", "actions": ["drain"], "notify": list(KINDS)}],
    }
    config = load_rules(rules)
    stage = ActionStage(config, RecordingExecutor(["n3"]), Notifiers(config.receivers))
    decisions = stage.respond(Detection("42", "gpu_fault", ("n3",), detected_at=at(0)), at(0))
    assert [(d.action, d.status) for d in decisions][1:] == [("notify", "done")] * 4
    assert sorted(r.path for r in hooks.received) == sorted(f"/{k}" for k in KINDS)


def test_alerts_other_than_detections_are_grouped_by_their_own_key(hooks: HookServer) -> None:
    hub = notifiers(receiver(hooks, "alertmanager"))
    down = Alert("deadman:files", "medic: no data from files", "stalled 300 s", at(0))
    hub.send("oncall", down)
    hub.send("oncall", down)
    hub.send(
        "oncall",
        Alert("deadman:files", "medic: files delivers again", "", at(5), status="resolved"),
    )
    assert [r.body["status"] for r in hooks.received] == ["firing", "resolved"]


def test_a_jobless_detection_is_grouped_by_the_nodes_it_blames() -> None:
    jobless = payload()
    jobless["detection"]["job_id"] = None
    assert detection_alert(jobless).group == "nodes:n3"


def test_escalations_are_new_messages_in_the_thread_and_only_repeats_fold(
    hooks: HookServer, tmp_path: Path
) -> None:
    state = tmp_path / "notifications.jsonl"
    hub = notifiers(receiver(hooks), state)
    first = payload("42", 0)
    hub.notify("oncall", first)
    assert hub.notify("oncall", payload("42", 30, kind="crash")).changed is False  # a repeat
    further = payload("42", 60)
    further["detection"]["culprits"] = ["n4"]
    further["decisions"] = [{"action": "drain", "node": "n4", "job_id": "42", "status": "done"}]
    hub.notify("oncall", further)
    held = payload("42", 90, kind="crash")
    held["decisions"] = [
        {"action": "requeue", "job_id": "42", "status": "suppressed", "guard": "restart_loop"},
        {"action": "hold", "job_id": "42", "status": "done"},
    ]
    hub.notify("oncall", held)
    again = notifiers(receiver(hooks), state)  # a restarted service knows what it told
    assert again.notify("oncall", held).changed is False
    sent = [[d["action"] + " " + d["status"] for d in r.body["decisions"]] for r in hooks.received]
    assert [r.body["group"] for r in hooks.received] == ["job:42"] * 3
    assert sent == [["drain done"], ["drain done"], ["requeue suppressed", "hold done"]]
    assert [r.body["detection"]["culprits"] for r in hooks.received][:2] == [["n3"], ["n4"]]


def test_a_failed_check_and_a_node_kept_are_two_messages_of_the_nodes_thread(
    hooks: HookServer, tmp_path: Path
) -> None:
    settings = {
        "rules": {
            "receivers": [{"name": "oncall", "url": hooks.url()}],
            "lifecycle": {"notify": ["oncall"]},
        }
    }
    recovery = Recovery.from_settings(settings, None, tmp_path, at(0))
    recovery._node_alert(NodeEvent(at(0), "n3", "check_failed", "check job 7 FAILED exit 4", "7"))
    recovery._node_alert(NodeEvent(at(1), "n3", "check_failed", "check job 7 FAILED exit 4", "7"))
    recovery._node_alert(NodeEvent(at(2), "n3", "kept", "2 checks failed within 86400 s"))
    titles = [r.body["title"] for r in hooks.received]
    assert titles == ["medic: node n3 failed its health check", "medic: node n3 kept drained"]
    assert {r.body["group"] for r in hooks.received} == {"node:n3"}
