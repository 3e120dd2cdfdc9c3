"""Notifications: receivers' formats (webhook, Slack, PagerDuty Events v2, Alertmanager's
webhook body), grouping per incident, rate limits, retries and persisted delivery state."""

from medic.actions.notifiers.config import ReceiverConfig
from medic.actions.notifiers.dispatch import Notifiers
from medic.actions.notifiers.formats import Alert

__all__ = ["Alert", "Notifiers", "ReceiverConfig"]
