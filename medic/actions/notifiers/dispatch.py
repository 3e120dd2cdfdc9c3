"""``Notifiers``: every receiver of ``[[rules.receivers]]``, with grouping, rate limits, retries
and delivery state that survives a restart.

An alert opens an incident group per receiver (a job, or the nodes blamed) or folds into the
open one; each group is delivered once. A POST that fails transiently (transport error, 429,
5xx) is retried with backoff, then left pending; a rate-limited one waits. ``flush`` (the
service calls it on its tick) delivers what is pending. A 4xx other than 429 is final. Secrets
never appear in outcomes or logs: messages name the receiver, and any secret text is masked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from medic.actions.executor import Retrier
from medic.actions.model import Outcome, done, failed
from medic.actions.notifiers.config import ReceiverConfig, SecretError
from medic.actions.notifiers.delivery import DeliveryLog, Entry, RateLimit, within
from medic.actions.notifiers.formats import Alert, detection_alert

log = logging.getLogger(__name__)

MASK = "<secret>"


def mask(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


class SecretFilter(logging.Filter):
    """Masks receivers' secrets in the HTTP libraries' own log records (httpx logs every
    request's URL at INFO, and a Slack webhook URL is a secret)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        masked = mask(text, self.secrets)
        if masked != text:
            record.msg, record.args = masked, ()
        return True


SECRETS = SecretFilter()
logging.getLogger("httpx").addFilter(SECRETS)


class Notifiers:
    """The receivers by name (see the module docstring)."""

    def __init__(
        self,
        receivers: Iterable[ReceiverConfig],
        state: Path | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.receivers = {r.name: r for r in receivers}
        self.deliveries = DeliveryLog(state)
        self.client = client or httpx.Client()
        self.sleep = sleep
        self.limits = {
            name: RateLimit(r.max_per_minute, clock) for name, r in self.receivers.items()
        }
        self.delivered = 0

    def notify(self, receiver: str, payload: dict[str, Any]) -> Outcome:
        """The stage's notification of a detection and its decisions."""
        return self.send(receiver, detection_alert(payload))

    def send(self, receiver: str, alert: Alert) -> Outcome:
        config = self.receivers.get(receiver)
        if config is None:
            return failed(f"unknown receiver {receiver}")
        entry = self.deliveries.get(receiver, alert)
        if entry is not None and within(config.group_window_s, entry.last, alert.time):
            self.deliveries.fold(entry, alert.time)
            return done(
                f"{config.kind} {receiver}: folded into group {alert.group} ({entry.state})",
                changed=False,
            )
        return self._deliver(config, self.deliveries.open(receiver, alert))

    def flush(self) -> None:
        """Deliver what is pending (after a restart, a rate limit or a receiver outage)."""
        for entry in self.deliveries.pending():
            config = self.receivers.get(entry.receiver)
            if config is None:
                self.deliveries.mark(entry, "failed")
                continue
            outcome = self._deliver(config, entry)
            if not outcome.ok:
                log.warning("notification %s", outcome.detail)

    def _deliver(self, config: ReceiverConfig, entry: Entry) -> Outcome:
        name = f"{config.kind} {config.name}"
        if not self.limits[config.name].take():
            return done(
                f"{name}: queued (rate limit {config.max_per_minute}/min), sent when it allows",
                changed=False,
            )
        try:
            url, body, headers = self._request(config, entry.alert)
        except SecretError as exc:
            self.deliveries.mark(entry, "failed")
            return failed(str(exc))
        secrets = config.secrets()
        SECRETS.secrets.update(secrets)

        def post() -> httpx.Response | str:
            try:
                return self.client.post(url, json=body, headers=headers, timeout=config.timeout_s)
            except httpx.HTTPError as exc:
                return f"{type(exc).__name__}: {mask(str(exc), secrets)}"

        def again(answer: httpx.Response | str) -> bool:
            return (
                isinstance(answer, str) or answer.status_code in (429,) or answer.status_code >= 500
            )

        answer, attempts = Retrier(config.retries, config.backoff_s, self.sleep).run(post, again)
        if isinstance(answer, str) or again(answer):
            why = answer if isinstance(answer, str) else f"HTTP {answer.status_code}"
            return failed(f"{name}: {why} (after {attempts} attempts; kept pending)")
        if answer.status_code >= 300:
            self.deliveries.mark(entry, "failed")
            return failed(f"{name}: HTTP {answer.status_code}")
        self.deliveries.mark(entry, "sent")
        self.delivered += 1
        return done(f"{name}: HTTP {answer.status_code} (group {entry.alert.group})")

    def _request(
        self, config: ReceiverConfig, alert: Alert
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        url, token = config.endpoint(), config.token()
        notifier = config.notifier
        headers = {"Authorization": f"Bearer {token}"} if token and notifier.bearer else {}
        return url, notifier.body(alert, config.name, token), headers
