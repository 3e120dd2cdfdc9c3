import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

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


def answering(body: bytes, content_type: str) -> Iterator[str]:
    """The URL of a local HTTP server that answers every GET with 200 and ``body``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


PING = {  # slurmrestd 22.05's ping answer, as the local Slurm gives it
    "meta": {"plugin": {"type": "openapi/v0.0.38"}},
    "errors": [],
    "pings": [{"hostname": "ctl", "ping": "UP", "status": 0, "mode": "primary"}],
}


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (json.dumps(PING).encode(), "application/json", "ok"),
        (b"<html><body>Welcome</body></html>", "text/html", "fail"),
        (b'{"status": "ok"}', "application/json", "fail"),
        (
            json.dumps({**PING, "pings": [{**PING["pings"][0], "ping": "DOWN"}]}).encode(),
            "application/json",
            "fail",
        ),
    ],
    ids=["ping-up", "html-page", "other-json", "controller-down"],
)
def test_the_probe_takes_only_a_controller_ping_for_slurmrestd(
    body: bytes, content_type: str, status: str
) -> None:
    with contextmanager(answering)(body, content_type) as url:
        probe = SlurmRest.probe(SlurmConfig(executor="rest", rest_url=url))
    assert probe.status == status, probe
    assert "\n" not in probe.detail
