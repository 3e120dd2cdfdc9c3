"""Delivery state of notifications: one entry per message (a receiver's thread of an incident
group, and the news that opened it), persisted so that a restarted service neither repeats a
message it delivered nor forgets one it had not yet. Only a true repeat (no item of news the
thread was not told) is folded into the thread's newest message.

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
    """One message: the alert that opened it, and the repeats folded into it."""

    receiver: str
    alert: Alert
    last: int
    """Event time of the message's newest alert (the group window runs from it)."""
    state: State = "pending"
    folded: int = 0
    """Later alerts of the group that were not sent again."""

    @property
    def thread(self) -> tuple[str, str, str]:
        """The receiver's thread of the incident group: (receiver, group, status)."""
        return (self.receiver, self.alert.group, self.alert.status)

    @property
    def news(self) -> str:
        return "\n".join(sorted(self.alert.news))

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (*self.thread, self.news)


class DeliveryLog:
    """Messages by (receiver, group, status, news), appended to a JSON-lines file when given a
    path; per thread, the newest message and every item of news it was told."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.entries: dict[tuple[str, str, str, str], Entry] = {}
        self.latest: dict[tuple[str, str, str], Entry] = {}
        self.told: dict[tuple[str, str, str], set[str]] = {}
        self.skipped_lines = 0
        if path is not None and path.exists():
            self._load(path)

    def get(self, receiver: str, alert: Alert) -> Entry | None:
        """The thread's newest message when ``alert`` tells nothing the thread was not told (a
        repeat, to fold into it); None when it brings news (or opens the thread)."""
        thread = (receiver, alert.group, alert.status)
        latest = self.latest.get(thread)
        if latest is None or not set(alert.news) <= self.told.get(thread, set()):
            return None
        return latest

    def open(self, receiver: str, alert: Alert) -> Entry:
        entry = self._add(Entry(receiver, alert, alert.time))
        self._write({"receiver": receiver, "alert": alert.row(), "state": "pending"})
        return entry

    def fold(self, entry: Entry, time: int) -> None:
        entry.last, entry.folded = max(entry.last, time), entry.folded + 1
        self._write({**self._names(entry), "last": entry.last})

    def mark(self, entry: Entry, state: State) -> None:
        entry.state = state
        self._write({**self._names(entry), "state": state})

    def _add(self, entry: Entry) -> Entry:
        self.entries[entry.key] = entry
        self.latest[entry.thread] = entry
        self.told.setdefault(entry.thread, set()).update(entry.alert.news)
        return entry

    @staticmethod
    def _names(entry: Entry) -> dict[str, str]:
        return {
            "receiver": entry.receiver,
            "group": entry.alert.group,
            "status": entry.alert.status,
            "news": entry.news,
        }

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
                    self._add(Entry(str(row["receiver"]), alert, alert.time))
                    continue
                key = (row["receiver"], row["group"], row["status"], row.get("news", ""))
                found = self.entries[key]
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
