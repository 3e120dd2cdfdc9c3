from typing import Any

import httpx

from medic.actions.config import SlurmConfig
from medic.actions.slurmrest import SlurmRest
from medic.testing.slurm import REST_API, REST_META, FakeSlurmrestd

API = REST_API


def rest(fake: FakeSlurmrestd, **config: Any) -> SlurmRest:
    client = httpx.Client(transport=httpx.MockTransport(fake), base_url="http://slurm")
    settings = SlurmConfig(executor="rest", backoff_s=0, poll_s=0.001, **config)
    return SlurmRest(settings, client=client, sleep=lambda _: None)


def test_hold_posts_and_verifies_then_is_idempotent() -> None:
    fake = FakeSlurmrestd()
    s = rest(fake)
    outcome = s.hold("42")
    assert (outcome.status, outcome.detail) == ("done", "job 42 held (PENDING)")
    assert ("POST", f"{API}/job/42", {"hold": True}) in fake.requests
    again = s.hold("42")
    assert (again.detail, again.changed) == ("job 42 already held (PENDING)", False)
    assert s.release("42").detail == "job 42 released (PENDING)"


def test_cancel_deletes_and_verifies() -> None:
    fake = FakeSlurmrestd(state="RUNNING")
    s = rest(fake)
    assert s.cancel("42").detail == "job 42 cancelled"
    assert ("DELETE", f"{API}/job/42", None) in fake.requests
    assert s.cancel("42").detail == "job 42 already ended (CANCELLED)"


def test_errors_in_the_answer_are_failures_even_with_http_200() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        error = {"description": 'Disabled key: "excluded_nodes"', "error_number": 9001}
        return httpx.Response(200, json={**REST_META, "errors": [error]})

    client = httpx.Client(transport=httpx.MockTransport(refuse), base_url="http://slurm")
    outcome = SlurmRest(SlurmConfig(executor="rest"), client=client).hold("42")
    assert outcome.status == "failed"
    assert outcome.detail == 'slurmrestd GET /job/42: Disabled key: "excluded_nodes"'


def test_unknown_jobs_and_unsupported_actions() -> None:
    s = rest(FakeSlurmrestd())
    assert s.cancel("7").detail == "job 7 is not known to Slurm"
    assert s.job("7") is None
    assert s.drain("n1", "x").detail == "drain is not supported by slurmrestd v0.0.38"
    assert s.requeue("42").status == "failed"
    assert "drain" not in s.supports


def test_gateway_errors_are_retried_and_a_down_server_fails_cleanly() -> None:
    fake = FakeSlurmrestd()
    fake.fail_next = [503, 502]
    facts = rest(fake).job("42")
    assert facts is not None
    assert (facts.partition, facts.user) == ("gpu", "alice")

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    client = httpx.Client(transport=httpx.MockTransport(down), base_url="http://slurm")
    s = SlurmRest(SlurmConfig(executor="rest", retries=1), client=client, sleep=lambda _: None)
    outcome = s.cancel("42")
    assert outcome.status == "failed"
    assert outcome.detail == (
        "slurmrestd GET /job/42: ConnectError: connection refused (after 2 attempts)"
    )
    assert s.node_count() is None


def test_garbage_answers_are_failures() -> None:
    fake = FakeSlurmrestd()
    fake.fail_next = [500]
    outcome = rest(fake, retries=0).hold("42")
    assert outcome.detail == "slurmrestd GET /job/42: HTTP 500, not JSON"


def test_nodes() -> None:
    s = rest(FakeSlurmrestd())
    assert s.node_count() == 2
    assert s.drained_nodes() == {"n2": "medic: x"}
