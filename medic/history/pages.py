"""The report as a page, text or HTML: what ``medic report`` writes and the service's
``/report`` serves."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from medic.actions.recovery_config import LemonConfig
from medic.history.config import HistoryConfig
from medic.history.html import render_html
from medic.history.report import build_report, report_text
from medic.history.store import HistoryStore


def render_report(
    store: HistoryStore,
    config: HistoryConfig,
    kind: str,
    params: Mapping[str, str],
    lemon: LemonConfig | None = None,
) -> str:
    """The report as text or HTML, with ``top`` and ``watchdog_s`` read from ``params`` (the
    service's /report query; ValueError names a bad one) and lemon nodes scored by ``lemon``."""
    try:
        top = int(params.get("top", "10"))
        watchdog_s = float(params.get("watchdog_s", config.watchdog_timeout_s))
    except ValueError:
        raise ValueError("top must be an integer and watchdog_s a number") from None
    if top < 1 or not watchdog_s > 0:
        raise ValueError("top must be at least 1 and watchdog_s positive")
    config = dataclasses.replace(config, watchdog_timeout_s=watchdog_s)
    report = build_report(store, config, top, lemon)
    return render_html(report) if kind == "html" else report_text(report)
