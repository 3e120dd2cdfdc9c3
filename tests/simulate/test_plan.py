"""A run's plan: steps, pauses, faults and slowdowns turn into a consistent schedule."""

import numpy as np

from medic.simulate.plan import Mode, paint_modes
from medic.simulate.world import World


def world(seconds: int = 3600) -> World:
    return World(np.random.default_rng(7), seconds, nodes=4)


def test_a_run_keeps_making_progress_to_the_end_even_when_much_slower() -> None:
    w = world()
    run = w.new_job(2, start=-600.0, step_s=2.0)
    assert run is not None
    run.slowdowns.append((600.0, 2.5))
    run.invalidate()
    sched = run.schedule
    assert sched.ends[-1] > w.seconds - 2.0 * 2.5 * 4
    before = sched.durations[sched.ends < 500].mean()
    after = sched.durations[sched.ends > 900].mean()
    assert 2.2 < after / before < 2.8


def test_pauses_stop_progress_and_a_fault_truncates_everything_after_it() -> None:
    w = world()
    run = w.new_job(2, start=0.0, step_s=1.0)
    assert run is not None
    sched = run.schedule
    assert sched.steps[0] == run.first_step + 1
    for pause in sched.pauses:
        inside = (sched.ends > pause.start) & (sched.ends < pause.end)
        assert not inside.any()
    stop = float(sched.ends[len(sched.ends) // 2]) + 0.5
    run.stop = stop
    run.invalidate()
    assert run.schedule.ends.max() <= stop
    assert all(p.end <= stop for p in run.schedule.pauses)


def test_modes_follow_the_plan() -> None:
    w = world()
    run = w.new_job(2, start=100.0, step_s=1.0)
    assert run is not None
    run.stop = 1800.0
    run.exit_at, run.end = 2400.0, 2410.0
    run.invalidate()
    modes = paint_modes(run, w.seconds)
    assert (modes[:100] == Mode.OFF).all()
    assert modes[101] == Mode.STARTUP
    assert modes[int(run.train_start) + 2] in (Mode.TRAIN, Mode.CKPT, Mode.EVAL)
    assert (modes[1800:2400] == Mode.WAIT).all()
    assert (modes[2400:2410] == Mode.EXITED).all()
    assert (modes[2410:] == Mode.OFF).all()
