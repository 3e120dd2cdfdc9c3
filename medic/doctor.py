"""`medic doctor`: try, for real, every dependency a config names, one line per check.

Each check does what the service will do, once and harmlessly: run the configured
``squeue``/``sinfo`` (or ask slurmrestd), find out whether this user may drain and requeue,
ask VictoriaLogs for an hour of the configured query, glob the log paths, scrape every
telemetry endpoint (or ask NVML on this host), read each notification receiver's secrets and
connect to its host, open the history for writing and bind the listen address. Nothing is
changed in Slurm and no webhook is called.
"""

from __future__ import annotations

import asyncio
import glob
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from medic.actions.config import RulesConfig, load_rules
from medic.actions.notifiers.config import ReceiverConfig, SecretError
from medic.actions.registry import executor_class
from medic.config import ConfigError
from medic.config_tables import effective_settings
from medic.history import HistoryError
from medic.history.config import history_config
from medic.history.store import DuckDBStore
from medic.ingest.files import FilesConfig, OutputPattern
from medic.ingest.live import wall_us
from medic.ingest.prometheus import PrometheusConfig
from medic.ingest.slurm import SlurmSource, SlurmSourceConfig
from medic.ingest.sources import SourcesConfig, sources_config
from medic.ingest.victorialogs import VictoriaLogsConfig, rfc3339_ns
from medic.remote_report import held_by_another_process
from medic.service import ServiceConfig, service_config
from medic.service_http import parse_listen

