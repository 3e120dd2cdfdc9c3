"""Dead-man alert: medic itself stopped receiving data.

Each source reports a watermark (the event time it is complete up to). A source whose watermark
has not moved for ``after_s`` of wall clock (or never arrived) is stalled: the configured
receivers get one alert per stall, and one "resolved" alert when data flows again. This runs at
the service's I/O edge, on the wall clock, since a stalled source produces no event time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Literal

from medic.actions.model import Outcome
from medic.actions.notifiers.formats import Alert, Severity
from medic.actions.recovery_config import DeadmanConfig
from medic.timeutil import US

log = logging.getLogger(__name__)

Send = Callable[[str, Alert], Outcome]


class DeadMan:
    """Watches sources' watermarks (see the module docstring)."""

    def __init__(self, config: DeadmanConfig, send: Send | None = None) -> None:
        self.config = config
        self.send = send
        self.moved: dict[str, tuple[int | None, int]] = {}
        """Per source: the watermark last seen and the wall time it last changed."""
        self.stalled: dict[str, int] = {}
        """Stalled sources and the wall time their stall was reported."""

    def check(self, watermarks: Mapping[str, int | None], now: int) -> list[str]:
        """Look at every source's watermark at wall time ``now`` (µs); the stalled sources."""
        for name, mark in watermarks.items():
            seen = self.moved.get(name)
            if seen is None or mark != seen[0]:
                self.moved[name] = (mark, now)
                if name in self.stalled and mark is not None:
                    self._resolved(name, now)
                continue
            quiet = now - seen[1]
            if name not in self.stalled and quiet >= self.config.after_s * US:
                self._stalled(name, mark, quiet, now)
        return sorted(self.stalled)

    def _stalled(self, name: str, mark: int | None, quiet: int, now: int) -> None:
        self.stalled[name] = now
        where = "no data yet" if mark is None else "its watermark stopped"
        limit = self.config.after_s
        text = f"source {name}: {where} for {quiet / US:.0f} s (deadman after_s = {limit:g})"
        log.error("dead-man: %s", text)
        self._tell(name, f"medic: no data from {name}", text, now, "firing")

    def _resolved(self, name: str, now: int) -> None:
        since = self.stalled.pop(name)
        text = f"source {name} delivers again after {(now - since) / US:.0f} s"
        log.info("dead-man: %s", text)
        self._tell(name, f"medic: {name} delivers again", text, now, "resolved")

    def _tell(
        self, name: str, title: str, text: str, now: int, status: Literal["firing", "resolved"]
    ) -> None:
        if self.send is None:
            return
        severity: Severity = "critical" if status == "firing" else "info"
        labels = {"kind": "deadman", "source": name}
        alert = Alert(f"deadman:{name}", title, text, now, severity, status, labels)
        for receiver in self.config.notify:
            outcome = self.send(receiver, alert)
            if not outcome.ok:
                log.warning("dead-man alert to %s: %s", receiver, outcome.detail)
