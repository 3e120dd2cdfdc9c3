from __future__ import annotations

import pytest

from medic.detectors.pace import PaceModel
from medic.detectors.straggler import StragglerConfig
from medic.timeutil import US


def printed_every_20_steps(gaps_s: list[float], suspect_after: int | None = None) -> PaceModel:
    """A job printing a step line every 20 steps (no step time or throughput: its pace is
    measured between the lines), the lines ``gaps_s`` apart; from the ``suspect_after``-th
    gap on, a GPU of the job looks unlike its peers (its paces are not learned). The GPUs are
    compared with their peers every 30 s (``PaceModel.settle``)."""
    config = StragglerConfig()
    window = round(config.window_s * US)
    pace = PaceModel(config)
    time, number, odd_from = 10 * US, 20, None
    pace.observe(("1", time, number, None, True, False, None, None, "learned"), suspect=False)
    judged = time // window * window
    for i, gap in enumerate(gaps_s):
        time, number = time + round(gap * US), number + 20
        while judged + window <= time:
            judged += window
            pace.settle(judged, odd=odd_from is not None and judged >= odd_from)
        suspect = suspect_after is not None and i >= suspect_after
        if suspect and odd_from is None:
            odd_from = time
        step = ("1", time, number, round(gap * US), True, True, None, None, "learned")
        pace.observe(step, suspect=suspect)
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


def test_a_pace_is_learned_once_its_gpus_were_compared_and_dropped_if_one_stood_out() -> None:
    # A job printing every step slows as a GPU throttles (0.5 s a step, then 0.75 s); the GPU
    # stands out from its peers only in the second window after. The slow paces of both
    # windows are never learned; had they been, 160 of them would have moved the median.
    config = StragglerConfig()
    pace = PaceModel(config)
    window = round(config.window_s * US)

    def steps(first: int, count: int, start: int, seconds: float) -> None:
        for i in range(count):
            at = start + round(i * seconds * US)
            step = ("1", at, first + i, round(seconds * US), True, True, seconds, None, "x")
            pace.observe(step, suspect=False)

    steps(1, 600, 0, 0.5)
    for end in range(window, 300 * US + 1, window):
        pace.settle(end, odd=False)
    assert pace.baseline.reference == pytest.approx(0.5)
    steps(601, 160, 300 * US, 0.75)
    pace.settle(300 * US + window, odd=False)
    pace.settle(300 * US + 2 * window, odd=True)
    for later in range(3, 8):
        pace.settle(300 * US + later * window, odd=False)
    assert pace.baseline.reference == pytest.approx(0.5)
