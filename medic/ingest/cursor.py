"""Persisted cursors of live sources: one JSON file per source, replaced atomically.

A live source's ``checkpoint()`` is a small JSON-serialisable dict; the service saves it
after the batches it describes have been consumed and hands it back to the source on the
next start, so a restart resumes without gap or duplicate. A write goes to a temporary
file in the same directory, is fsynced and then renamed over the old one, so a crash
leaves either the old cursor or the new one, never half of either.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class CursorStore:
    """Cursors of named sources, kept as ``<directory>/<name>.json``."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def path(self, name: str) -> Path:
        return self.directory / f"{_UNSAFE.sub('_', name)}.json"

    def load(self, name: str) -> dict[str, Any] | None:
        """The saved cursor of ``name``; None when there is none or it cannot be read (logged:
        the source then starts afresh rather than the service failing)."""
        file = self.path(name)
        try:
            cursor = json.loads(file.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable cursor %s: %s", file, exc)
            return None
        if not isinstance(cursor, dict):
            log.warning("ignoring cursor %s: not a JSON object", file)
            return None
        return cursor

    def save(self, name: str, cursor: dict[str, Any]) -> None:
        """Replace the cursor of ``name`` atomically (write, fsync, rename, fsync the folder)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.path(name)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=self.directory)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(cursor, out, separators=(",", ":"))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