Status = Literal["ok", "warn", "fail"]
HOUR_NS = 3600 * 10**9


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer."""

    name: str
    status: Status
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.name}: {self.detail}"


def diagnose(settings: Mapping[str, Any]) -> list[Check]:
    """Every check the config calls for, in the order a service starts its parts."""
    try:
        effective_settings(settings)
    except ConfigError as exc:
        return [Check("config", "fail", str(exc))]
    sources = sources_config(settings)
    rules = load_rules(settings.get("rules"))
    service = service_config(settings)
    checks = [Check("config", "ok", f"valid; rules in {rules.mode} mode")]
    checks.extend(_logs(sources))
    checks.extend(_telemetry(sources.prometheus))
    checks.append(_slurm_state(sources.slurm))
    checks.append(_slurm_actions(rules))
    checks.extend(_receiver(r) for r in rules.receivers)
    checks.append(_history(history_config(settings).path))
    checks.append(_state_dir(service))
    checks.append(_listen(service))
    return checks


def _logs(sources: SourcesConfig) -> list[Check]:
    if sources.victorialogs is not None:
        return [_victorialogs(sources.victorialogs)]
    checks = []
    for path in (sources.files or FilesConfig()).paths:
        pattern = OutputPattern(path)
        found = [p for p in glob.glob(pattern.glob) if pattern.fields(p) is not None]
        if found:
            checks.append(Check("logs (files)", "ok", f"{len(found)} file(s) match {path}"))
        else:
            checks.append(
                Check(
                    "logs (files)",
                    "warn",
                    f"no file matches {path} yet (a job's output file appears when it starts; "
                    "check [sources.files] paths)",
                )
            )
    return checks


def _victorialogs(config: VictoriaLogsConfig) -> Check:
    name = "logs (victorialogs)"
    headers = {"AccountID": str(config.account_id), "ProjectID": str(config.project_id)}
    timeout = httpx.Timeout(config.query_timeout_s, connect=config.connect_timeout_s)
    now = wall_us() * 1000
    data = {
        "query": config.logsql,
        "start": rfc3339_ns(now - HOUR_NS),
        "end": rfc3339_ns(now),
        "limit": "1000",
    }
    try:
        with httpx.Client(base_url=config.url, headers=headers, timeout=timeout) as client:
            health = client.get("/health")
            if health.status_code != 200:
                return Check(name, "fail", f"{config.url}/health answered {health.status_code}")
            answer = client.post("/select/logsql/query", data=data)
    except httpx.HTTPError as exc:
        return Check(name, "fail", f"{config.url} unreachable ({exc or type(exc).__name__})")
    if answer.status_code != 200:
        return Check(name, "fail", f"query answered {answer.status_code}: {_first(answer.text)}")
    rows = len([line for line in answer.text.splitlines() if line.strip()])
    shown = f"{rows}{'+' if rows >= 1000 else ''} row(s) in the last hour for {config.query!r}"
    if not rows:
        return Check(name, "warn", f"{config.url} reachable, but {shown}")
    return Check(name, "ok", f"{config.url} reachable; {shown}")


def _telemetry(config: PrometheusConfig | None) -> list[Check]:
    if config is None:
        return [_nvml_here()]
    checks = []
    for target in config.targets:
        try:
            answer = httpx.get(target, timeout=config.timeout_s)
        except httpx.HTTPError as exc:
            checks.append(Check("telemetry", "fail", f"{target} unreachable ({exc})"))
            continue
        gpus = len(re.findall(r"^DCGM_FI_DEV_GPU_UTIL\{", answer.text, re.MULTILINE))
        if answer.status_code != 200:
            checks.append(Check("telemetry", "fail", f"{target} answered {answer.status_code}"))
        elif not gpus:
            checks.append(
                Check("telemetry", "fail", f"{target} answered without DCGM_FI_DEV_GPU_UTIL")
            )
        else:
            checks.append(Check("telemetry", "ok", f"{target}: {gpus} GPU(s)"))
    return checks


def _nvml_here() -> Check:
    advice = "GPU faults and stragglers need [sources.prometheus] (dcgm-exporter or medic agent)"
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # NVMLError, or a library that cannot load
        return Check(
            "telemetry", "warn", f"none configured, no NVML on this host ({exc}); {advice}"
        )
    return Check("telemetry", "warn", f"none configured; NVML here sees {count} GPU(s); {advice}")


def _slurm_state(config: SlurmSourceConfig | None) -> Check:
    name = "slurm state"
    if config is None:
        return Check(
            name,
            "warn",
            "[sources.slurm] not configured: medic cannot tell which jobs run where, nor see "
            "jobs end or nodes fail in Slurm",
        )

    async def fetch() -> tuple[list[Any], list[Any]]:
        async with httpx.AsyncClient() as client:
            source = SlurmSource(config, client=client if config.rest_url else None)
            return await source.fetch()

    how = (
        f"slurmrestd {config.rest_url}"
        if config.rest_url
        else " and ".join(" ".join(argv) for argv in (config.squeue, config.sinfo))
    )
    try:
        jobs, nodes = asyncio.run(fetch())
    except Exception as exc:  # the check reports whatever stops the service's source
        return Check(name, "fail", f"{how}: {_first(str(exc))}")
    return Check(name, "ok", f"{how} answered: {len(jobs)} job(s), {len(nodes)} node(s)")


def _slurm_actions(rules: RulesConfig) -> Check:
    """The configured executor probed; a warning when it cannot do what the routes ask."""
    name = "slurm actions"
    stakes: Status = "fail" if rules.mode == "enforce" else "warn"
    later = "" if rules.mode == "enforce" else " (monitor mode: nothing is changed yet)"
    executor = executor_class(rules.slurm.executor)
    probe = executor.probe(rules.slurm)
    if not probe.reached:
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


def _first(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def print_checks(checks: list[Check], echo: Callable[[str], None]) -> bool:
    """Print one line per check, then a summary; True when none failed."""
    for check in checks:
        echo(check.line())
    failed = [c.name for c in checks if c.status == "fail"]
    warned = sum(c.status == "warn" for c in checks)
    names = ", ".join(failed) or "none"
    echo(f"{len(checks)} checks: {len(failed)} failed ({names}), {warned} warned")
    return not failed
