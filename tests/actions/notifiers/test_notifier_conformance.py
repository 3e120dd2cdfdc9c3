"""The notifier conformance suite: every registered receiver kind through the same checks, as
``tests/detectors/test_conformance.py`` runs every detector.

Parametrised over the registry (``medic.actions.notifiers.registry.NOTIFIERS``), so a new kind
is checked the moment it registers: its body is JSON that carries what happened and tells a
firing alert from a resolved one; its receivers load with the secrets it needs and fail in one
line without them; and through the dispatcher, against a real HTTP server, it is posted once on
a 2xx, retried on a 5xx, given up on a 4xx, sends its token only where it says so, and never
shows the token in an outcome.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from medic.actions.config import load_rules
from medic.actions.notifiers import Alert, Notifiers, ReceiverConfig
from medic.actions.notifiers.registry import NOTIFIERS
from medic.config import ConfigError
from tests.actions.notifiers.server import HookServer, serve

KINDS = sorted(NOTIFIERS)
TOKEN = "s3cret-token-value"
ALERT = Alert(
    group="job:42",
    title="medic: gpu_fault of job 42 on n3",
    text="Xid 79 on n3\ndrain n3: done",
    time=1_700_000_000_000_000,
    labels={"kind": "gpu_fault", "job_id": "42", "nodes": "n3"},
    news=("culprit n3",),
)


@pytest.fixture
def hooks() -> Iterator[HookServer]:
    yield from serve()


def table(kind: str, **extra: Any) -> dict[str, Any]:
    """A receiver of ``kind`` as ``[[rules.receivers]]`` gives it, with a token in the
    environment variable the tests set."""
    return {"name": "oncall", "kind": kind, "token_env": "MEDIC_TEST_TOKEN", **extra}


@pytest.mark.parametrize("kind", KINDS)
def test_the_body_is_json_that_says_what_happened(kind: str) -> None:
    notifier = NOTIFIERS[kind]
    firing = notifier.body(ALERT, "oncall", TOKEN)
    text = json.dumps(firing)
    assert ALERT.title in text or ALERT.title in json.loads(text).get("text", "")
    assert "Xid 79 on n3" in text
    resolved = notifier.body(replace(ALERT, status="resolved"), "oncall", TOKEN)
    assert json.dumps(resolved) != text


@pytest.mark.parametrize("kind", KINDS)
def test_its_receivers_load_with_what_it_needs_and_fail_in_one_line_without(kind: str) -> None:
    notifier = NOTIFIERS[kind]
    config = load_rules({"receivers": [table(kind, url="http://hooks.example.org/x")]})
    assert config.receiver("oncall").kind == kind
    bare = {"name": "oncall", "kind": kind}
    if notifier.default_url:
        bare["token_env"] = "MEDIC_TEST_TOKEN"
        assert load_rules({"receivers": [bare]}).receiver("oncall").kind == kind
    else:
        with pytest.raises(ConfigError, match="give url, url_env or url_file"):
            load_rules({"receivers": [bare]})
    without_token = {"name": "oncall", "kind": kind, "url": "http://hooks.example.org/x"}
    if notifier.token_required:
        with pytest.raises(ConfigError) as error:
            load_rules({"receivers": [without_token]})
        assert f"needs {notifier.token_required}" in str(error.value)
        assert "\n" not in str(error.value)
    else:
        load_rules({"receivers": [without_token]})


def test_an_unknown_kind_is_a_one_line_error_naming_the_known() -> None:
    with pytest.raises(ConfigError) as error:
        load_rules({"receivers": [{"name": "x", "kind": "teams", "url": "http://h"}]})
    message = str(error.value)
    assert "receiver 'x': kind must be one of" in message
    assert all(f'"{kind}"' in message for kind in KINDS)
    assert "\n" not in message


def deliver(hooks: HookServer, kind: str, answers: list[int]) -> tuple[Notifiers, Any]:
    hooks.answers = list(answers)
    config = ReceiverConfig(**table(kind, url=hooks.url(f"/{kind}"), backoff_s=0.0))
    hub = Notifiers([config], sleep=lambda _: None)
    return hub, hub.send("oncall", ALERT)


@pytest.mark.parametrize("kind", KINDS)
def test_a_2xx_is_one_post_with_its_token_only_where_it_says(
    kind: str, hooks: HookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDIC_TEST_TOKEN", TOKEN)
    _, outcome = deliver(hooks, kind, [])
    assert outcome.status == "done", outcome
    assert [r.path for r in hooks.received] == [f"/{kind}"]
    sent = hooks.received[0]
    bearer = {k.lower(): v for k, v in sent.headers.items()}.get("authorization")
    assert (bearer == f"Bearer {TOKEN}") == NOTIFIERS[kind].bearer
    if not NOTIFIERS[kind].bearer:
        assert bearer is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_5xx_is_retried_and_a_4xx_is_final_without_showing_the_token(
    kind: str, hooks: HookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDIC_TEST_TOKEN", TOKEN)
    _, outcome = deliver(hooks, kind, [503])
    assert outcome.status == "done"
    assert len(hooks.received) == 2
    hooks.received.clear()
    hub, outcome = deliver(hooks, kind, [400, 200])
    assert outcome.status == "failed"
    assert len(hooks.received) == 1
    assert TOKEN not in outcome.detail
    assert not list(hub.deliveries.pending())
