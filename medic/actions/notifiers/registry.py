"""The registry of notifiers (receiver kinds), by the name ``[[rules.receivers]] kind`` gives
them.

Importing this module registers the built-ins from the one explicit list below; a site's own
kind (a class with ``kind``, ``default_url``, ``token_required``, ``bearer`` and ``body``)
calls ``register_notifier`` before its config is loaded. Receivers' configs, the dispatcher
and ``medic doctor`` find kinds here and never branch on them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from medic.actions.notifiers.formats import Alert, Alertmanager, PagerDuty, Slack, Webhook

__all__ = ["BUILTIN", "NOTIFIERS", "NotifierKind", "notifier_class", "register_notifier"]


class NotifierKind(Protocol):
    """What a receiver of this kind is sent, and what it needs."""

    kind: ClassVar[str]
    """Its name in ``[[rules.receivers]] kind``."""
    default_url: ClassVar[str]
    """Where to POST when the receiver names no URL; empty: a URL is required."""
    token_required: ClassVar[str]
    """What secret the kind cannot do without (``a routing key``); empty: none."""
    bearer: ClassVar[bool]
    """Send the receiver's token as ``Authorization: Bearer``."""

    @staticmethod
    def body(alert: Alert, receiver: str, token: str | None) -> dict[str, Any]:
        """The JSON body of one POST."""
        ...


BUILTIN: tuple[type[NotifierKind], ...] = (Webhook, Slack, PagerDuty, Alertmanager)
NOTIFIERS: dict[str, type[NotifierKind]] = {}


def register_notifier(cls: type[NotifierKind]) -> type[NotifierKind]:
    """Class decorator: make a receiver kind available by its ``kind``."""
    if cls.kind in NOTIFIERS and NOTIFIERS[cls.kind] is not cls:
        raise ValueError(f"notifier {cls.kind!r} registered twice")
    NOTIFIERS[cls.kind] = cls
    return cls


def notifier_class(kind: str) -> type[NotifierKind]:
    """The kind registered as ``kind``; ValueError naming the known ones."""
    found = NOTIFIERS.get(kind)
    if found is None:
        known = ", ".join(f'"{k}"' for k in NOTIFIERS)
        raise ValueError(f"kind must be one of {known}, got {kind!r}")
    return found


for _notifier in BUILTIN:
    register_notifier(_notifier)
