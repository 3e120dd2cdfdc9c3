"""The ledger of idempotency keys: an action is claimed before it runs, and a key already
claimed is never run again (a detection handled twice, a stage restarted on the same data).

A key names the incident, the action and its target. Keys are kept for ``retention_s`` of
event time, and, with a ``path``, appended to a JSON-lines file that a restarted service reads
back; unreadable lines in it are skipped and counted, never fatal. The file is compacted (the
keys still kept written to a new file that replaces it atomically) when it holds more than
``compact_factor`` times the lines it needs, so it does not grow for ever.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import OrderedDict
from pathlib import Path

from medic.timeutil import US

log = logging.getLogger(__name__)

MIN_COMPACT_LINES = 1024
"""A file shorter than this is never compacted (rewriting it would cost more than it saves)."""


def action_key(incident: str, action: str, target: str) -> str:
    text = f"{incident}|{action}|{target}".encode()
    return hashlib.sha1(text, usedforsecurity=False).hexdigest()[:20]


class Ledger:
    def __init__(
        self, path: Path | None = None, retention_s: float = 7 * 86_400, compact_factor: int = 2
    ) -> None:
        self.path = path
        self.retention_us = round(retention_s * US)
        self.compact_factor = compact_factor
        self.keys: OrderedDict[str, int] = OrderedDict()
        self.skipped_lines = 0
        self.file_lines = 0
        """Lines in the file (kept keys, expired ones and unreadable ones)."""
        if path is not None and path.exists():
            self._load(path)

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def claim(self, key: str, now: int) -> bool:
        """True the first time ``key`` is claimed (the action may run); False ever after."""
        self._expire(now)
        if key in self.keys:
            return False
        self.keys[key] = now
        if self.path is not None:
            if self.file_lines >= max(MIN_COMPACT_LINES, self.compact_factor * len(self.keys)):
                self.compact()
            else:
                with self.path.open("a") as file:
                    file.write(_line(key, now))
                    file.flush()
                    os.fsync(file.fileno())
                self.file_lines += 1
        return True

    def compact(self) -> None:
        """Rewrite the file with the kept keys only; a crash midway leaves the old file whole."""
        if self.path is None:
            return
        partial = self.path.with_name(self.path.name + ".compacting")
        with partial.open("w") as file:
            file.writelines(_line(key, time) for key, time in self.keys.items())
            file.flush()
            os.fsync(file.fileno())
        partial.replace(self.path)
        self.file_lines = len(self.keys)

    def _expire(self, now: int) -> None:
        while self.keys:
            key, claimed = next(iter(self.keys.items()))
            if now - claimed < self.retention_us:
                return
            del self.keys[key]

    def _load(self, path: Path) -> None:
        for line in path.read_text().splitlines():
            self.file_lines += 1
            try:
                entry = json.loads(line)
                self.keys[str(entry["key"])] = int(entry["time"])
            except (ValueError, KeyError, TypeError):
                self.skipped_lines += 1
        if self.skipped_lines:
            log.warning("ledger %s: skipped %d unreadable lines", path, self.skipped_lines)


def _line(key: str, time: int) -> str:
    return json.dumps({"key": key, "time": time}) + "\n"
