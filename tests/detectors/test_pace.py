from __future__ import annotations

import pytest

from medic.detectors.pace import PaceModel
from medic.detectors.straggler import StragglerConfig
from medic.timeutil import US


def printed_every_20_steps(gaps_s: list[float], suspect_after: int | None = None) -> PaceModel:
    """A job printing a step line every 20 steps (no step time or throughput: its pace is
    measured between the lines), the lines ``gaps_s`` apart; from the ``suspect_after``-th
    gap on, a GPU of the job looks unlike its peers (its paces are not learned)."""
    pace = PaceModel(StragglerConfig())
    time, number = 10 * US, 20
    pace.observe(("1", time, number, None, True, False, None, None, "learned"), suspect=False)
    for i, gap in enumerate(gaps_s):
        time, number = time + round(gap * US), number + 20
        step = ("1", time, number, round(gap * US), True, True, None, None, "learned")
        pace.observe(step, suspect=suspect_after is not None and i >= suspect_after)
    return pace


def test_a_pause_no_line_announced_between_two_step_lines_is_no_pace() -> None:
    # Nine minutes of a save between two lines 30 s apart: 28.5 s a step, were it a pace.
    # Learned beside the one pace of 1.5 s before it, it would be half the baseline for as
    # long as a GPU standing out keeps the job from learning, and the job would never look
    # slowed. It is neither learned nor voted.
    pace = printed_every_20_steps([30.0, 570.0, 30.0, 30.0], suspect_after=2)
    assert pace.baseline.reference == pytest.approx(1.5)
    pace.vote(10 * US + round(660 * US))
    assert pace.ratio == pytest.approx(1.0)


def test_a_job_slower_for_good_is_measured_from_its_next_interval() -> None:
    # A GPU makes every step five times slower from the fourth line on: the first slow
    # interval is taken for a pause, the ones after it are the job's pace.
    pace = printed_every_20_steps([30.0, 30.0, 150.0, 150.0, 150.0], suspect_after=2)
    pace.vote(10 * US + round(510 * US))
    assert pace.ratio == pytest.approx(5.0)
