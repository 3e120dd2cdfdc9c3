"""What a notification says (``Alert``) and the body each kind of receiver expects.

Formats, as their owners document them:

* Slack incoming webhooks: a JSON object with ``text`` (mrkdwn); Slack answers ``200 ok`` or
  ``429`` with ``Retry-After`` (https://api.slack.com/messaging/webhooks).
* PagerDuty Events API v2: POST ``/v2/enqueue`` with ``routing_key``, ``event_action``
  (``trigger``/``resolve``), ``dedup_key`` and ``payload`` {``summary`` (<= 1024 chars),
  ``source``, ``severity`` (critical/error/warning/info), ``timestamp``, ``component``,
  ``group``, ``class``, ``custom_details``}; it answers ``202`` (https://developer.pagerduty.com/
  docs/events-API-v2/trigger-events, mirrored in PagerDuty/developer-docs).
* Alertmanager's webhook body (``version`` "4"): ``receiver``, ``status``, ``alerts`` (each with
  ``status``, ``labels``, ``annotations``, ``startsAt``, ``endsAt`` (the zero time while firing),
  ``generatorURL``, ``fingerprint``), ``groupLabels``, ``commonLabels``, ``commonAnnotations``,
  ``externalURL``, ``groupKey``, ``truncatedAlerts``
  (https://prometheus.io/docs/alerting/latest/configuration/#webhook_config).
* medic's own webhook: the alert's fields plus what the rules decided.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from medic.timeutil import US

Severity = Literal["critical", "error", "warning", "info"]
ZERO_TIME = "0001-01-01T00:00:00Z"
SUMMARY_LIMIT = 1024


@dataclass(frozen=True)
class Alert:
    """One notification: its incident group, what to say and the facts behind it."""

    group: str
    """The incident group: ``job:42``, ``nodes:n3``, ``node:n3``, ``deadman:files``."""
    title: str
    text: str
    time: int
    """Event time of the incident (µs since the epoch, UTC)."""
    severity: Severity = "error"
    status: Literal["firing", "resolved"] = "firing"
    labels: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    news: tuple[str, ...] = ()
    """What the alert tells, item by item (each node blamed, each action taken and its outcome,
    a lifecycle step): an alert whose every item its group's receiver was already
    told is a repeat, and folded; one with an item of news is a message of its own in the
    group's thread (a hold, a further drain, a failed check, a node kept, a suspect named)."""

    def row(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Alert:
        return cls(**{**row, "news": tuple(row.get("news") or ())})

    @property
    def fingerprint(self) -> str:
        return hashlib.sha1(self.group.encode(), usedforsecurity=False).hexdigest()[:16]


def iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / US, dt.UTC).isoformat().replace("+00:00", "Z")


class Format:
    """A kind of receiver (``medic.actions.notifiers.registry.NotifierKind``): the defaults
    most kinds share (a URL required, no token needed, a token sent as a bearer header); each
    kind names itself and writes its ``body``."""

    kind: ClassVar[str]
    default_url: ClassVar[str] = ""
    token_required: ClassVar[str] = ""
    bearer: ClassVar[bool] = True

    @staticmethod
    def body(alert: Alert, receiver: str, token: str | None) -> dict[str, Any]:
        raise NotImplementedError


class Webhook(Format):
    """medic's own JSON, with a bearer token when one is configured."""

    kind = "webhook"

    @staticmethod
    def body(alert: Alert, receiver: str, token: str | None) -> dict[str, Any]:
        return {"receiver": receiver, **alert.details, **alert.row(), "text": alert.text}


class Slack(Format):
    """A Slack incoming webhook (its URL is the secret; no token)."""

    kind = "slack"
    bearer = False

    @staticmethod
    def body(alert: Alert, receiver: str, token: str | None) -> dict[str, Any]:
        mark = ":white_check_mark:" if alert.status == "resolved" else ":rotating_light:"
        return {"text": f"{mark} *{alert.title}*\n{alert.text}"}


