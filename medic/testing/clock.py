"""Clocks a test moves by hand, for code that takes its clock (and its sleep) as an argument.

``FakeClock`` stands in for ``time.monotonic``/``time.time`` and ``time.sleep``: it reads
seconds and moves only when told, or by what the code under test sleeps. ``TickingClock``
stands in for a clock of event time in microseconds (``medic.timeutil.now_us``) that moves on
by a fixed step at every read, as a poll loop sees time pass between its polls.
"""

from __future__ import annotations


class FakeClock:
    """Seconds that move only by ``advance`` and ``sleep``; ``sleeps`` lists what was slept."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        """What the code under test calls instead of ``time.sleep``: no wait, the clock moves."""
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


class TickingClock:
    """Microseconds since the epoch that move on by ``step_us`` at every read."""

    def __init__(self, start_us: int, step_us: int = 1_000_000) -> None:
        self.now = start_us
        self.step_us = step_us

    def __call__(self) -> int:
        self.now += self.step_us
        return self.now
