"""Delivery state of notifications: one entry per receiver and incident group, persisted so that
a restarted service neither repeats a group it delivered nor forgets one it had not yet.

An entry is written ``pending`` (with its alert, never a secret) before the POST and ``sent``
after a 2xx answer; a restart redelivers what is still pending. The one window left is a crash
between the receiver's 2xx and the ``sent`` line: PagerDuty (``dedup_key``) and Alertmanager
tools (``groupKey``) fold such a repeat; medic's webhook carries ``group`` for the same purpose.
Unreadable lines are skipped and counted, never fatal.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from medic.actions.notifiers.formats import Alert
from medic.timeutil import US

log = logging.getLogger(__name__)

State = Literal["pending", "sent", "failed"]


@dataclass
class Entry:
    receiver: str
    alert: Alert
    last: int
    """Event time of the group's newest alert (the group window runs from it)."""
    state: State = "pending"
    folded: int = 0
    """Later alerts of the group that were not sent again."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.receiver, self.alert.group, self.alert.status)


class DeliveryLog:
    """Entries by (receiver, group, status), appended to a JSON-lines file when given a path."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.entries: dict[tuple[str, str, str], Entry] = {}
        self.skipped_lines = 0
        if path is not None and path.exists():
            self._load(path)

    def get(self, receiver: str, alert: Alert) -> Entry | None:
        return self.entries.get((receiver, alert.group, alert.status))

    def open(self, receiver: str, alert: Alert) -> Entry:
        entry = Entry(receiver, alert, alert.time)
        self.entries[entry.key] = entry
        self._write({"receiver": receiver, "alert": alert.row(), "state": "pending"})
        return entry

    def fold(self, entry: Entry, time: int) -> None:
        entry.last, entry.folded = max(entry.last, time), entry.folded + 1
        self._write(
            {
                "receiver": entry.receiver,
                "group": entry.alert.group,
                "status": entry.alert.status,
                "last": entry.last,
            }
        )

    def mark(self, entry: Entry, state: State) -> None:
        entry.state = state
        self._write(
            {
                "receiver": entry.receiver,
                "group": entry.alert.group,
                "status": entry.alert.status,
                "state": state,
            }
        )

    def pending(self) -> Iterator[Entry]:
        return (e for e in list(self.entries.values()) if e.state == "pending")

    def _write(self, line: dict[str, object]) -> None:
        if self.path is None:
            return
        try:
            with self.path.open("a") as file:
                file.write(json.dumps(line) + "\n")
        except OSError as exc:
            log.error("notifications: cannot write %s: %s", self.path, exc.strerror or exc)

    def _load(self, path: Path) -> None:
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
                if "alert" in row:
                    alert = Alert.from_row(row["alert"])
                    entry = Entry(str(row["receiver"]), alert, alert.time)
                    self.entries[entry.key] = entry
                    continue
                found = self.entries[(row["receiver"], row["group"], row["status"])]
                if "state" in row:
                    found.state = row["state"]
                if "last" in row:
                    found.last, found.folded = int(row["last"]), found.folded + 1
            except (ValueError, KeyError, TypeError):
                self.skipped_lines += 1
        if self.skipped_lines:
            log.warning("notifications %s: skipped %d unreadable lines", path, self.skipped_lines)


class RateLimit:
    """A token bucket per receiver: ``per_minute`` tokens, refilled continuously (wall clock:
    this is the I/O edge)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.tokens = float(per_minute)
        self.clock = clock
        self.at = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.capacity / 60)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def within(window_s: float, last: int, time: int) -> bool:
    return time - last <= window_s * US
