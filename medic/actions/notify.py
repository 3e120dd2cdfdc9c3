"""Webhook notifications: one JSON POST per notified detection and receiver (httpx).

A receiver that is down or answers 5xx is retried with backoff; a 4xx is not (the request
itself is wrong). Either way the outcome is recorded and the service carries on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from medic.actions.config import ReceiverConfig
from medic.actions.executor import Retrier
from medic.actions.model import Outcome, done, failed


class Webhooks:
    """Posts to the configured receivers by name."""

    def __init__(
        self,
        receivers: Iterable[ReceiverConfig],
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.receivers = {r.name: r for r in receivers}
        self.client = client or httpx.Client()
        self.sleep = sleep

    def notify(self, receiver: str, payload: dict[str, Any]) -> Outcome:
        config = self.receivers.get(receiver)
        if config is None:
            return failed(f"unknown receiver {receiver}")
        headers = {}
        token = os.environ.get(config.token_env) if config.token_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"

        def post() -> httpx.Response | str:
            try:
                return self.client.post(
                    config.url, json=payload, headers=headers, timeout=config.timeout_s
                )
            except httpx.HTTPError as exc:
                return f"{type(exc).__name__}: {exc}"

        def again(answer: httpx.Response | str) -> bool:
            return isinstance(answer, str) or answer.status_code >= 500

        retrier = Retrier(config.retries, config.backoff_s, self.sleep)
        answer, attempts = retrier.run(post, again)
        if isinstance(answer, str):
            return failed(f"webhook {receiver}: {answer} (after {attempts} attempts)")
        if answer.status_code >= 300:
            return failed(f"webhook {receiver}: HTTP {answer.status_code}")
        return done(f"webhook {receiver}: HTTP {answer.status_code}")
