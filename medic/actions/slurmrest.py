"""The Slurm executor over slurmrestd (OpenAPI ``v0.0.38``, Slurm 22.05) with httpx.

The REST API of 22.05 can hold, release and cancel jobs and read jobs and nodes; it has no node
update (so no drain or resume) and no requeue, so this executor does not claim those and the
actions stage refuses routes that need them. slurmrestd answers a refused request with HTTP 200
or 500 and an ``errors`` list, so every answer's ``errors`` is checked. Transport failures and
502/503/504 are retried with backoff; each change is verified by reading the job back.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from medic.actions.config import SlurmConfig
from medic.actions.executor import Poller, Retrier
from medic.actions.model import JobFacts, Outcome, done, failed
from medic.probe import Probe
from medic.slurm import CANCELLED, JOB_ENDED_STATES, NODE_DRAIN_FLAG

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({502, 503, 504})


class RestError(Exception):
    """slurmrestd refused, could not be reached or answered garbage; one line."""


def default_client(config: SlurmConfig) -> httpx.Client:
    """A client for ``rest_socket`` (rest_auth/local) or ``rest_url`` with JWT headers."""
    headers = {}
    token = os.environ.get(config.rest_token_env)
    if config.rest_user and token:
        headers = {"X-SLURM-USER-NAME": config.rest_user, "X-SLURM-USER-TOKEN": token}
    transport = httpx.HTTPTransport(uds=config.rest_socket) if config.rest_socket else None
    return httpx.Client(
        base_url=config.rest_url, headers=headers, transport=transport, timeout=config.timeout_s
    )


class SlurmRest:
    """Executor over slurmrestd: hold, release, cancel; job and node reads."""

    name = "slurmrestd"
    kind = "rest"
    supports = frozenset({"hold", "release", "cancel"})

    def __init__(
        self,
        config: SlurmConfig | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or SlurmConfig(executor="rest")
        self.client = client or default_client(self.config)
        self.prefix = f"/slurm/{self.config.rest_api}"
        self.retrier = Retrier(self.config.retries, self.config.backoff_s, sleep)
        self.poller = Poller(self.config.verify_timeout_s, self.config.poll_s, sleep, clock)

    @classmethod
    def probe(cls, config: SlurmConfig) -> Probe:
        """slurmrestd's ``ping`` with the configured credentials."""
        url = f"{config.rest_url.rstrip('/')}/slurm/{config.rest_api}/ping"
        try:
            with default_client(config) as client:
                answer = client.get(url)
        except httpx.HTTPError as exc:
            return Probe("fail", f"slurmrestd unreachable at {url} ({exc})")
        if answer.status_code != 200:
            return Probe("fail", f"{url} answered {answer.status_code}")
        return _pinged(url, answer)

    def node_checks(self) -> None:
        """slurmrestd v0.0.38 can neither drain, resume nor reserve: no node lifecycle."""
        return None

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response | str:
        try:
            return self.client.request(method, self.prefix + path, json=body)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The decoded answer; RestError when unreachable, not JSON or carrying errors."""

        def again(answer: httpx.Response | str) -> bool:
            return isinstance(answer, str) or answer.status_code in RETRY_STATUS

        answer, attempts = self.retrier.run(lambda: self._send(method, path, body), again)
        where = f"{method} {path}"
        if isinstance(answer, str):
            raise RestError(f"slurmrestd {where}: {answer} (after {attempts} attempts)")
        try:
            data = answer.json()
        except ValueError:
            raise RestError(f"slurmrestd {where}: HTTP {answer.status_code}, not JSON") from None
        if not isinstance(data, dict):
            raise RestError(f"slurmrestd {where}: unexpected answer")
        errors = data.get("errors") or []
        if errors:
            first = errors[0] if isinstance(errors[0], dict) else {"error": str(errors[0])}
            text = first.get("description") or first.get("error") or "error"
            raise RestError(f"slurmrestd {where}: {text}")
        if answer.status_code >= 400:
            raise RestError(f"slurmrestd {where}: HTTP {answer.status_code}")
        return data

    def read_job(self, job_id: str) -> dict[str, Any] | None:
        try:
            data = self._request("GET", f"/job/{job_id}")
        except RestError as exc:
            if "invalid job id" in str(exc).lower() or "unable to find" in str(exc).lower():
                return None
            raise
        jobs = data.get("jobs") or []
        return jobs[0] if jobs and isinstance(jobs[0], dict) else None

    def _known_job(self, job_id: str) -> dict[str, Any]:
        job = self.read_job(job_id)
        if job is None:
            raise RestError(f"job {job_id} is not known to Slurm")
        return job

    def job(self, job_id: str) -> JobFacts | None:
        try:
            job = self.read_job(job_id)
        except RestError as exc:
            log.warning("cannot read job %s: %s", job_id, exc)
            return None
        if job is None:
            return None
        return JobFacts(
            job_id,
            job.get("partition") or None,
            job.get("user_name") or None,
            job.get("job_state") or None,
        )

    def _nodes(self) -> list[dict[str, Any]] | None:
        try:
            nodes = self._request("GET", "/nodes").get("nodes")
        except RestError as exc:
            log.warning("cannot list nodes: %s", exc)
            return None
        return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else None

    def node_count(self) -> int | None:
        nodes = self._nodes()
        return None if nodes is None else len({n.get("name") for n in nodes})

    def drained_nodes(self) -> dict[str, str] | None:
        nodes = self._nodes()
        if nodes is None:
            return None
        return {
            str(n.get("name")): str(n.get("reason") or "")
            for n in nodes
            if NODE_DRAIN_FLAG in (n.get("state_flags") or [])
        }

    def _unsupported(self, action: str) -> Outcome:
        return failed(f"{action} is not supported by slurmrestd {self.config.rest_api}")

    def drain(self, node: str, reason: str) -> Outcome:
        return self._unsupported("drain")

    def resume(self, node: str) -> Outcome:
        return self._unsupported("resume")

    def requeue(
        self, job_id: str, exclude: Sequence[str] = (), since_restarts: int | None = None
    ) -> Outcome:
        return self._unsupported("requeue")

    def hold(self, job_id: str) -> Outcome:
        return self._guarded(lambda: self._hold(job_id, held=True))

    def release(self, job_id: str) -> Outcome:
        return self._guarded(lambda: self._hold(job_id, held=False))

    def cancel(self, job_id: str) -> Outcome:
        return self._guarded(lambda: self._cancel(job_id))

    @staticmethod
    def _guarded(action: Callable[[], Outcome]) -> Outcome:
        try:
            return action()
        except RestError as exc:
            return failed(str(exc))

    def _hold(self, job_id: str, held: bool) -> Outcome:
        verb = "hold" if held else "release"
        job = self._known_job(job_id)
        if (job.get("priority") == 0) == held:
            state = "already held" if held else "not held"
            return done(f"job {job_id} {state} ({job.get('job_state')})", changed=False)
        self._request("POST", f"/job/{job_id}", {"hold": held})
        ok, job = self.poller.until(
            lambda: self._known_job(job_id), lambda j: (j.get("priority") == 0) == held
        )
        if not ok:
            return failed(f"{verb} of job {job_id} not seen (priority {job.get('priority')})")
        return done(f"job {job_id} {'held' if held else 'released'} ({job.get('job_state')})")

    def _cancel(self, job_id: str) -> Outcome:
        job = self._known_job(job_id)
        if job.get("job_state") in JOB_ENDED_STATES:
            return done(f"job {job_id} already ended ({job.get('job_state')})", changed=False)
        self._request("DELETE", f"/job/{job_id}")
        ok, job = self.poller.until(
            lambda: self._known_job(job_id), lambda j: j.get("job_state") == CANCELLED
        )
        if not ok:
            return failed(f"cancel of job {job_id} not seen (state {job.get('job_state')})")
        return done(f"job {job_id} cancelled")


def _pinged(url: str, answer: httpx.Response) -> Probe:
    """What slurmrestd's ``ping`` says of the controllers: ok when one is ``UP``. A 200 that is
    not that answer (a proxy's page, another service on the port) is no slurmrestd."""
    try:
        data = answer.json()
    except ValueError:
        return Probe("fail", f"{url} answered 200 but not with JSON: not slurmrestd")
    pings = data.get("pings") if isinstance(data, dict) else None
    if not isinstance(pings, list):
        return Probe("fail", f"{url} answered without a controller ping: not slurmrestd")
    states = [str(p.get("ping")) for p in pings if isinstance(p, dict)]
    if "UP" not in states:
        return Probe("fail", f"slurmrestd at {url} reaches no controller ({', '.join(states)})")
    return Probe("ok", f"slurmrestd answers at {url}")
