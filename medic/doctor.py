"""`medic doctor`: try, for real, every dependency a config names, one line per check.

Each check does what the service will do, once and harmlessly: run the configured
``squeue``/``sinfo`` (or ask slurmrestd), find out whether this user may drain and requeue,
ask VictoriaLogs for an hour of the configured query, glob the log paths, scrape every
telemetry endpoint (or ask NVML on this host), read each notification receiver's secrets and
connect to its host, open the history for writing and bind the listen address. Nothing is
changed in Slurm and no webhook is called.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from medic.actions.config import RulesConfig
from medic.actions.notifiers.config import ReceiverConfig, SecretError
from medic.actions.registry import executor_class
from medic.config import ConfigError
from medic.config_tables import effective_settings
from medic.history import HistoryError
from medic.history.store import DuckDBStore
from medic.ingest.registry import SOURCES
from medic.ingest.sources import Sources, chosen
from medic.probe import Status
from medic.remote_report import held_by_another_process
from medic.service_config import ServiceConfig, parse_listen
from medic.settings_tree import Settings


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer."""

    name: str
    status: Status
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.name}: {self.detail}"


def diagnose(settings: Settings | Mapping[str, Any]) -> list[Check]:
    """Every check the config calls for, in the order a service starts its parts."""
    try:
        tree = Settings.load(settings)
        effective_settings(tree)
    except ConfigError as exc:
        return [Check("config", "fail", str(exc))]
    sources, rules, service = tree.sources, tree.rules, tree.service
    checks = [Check("config", "ok", f"valid; rules in {rules.mode} mode")]
    checks.extend(_sources(sources))
    checks.append(_slurm_actions(rules))
    checks.extend(_receiver(r) for r in rules.receivers)
    checks.append(_history(tree.history.path))
    checks.append(_state_dir(service))
    checks.append(_listen(service))
    return checks


def _sources(config: Sources) -> list[Check]:
    """Each source the config opens, probed; for a stream none feeds, why that matters; in
    the registry's order."""
    picked = {cls.name: table for cls, table in chosen(config)}
    streams = {SOURCES[name].stream for name in picked}
    checks: list[Check] = []
    for cls in SOURCES.values():
        if cls.name in picked:
            probes = cls.probe(picked[cls.name])
        elif cls.stream not in streams:
            probes = cls.absent()
        else:
            continue
        checks.extend(Check(cls.title, probe.status, probe.detail) for probe in probes)
    return checks


def _slurm_actions(rules: RulesConfig) -> Check:
    """The configured executor probed; a warning when it cannot do what the routes ask."""
    name = "slurm actions"
    stakes: Status = "fail" if rules.mode == "enforce" else "warn"
    later = "" if rules.mode == "enforce" else " (monitor mode: nothing is changed yet)"
    executor = executor_class(rules.slurm.executor)
    probe = executor.probe(rules.slurm)
    if probe.status != "ok":
        return Check(name, stakes, f"{probe.detail}{later}")
    wanted = {action for route in rules.routes for action in route.actions}
    missing = sorted(wanted - executor.supports)
    if missing:
        return Check(
            name,
            "warn",
            f"{probe.detail}, but the {rules.slurm.executor} executor cannot "
            f"{' or '.join(missing)}, which routes ask for",
        )
    return Check(name, "ok", probe.detail)


def _receiver(config: ReceiverConfig) -> Check:
    """Its secrets read and its host reached (a TCP connection, no request: a POST would be a
    notification). Only scheme, host and port are shown: a Slack URL's path is its secret."""
    name = f"receiver {config.name}"
    try:
        url, _ = config.endpoint(), config.token()
    except SecretError as exc:
        return Check(name, "fail", str(exc))
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    where = f"{config.kind} at {parts.scheme}://{host}:{port}"
    try:
        socket.create_connection((host, port), timeout=config.timeout_s).close()
    except OSError as exc:
        return Check(name, "fail", f"{where} unreachable ({exc.strerror or exc})")
    return Check(name, "ok", f"{where} reachable; secrets read (nothing posted)")


def _history(path: str) -> Check:
    name = "history"
    if not Path(path).exists():
        parent = Path(path).resolve().parent
        if os.access(parent, os.W_OK):
            return Check(name, "ok", f"{path} will be created")
        return Check(name, "fail", f"cannot create {path}: {parent} is not writable")
    try:
        with DuckDBStore(path):
            pass
    except HistoryError as exc:
        if held_by_another_process(exc):
            return Check(name, "ok", f"{path} is held by a running medic serve")
        return Check(name, "fail", str(exc))
    return Check(name, "ok", f"{path} writable")


def _state_dir(config: ServiceConfig) -> Check:
    """Writable as it stands; or, when missing, what serve would create and under what.

    serve creates the directory with its parents, so a missing parent is no failure; but it is
    named (a warning), because it most often means a typo or a volume that is not mounted."""
    name, use = "state dir", "(cursors, action journal)"
    path = Path(config.state_dir)
    existing = next((p for p in (path, *path.resolve().parents) if p.exists()), Path("/"))
    writable = existing.is_dir() and os.access(existing, os.W_OK)
    if existing == path:
        if writable:
            return Check(name, "ok", f"{path} writable {use}")
        return Check(name, "fail", f"{path} is not a writable directory {use}")
    if not writable:
        return Check(name, "fail", f"cannot create {path}: {existing} is not writable {use}")
    if existing == path.resolve().parent:
        return Check(name, "ok", f"{path} will be created {use}")
    return Check(
        name,
        "warn",
        f"{path} does not exist, nor does its parent {path.parent}: serve will create them "
        f"under {existing} (a typo, or a volume not mounted?) {use}",
    )


def _listen(config: ServiceConfig) -> Check:
    host, port = parse_listen(config.listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            return Check(
                "listen", "warn", f"{config.listen}: {exc.strerror} (a medic serve running?)"
            )
    return Check("listen", "ok", f"{config.listen} free for /metrics, /healthz and /report")


def print_checks(checks: list[Check], echo: Callable[[str], None]) -> bool:
    """Print one line per check, then a summary; True when none failed."""
    for check in checks:
        echo(check.line())
    failed = [c.name for c in checks if c.status == "fail"]
    warned = sum(c.status == "warn" for c in checks)
    names = ", ".join(failed) or "none"
    echo(f"{len(checks)} checks: {len(failed)} failed ({names}), {warned} warned")
    return not failed