class PagerDuty(Format):
    """PagerDuty's Events API v2: the routing key travels in the body."""

    kind = "pagerduty"
    default_url = "https://events.pagerduty.com/v2/enqueue"
    token_required = "a routing key"
    bearer = False

    @staticmethod
    def body(alert: Alert, receiver: str, token: str | None) -> dict[str, Any]:
        return {
            "routing_key": token or "",
            "event_action": "resolve" if alert.status == "resolved" else "trigger",
            "dedup_key": f"medic/{alert.group}",
            "payload": {
                "summary": alert.title[:SUMMARY_LIMIT],
                "source": alert.labels.get("nodes") or alert.labels.get("source") or "medic",
                "severity": alert.severity,
                "timestamp": iso(alert.time),
                "component": alert.labels.get("job_id", ""),
                "group": alert.group,
                "class": alert.labels.get("kind", ""),
                "custom_details": {"text": alert.text, **alert.labels},
            },
        }


class Alertmanager(Format):
    """The body Alertmanager's webhook_config posts, for tools that read it."""

    kind = "alertmanager"

    @staticmethod
    def body(alert: Alert, receiver: str, token: str | None) -> dict[str, Any]:
        labels = {"alertname": f"medic_{alert.labels.get('kind', 'alert')}", **alert.labels}
        annotations = {"summary": alert.title, "description": alert.text}
        return {
            "version": "4",
            "groupKey": f'{{}}:{{group="{alert.group}"}}',
            "truncatedAlerts": 0,
            "status": alert.status,
            "receiver": receiver,
            "groupLabels": {"group": alert.group},
            "commonLabels": labels,
            "commonAnnotations": annotations,
            "externalURL": "",
            "alerts": [
                {
                    "status": alert.status,
                    "labels": labels,
                    "annotations": annotations,
                    "startsAt": iso(alert.time),
                    "endsAt": ZERO_TIME if alert.status == "firing" else iso(alert.time),
                    "generatorURL": "",
                    "fingerprint": alert.fingerprint,
                }
            ],
        }


def detection_alert(payload: dict[str, Any]) -> Alert:
    """The alert for the stage's notification payload (a detection and the decisions on it):
    grouped by job, or by the nodes blamed when there is no job; its news are the nodes blamed,
    the detection's tier (a suspect confirmed) and the actions taken (or that monitor
    mode would take), each with its outcome. A later detection of the incident that blames no
    one new and has nothing new done (a consequence, a repeat) tells nothing new."""
    detection = payload.get("detection", {})
    job_id = detection.get("job_id")
    culprits = sorted(detection.get("culprits") or [])
    group = (
        f"job:{job_id}"
        if job_id
        else "nodes:" + ",".join(culprits)
        if culprits
        else (f"detection:{detection.get('id', '')}")
    )
    kind = str(detection.get("kind", "incident"))
    done = [
        f"{d['action']} {d.get('node') or d.get('job_id') or ''}: {d['status']}"
        + (f" ({d['guard']})" if d.get("guard") else "")
        for d in payload.get("decisions", [])
    ]
    news = [f"culprit {node}" for node in culprits]
    if detection.get("tier"):
        news.append(str(detection["tier"]))  # a suspect confirmed is news
    for d in payload.get("decisions", []):
        if d.get("action") == "notify":
            continue  # telling someone else is no news to this receiver
        if d.get("status") == "suppressed" and d.get("guard") != "monitor":
            continue  # not done, nor would be: nothing to tell
        outcome = "would run" if d.get("guard") == "monitor" else d["status"]
        news.append(f"{d['action']} {d.get('node') or d.get('job_id') or ''}: {outcome}")
    labels = {"kind": kind, "mode": str(payload.get("mode", ""))}
    if detection.get("tier"):
        labels["tier"] = str(detection["tier"])
    if job_id:
        labels["job_id"] = str(job_id)
    if culprits:
        labels["nodes"] = ",".join(culprits)
    hardware = kind in ("gpu_fault", "node_failure")
    return Alert(
        group=group,
        title=str(payload.get("text") or f"medic: {kind}"),
        text="\n".join([str(detection.get("summary", "")), *done]).strip(),
        time=int(detection.get("detected_at") or 0),
        severity="critical" if hardware else "error",
        labels=labels,
        details={k: v for k, v in payload.items() if k != "text"},
        news=tuple(news),
    )
