"""The report of a history that a running ``medic serve`` holds open.

DuckDB lets one process write a database file and no other process open it meanwhile, not
even read-only; so while the service runs, ``medic report`` asks the service's ``/report``
endpoint (``medic.service_http``), which reads through a connection of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from medic.history import HistoryError
from medic.service import service_config
from medic.service_http import parse_listen


def held_by_another_process(error: HistoryError) -> bool:
    """Whether opening the history failed on DuckDB's file lock (another process writes it)."""
    return "lock" in str(error).lower()


def service_url(settings: Mapping[str, Any]) -> str:
    """The base URL of the service ``[service] listen`` describes."""
    host, port = parse_listen(service_config(settings).listen)
    host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def fetch_report(url: str, kind: str, params: Mapping[str, str]) -> str:
    """The service's report page (``text`` or ``html``); HistoryError when it cannot be had."""
    path = "/report.html" if kind == "html" else "/report"
    target = url.rstrip("/") + path
    try:
        response = httpx.get(target, params=dict(params), timeout=60.0)
    except httpx.HTTPError as exc:
        raise HistoryError(f"cannot reach medic serve at {target}: {exc}") from None
    if response.status_code != 200:
        detail = response.text.strip().splitlines()[0] if response.text.strip() else ""
        raise HistoryError(f"{target} answered {response.status_code}: {detail}")
    return response.text
