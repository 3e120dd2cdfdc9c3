import json

import httpx
import pytest

from medic.actions.config import ReceiverConfig
from medic.actions.notify import Webhooks

URL = "https://hooks.example.org/medic"


def hooks(handler: httpx.MockTransport, **config: object) -> Webhooks:
    receiver = ReceiverConfig(name="oncall", url=URL, **config)  # type: ignore[arg-type]
    return Webhooks([receiver], client=httpx.Client(transport=handler), sleep=lambda _: None)


def test_posts_the_payload_as_json_with_a_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    monkeypatch.setenv("ONCALL_TOKEN", "s3cret")
    outcome = hooks(httpx.MockTransport(handler), token_env="ONCALL_TOKEN").notify(
        "oncall", {"text": "gpu_fault on n3"}
    )
    assert (outcome.status, outcome.detail) == ("done", "webhook oncall: HTTP 204")
    assert str(seen[0].url) == URL
    assert json.loads(seen[0].content) == {"text": "gpu_fault on n3"}
    assert seen[0].headers["authorization"] == "Bearer s3cret"


def test_server_errors_are_retried_client_errors_are_not() -> None:
    answers = [503, 200, 404]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(answers.pop(0))

    webhooks = hooks(httpx.MockTransport(handler))
    assert webhooks.notify("oncall", {}).status == "done"
    refused = webhooks.notify("oncall", {})
    assert (refused.status, refused.detail) == ("failed", "webhook oncall: HTTP 404")
    assert answers == []


def test_a_receiver_that_is_down_is_a_failed_outcome() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out")

    outcome = hooks(httpx.MockTransport(handler), retries=1).notify("oncall", {})
    assert outcome.status == "failed"
    assert outcome.detail == "webhook oncall: ConnectTimeout: timed out (after 2 attempts)"
