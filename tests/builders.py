"""Kept only for tests written before the builders became public (``medic.testing.builders``,
where new tests import them from); no builder is defined here."""

from medic.testing.builders import T0, at, batch, detection, label, log, recording, table, write

__all__ = ["T0", "at", "batch", "detection", "label", "log", "recording", "table", "write"]
