"""`medic serve`'s log: one structured line per detection and per action decision.

An operator evaluating medic in monitor mode reads here what it saw and what it would have
done, without opening the history. Lines are ``key=value`` text (logfmt: values with spaces or
quotes are JSON strings), or JSON objects, one per line, for log shippers
(``[service] log_format = "json"``). The fields are the same in both. The log goes to stderr
(journald under systemd), or to ``[service] log_file``, which medic rotates by size itself.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import logging.handlers
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from medic.detectors.base import Detection
from medic.ingest.live import printable
from medic.service_config import LogFormat as LogFormat  # re-exported
from medic.timeutil import iso

events = logging.getLogger("medic.events")
"""The logger of detections and decisions (``medic.events``)."""


def decision_of(status: str, guard: str | None) -> str:
    """What became of an action, in an operator's words: ``executed``, ``failed``,
    ``would_run`` (monitor mode stopped it), ``suppressed`` (another guard) or ``recorded``."""
    if status == "done":
        return "executed"
    if status == "suppressed":
        return "would_run" if guard == "monitor" else "suppressed"
    return status


def log_detections(detections: Iterable[Detection]) -> None:
    """One ``detection`` line per new incident."""
    for d in detections:
        _emit(
            "detection",
            {
                "kind": d.kind,
                "tier": d.tier,
                "job": d.job_id,
                "culprits": ",".join(d.culprits) or None,
                "ranks": ",".join(map(str, d.ranks)) or None,
                "score": round(d.score, 3),
                "raw_score": None if d.raw_score is None else round(d.raw_score, 3),
                "detector": d.detector,
                "detected_at": iso(d.detected_at),
                "onset": None if d.onset is None else iso(d.onset),
                "id": d.id,
                "summary": d.summary,
            },
        )


def log_decisions(actions: pa.Table) -> None:
    """One ``action`` line per decision of the actions stage (a table in the actions schema)."""
    for row in actions.to_pylist():
        decision = decision_of(row["status"], row["guard"])
        level = logging.WARNING if decision == "failed" else logging.INFO
        _emit(
            "action",
            {
                "decision": decision,
                "action": row["action"],
                "node": row["node"],
                "job": row["job_id"],
                "mode": row["mode"],
                "guard": row["guard"],
                "detection": row["detection_id"],
                "at": _time_text(row["time"]),
                "reason": row["reason"],
            },
            level,
        )


def _emit(event: str, fields: Mapping[str, Any], level: int = logging.INFO) -> None:
    kept = {k: v for k, v in fields.items() if v is not None and v != ""}
    events.log(level, event, extra={"fields": kept})


def _time_text(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return iso(int(value))


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...``, one line: control characters in the
    message (text a remote answer carried) are escaped; a traceback still follows on its own
    lines."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields: Mapping[str, Any] = getattr(record, "fields", {})
        return " ".join([line, *(f"{k}={_logfmt(v)}" for k, v in fields.items())])


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update(getattr(record, "fields", {}))
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def configure_logging(
    level: str,
    log_format: LogFormat,
    log_file: str = "",
    max_mb: float = 100.0,
    backups: int = 5,
) -> None:
    """Send every log record to stderr, or to ``log_file`` rotated at ``max_mb`` with
    ``backups`` old files kept, as text or JSON lines. OSError when the file cannot be opened."""
    handler: logging.Handler = logging.StreamHandler()
    if log_file:
        handler = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=round(max_mb * 2**20), backupCount=backups, encoding="utf-8"
        )
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _logfmt(value: Any) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\\') or not text.isprintable():
        return json.dumps(text)
    return text
