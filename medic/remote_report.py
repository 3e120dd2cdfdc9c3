"""Reading a history that a running ``medic serve`` holds open.

DuckDB lets one process write a database file and no other process open it meanwhile, not
even read-only; so while the service runs, the read commands ask the service instead: ``medic
report`` its ``/report`` endpoint, ``medic nodes`` its ``/nodes`` (``medic.service_http``),
which read through a connection of their own. ``read_history`` is that choice, for any read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
import polars as pl

from medic.history import HistoryError
from medic.history.nodes import history_nodes
from medic.history.store import DuckDBStore, HistoryStore
from medic.service_config import parse_listen
from medic.settings_tree import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")


def held_by_another_process(error: HistoryError) -> bool:
    """Whether opening the history failed on DuckDB's file lock (another process writes it)."""
    return "lock" in str(error).lower()


def service_url(settings: Settings | Mapping[str, Any]) -> str:
    """The base URL of the service ``[service] listen`` describes."""
    host, port = parse_listen(Settings.load(settings).service.listen)
    host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def read_history(
    settings: Settings | Mapping[str, Any],
    path: Path,
    local: Callable[[HistoryStore], T],
    remote: Callable[[str], T],
) -> T:
    """``local`` on the history at ``path`` opened read-only; while a running service holds
    it, ``remote`` on the service's base URL ([service] listen), said on the log."""
    try:
        with DuckDBStore(path, read_only=True) as store:
            return local(store)
    except HistoryError as exc:
        if not held_by_another_process(exc):
            raise
    url = service_url(settings)
    log.warning("the history is held by medic serve; asking %s", url)
    return remote(url)


def history_node_table(
    settings: Settings | Mapping[str, Any], db_path: Path | None
) -> pl.DataFrame:
    """The history's node table scored now: read-only from the file, or from the running
    service's ``/nodes`` while it holds the history."""
    settings = Settings.load(settings)
    lemon = settings.rules.lifecycle.lemon
    path = db_path or Path(settings.history.path)
    return read_history(settings, path, lambda store: history_nodes(store, lemon), fetch_nodes)


def fetch_report(url: str, kind: str, params: Mapping[str, str]) -> str:
    """The service's report page (``text`` or ``html``); HistoryError when it cannot be had."""
    path = "/report.html" if kind == "html" else "/report"
    return _get(url, path, params).text


def fetch_nodes(url: str) -> pl.DataFrame:
    """The service's node table (``medic nodes`` without Slurm's columns)."""
    return pl.read_ipc_stream(_get(url, "/nodes", {}).content)


def _get(url: str, path: str, params: Mapping[str, str]) -> httpx.Response:
    """A 200 answer of the service at ``url``; HistoryError when it cannot be had."""
    target = url.rstrip("/") + path
    try:
        response = httpx.get(target, params=dict(params), timeout=60.0)
    except httpx.HTTPError as exc:
        raise HistoryError(f"cannot reach medic serve at {target}: {exc}") from None
    if response.status_code != 200:
        detail = response.text.strip().splitlines()[0] if response.text.strip() else ""
        raise HistoryError(f"{target} answered {response.status_code}: {detail}")
    return response
