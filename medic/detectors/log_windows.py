"""Judging windows for a straggler detector that sees no GPU telemetry: logs alone.

The straggler detector judges its jobs once per closed telemetry window. Where no GPU
telemetry comes at all (``medic diagnose`` of log files, a site that ships logs only), no
window ever closes, and what the logs say of slow ranks (``medic.parse.rank_timings``: NVRx's
relative scores and verdicts, Megatron's per-rank timers and StragglerDetector) would never be
judged. ``LogWindows`` gives such a detector a window end every ``window_s`` of event time for
as long as no GPU sample has been seen, and none once one has (the telemetry windows then take
over, so the judging cadence with telemetry is unchanged).
"""

from __future__ import annotations

from medic.timeutil import US


class LogWindows:
    """Window ends in event time while no GPU telemetry has arrived."""

    def __init__(self, window_s: float) -> None:
        self.window_us = round(window_s * US)
        self.gpu_seen = False
        self._next: int | None = None

    def saw_gpu(self) -> None:
        """GPU telemetry arrived: its own windows judge from now on."""
        self.gpu_seen = True

    def due(self, watermark: int) -> int | None:
        """The end of the window that ``watermark`` closes (the latest, when it closes
        several), or None."""
        if self.gpu_seen:
            return None
        if self._next is None:
            self._next = watermark + self.window_us
            return None
        if watermark < self._next:
            return None
        passed = (watermark - self._next) // self.window_us
        end = self._next + passed * self.window_us
        self._next = end + self.window_us
        return end
