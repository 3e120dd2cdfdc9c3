"""``[[rules.receivers]]``: where notifications go, in which format, and how often.

Secrets (a bearer token, PagerDuty's routing key, a Slack webhook URL, which is itself the
secret) are read from an environment variable or a file, never from the config file, and are
never logged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from medic.actions.notifiers.registry import NotifierKind, notifier_class
from medic.config import Count, NonNegative, Positive, PositiveCount


class SecretError(ValueError):
    """A receiver's secret cannot be read; the message names where it was looked for."""


@dataclass(frozen=True)
class ReceiverConfig:
    """A receiver of notifications: one POST per incident group."""

    name: str
    """What routes and alerts call it in ``notify``."""
    kind: str = "webhook"
    """A registered notifier: ``webhook`` (medic's JSON), ``slack`` (incoming webhook),
    ``pagerduty`` (Events API v2), ``alertmanager`` (the body Alertmanager's webhook_config
    posts, for tools that read it)."""
    url: str = ""
    """Where to POST; for Slack prefer ``url_env``/``url_file`` (the URL is the secret); for
    PagerDuty the Events API v2 endpoint by default."""
    url_env: str | None = None
    """Environment variable holding the URL (a Slack webhook URL is a secret)."""
    url_file: str | None = None
    """A file holding the URL (its first line)."""
    token_env: str | None = None
    """Environment variable holding the secret: a bearer token (webhook, alertmanager) or the
    routing key (pagerduty)."""
    token_file: str | None = None
    """A file holding that secret (its first line)."""
    timeout_s: Positive = 5.0
    """Time one post may take."""
    retries: Count = 2
    """Further attempts after a transport error, a 429 or a 5xx (then it stays pending)."""
    backoff_s: NonNegative = 0.5
    """First pause between attempts; doubles each time."""
    max_per_minute: PositiveCount = 20
    """Rate limit; notifications over it wait (persisted) and go out as the budget refills."""
    group_window_s: NonNegative = 3600.0
    """Notifications of one incident group (a job, or the nodes blamed) within this span of the
    group's last one are folded into it: the receiver hears of the group once."""

    def __post_init__(self) -> None:
        try:
            notifier = notifier_class(self.kind)
        except ValueError as exc:
            raise ValueError(f"receiver '{self.name}': {exc}") from None
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"receiver '{self.name}': url must start with http:// or https://")
        if not (self.url or self.url_env or self.url_file or notifier.default_url):
            raise ValueError(f"receiver '{self.name}': give url, url_env or url_file")
        if notifier.token_required and not (self.token_env or self.token_file):
            raise ValueError(
                f"receiver '{self.name}': {self.kind} needs {notifier.token_required} "
                "(token_env or token_file)"
            )

    @property
    def notifier(self) -> type[NotifierKind]:
        """What this receiver is sent, by its kind."""
        return notifier_class(self.kind)

    def endpoint(self) -> str:
        """The URL to POST to (read from its variable or file when configured so)."""
        secret = _secret(self.name, "url", self.url_env, self.url_file)
        url = secret or self.url or self.notifier.default_url
        if not url.startswith(("http://", "https://")):
            raise SecretError(f"receiver '{self.name}': its url does not start with http(s)://")
        return url

    def token(self) -> str | None:
        return _secret(self.name, "token", self.token_env, self.token_file)

    def secrets(self) -> list[str]:
        """Every secret of the receiver that can be read, to keep out of messages."""
        found = []
        for read in (self.token, self.endpoint):
            try:
                value = read()
            except SecretError:
                continue
            if value and (read is self.token or self.url_env or self.url_file):
                found.append(value)
        return found


def _secret(receiver: str, what: str, env: str | None, file: str | None) -> str | None:
    if env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise SecretError(
                f"receiver '{receiver}': environment variable {env} ({what}) is unset"
            )
        return value
    if file:
        try:
            lines = Path(file).read_text().splitlines()
        except OSError as exc:
            raise SecretError(
                f"receiver '{receiver}': cannot read {what} file {file}: {exc.strerror or exc}"
            ) from None
        value = lines[0].strip() if lines else ""
        if not value:
            raise SecretError(f"receiver '{receiver}': {what} file {file} is empty")
        return value
    return None
