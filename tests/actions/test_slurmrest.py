import json
from typing import Any

import httpx

from medic.actions.config import SlurmConfig
from medic.actions.slurmrest import SlurmRest

API = "/slurm/v0.0.38"
META = {"meta": {"plugin": {"type": "openapi/v0.0.38"}}}


class FakeSlurmrestd:
    """Answers like slurmrestd 22.05 for one job and two nodes (as the notes record it)."""

    def __init__(self, state: str = "PENDING", priority: int = 100) -> None:
        self.job = {
            "job_id": 42,
            "job_state": state,
            "priority": priority,
            "partition": "gpu",
            "user_name": "alice",
        }
        self.requests: list[tuple[str, str, Any]] = []
        self.fail_next: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        if self.fail_next:
            return httpx.Response(self.fail_next.pop(0), text="<html>bad gateway</html>")
        path = request.url.path.removeprefix(API)
        if path == "/job/42":
            if request.method == "POST":
                self.job["priority"] = 0 if body["hold"] else 90
            if request.method == "DELETE":
                self.job["job_state"] = "CANCELLED"
            return httpx.Response(200, json={**META, "errors": [], "jobs": [self.job]})
        if path.startswith("/job/"):
            error = {"error": "Invalid job id specified", "description": "Unable to find JobId"}
            return httpx.Response(500, json={**META, "errors": [error]})
        if path == "/nodes":
            nodes = [
                {"name": "n1", "state": "idle", "state_flags": [], "reason": ""},
                {"name": "n2", "state": "mixed", "state_flags": ["DRAIN"], "reason": "medic: x"},
            ]
            return httpx.Response(200, json={**META, "errors": [], "nodes": nodes})
        return httpx.Response(404, text="not found")


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
        return httpx.Response(200, json={**META, "errors": [error]})

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
