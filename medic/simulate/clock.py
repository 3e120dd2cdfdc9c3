"""Plan time (float seconds from the recording start) to event time and to the timestamp
texts that frameworks print."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medic.timeutil import US


@dataclass(frozen=True)
class Clock:
    t0_us: int

    def us(self, seconds: np.ndarray | Sequence[float] | float) -> np.ndarray:
        return self.t0_us + np.round(np.asarray(seconds, dtype=np.float64) * US).astype(np.int64)

    def at(self, seconds: float) -> int:
        return self.t0_us + round(seconds * US)

    def stamps(self, seconds: np.ndarray | Sequence[float], style: str) -> list[str]:
        """``ms``: ``2026-03-01 10:12:03,123`` (Python logging); ``s``: ``2026-03-01 10:12:03``;
        ``slurm``: ``2026-03-01T10:12:03``; ``torchrun``: ``2026-03-01_10:12:03``."""
        us = self.us(np.asarray(seconds, dtype=np.float64)).astype("datetime64[us]")
        if style == "ms":
            text = np.datetime_as_string(us, unit="ms")
            return [t.replace("T", " ").replace(".", ",") for t in text]
        text = np.datetime_as_string(us, unit="s")
        if style == "s":
            return [t.replace("T", " ") for t in text]
        if style == "torchrun":
            return [t.replace("T", "_") for t in text]
        return [str(t) for t in text]
