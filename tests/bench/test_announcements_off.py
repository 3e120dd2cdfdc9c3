"""bench/announcements_off.py: with every phase-announcement reader off, the healthy traps that
pause (saves announced or not, evaluations, data-loader stalls) give no confirmed detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.announcements_off import OFF, figures
from medic.backtest import run_backtest
from medic.recording import write_recording
from medic.simulate import simulate

# Small perturbed recordings of the traps whose pauses the announcements explain, or that no
# announcement explains (the rhythm traps): one job of two nodes, a quarter of an hour.
TRAPS = ("healthy_checkpoints", "healthy_silent_pauses", "healthy_loader_stalls")
PARAMS = {"job_nodes": 2, "jobs": 1, "duration_min": 15.0}


@pytest.mark.timeout(600)
def test_no_trap_is_confirmed_a_hang_without_phase_announcements(tmp_path: Path) -> None:
    paths = [
        write_recording(tmp_path / f"{name}-p1", simulate(name, 1, True, **PARAMS))
        for name in TRAPS
    ]
    found = figures(run_backtest(paths, OFF, jobs=1))
    assert found["recordings"] == len(TRAPS)
    assert (found["confirmed"], found["false_confirmed"], found["false"]) == (0, 0, [])
