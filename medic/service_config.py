"""The ``[service]`` table, and the ``host:port`` form of its listen address."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from medic.config import Count, Positive, PositiveCount, from_dict

LogFormat = Literal["text", "json"]


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9464`` for IPv6) into its parts; ValueError names the problem."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"listen must be host:port, got {listen!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


@dataclass(frozen=True)
class ServiceConfig:
    """``[service]``."""

    listen: str = "127.0.0.1:9464"
    """Where /metrics and /healthz are served (loopback by default)."""
    state_dir: str = ".medic"
    """Source cursors (``cursors/``) and the action journal (``journal.jsonl``)."""
    checkpoint_interval_s: Positive = 5.0
    """How often the cursors of what went through the pipeline are saved."""
    queue_events: PositiveCount = 256
    """Events waiting for the pipeline; sources pause when it is full."""
    retry_initial_s: Positive = 1.0
    retry_max_s: Positive = 60.0
    """Backoff for a source that failed (it is retried for ever and reported meanwhile)."""
    stale_after_s: Positive = 120.0
    """/healthz reports a source unhealthy once its data lags the wall clock this much."""
    log_format: LogFormat = "text"
    """The service log: `text` lines (`key=value` fields) or `json` lines for log shippers;
    either way one line per detection and per action decision."""
    log_file: str = ""
    """Write the log to this file, rotated by medic, instead of stderr (journald)."""
    log_file_max_mb: Positive = 100.0
    """A log file this large is rotated (`serve.log` becomes `serve.log.1`, ...)."""
    log_file_backups: Count = 5
    """Rotated log files kept."""

    def __post_init__(self) -> None:
        parse_listen(self.listen)


def service_config(settings: Mapping[str, Any]) -> ServiceConfig:
    """The ``[service]`` table of a loaded config, checked (one-line ConfigError)."""
    return from_dict(ServiceConfig, settings.get("service", {}), "service")
