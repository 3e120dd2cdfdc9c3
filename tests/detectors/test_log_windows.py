"""Judging windows for a straggler detector with logs alone."""

from __future__ import annotations

from medic.detectors.log_windows import LogWindows
from medic.timeutil import US


def test_a_window_ends_every_window_s_until_gpu_telemetry_arrives() -> None:
    windows = LogWindows(30.0)
    assert windows.due(100 * US) is None  # the first watermark starts the clock
    assert windows.due(129 * US) is None
    assert windows.due(130 * US) == 130 * US
    assert windows.due(200 * US) == 190 * US  # one judgement for the windows a jump closes
    assert windows.due(219 * US) is None
    windows.saw_gpu()
    assert windows.due(400 * US) is None
