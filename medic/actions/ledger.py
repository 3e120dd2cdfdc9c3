"""The ledger of idempotency keys: an action is claimed before it runs, and a key already
claimed is never run again (a detection handled twice, a stage restarted on the same data).

A key names the detection, the action and its target. Keys are kept for ``retention_s`` of
event time, and, with a ``path``, appended to a JSON-lines file that a restarted service reads
back; unreadable lines in it are skipped and counted, never fatal.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from pathlib import Path

from medic.timeutil import US

log = logging.getLogger(__name__)


def action_key(detection_id: str, action: str, target: str) -> str:
    text = f"{detection_id}|{action}|{target}".encode()
    return hashlib.sha1(text, usedforsecurity=False).hexdigest()[:20]


class Ledger:
    def __init__(self, path: Path | None = None, retention_s: float = 7 * 86_400) -> None:
        self.path = path
        self.retention_us = round(retention_s * US)
        self.keys: OrderedDict[str, int] = OrderedDict()
        self.skipped_lines = 0
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
            with self.path.open("a") as file:
                file.write(json.dumps({"key": key, "time": now}) + "\n")
        return True

    def _expire(self, now: int) -> None:
        while self.keys:
            key, claimed = next(iter(self.keys.items()))
            if now - claimed < self.retention_us:
                return
            del self.keys[key]

    def _load(self, path: Path) -> None:
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                self.keys[str(entry["key"])] = int(entry["time"])
            except (ValueError, KeyError, TypeError):
                self.skipped_lines += 1
        if self.skipped_lines:
            log.warning("ledger %s: skipped %d unreadable lines", path, self.skipped_lines)
