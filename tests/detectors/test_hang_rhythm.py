"""A job's own rhythm of pauses (``medic.detectors.hang_rhythm``)."""

from __future__ import annotations

from typing import Any

from medic.detectors.hang import HangDetector
from medic.detectors.hang_rhythm import PAUSE, JobRhythm, kind_of
from medic.testing.builders import at
from medic.timeutil import US
from tests.detectors.training import (
    COMPUTE,
    EVAL,
    IDLE,
    SPIN,
    GpuState,
    Job,
    constant,
    megatron_line,
    run,
)


def printed(rhythm: JobRhythm, first: int, last: int, every: int) -> None:
    for step in range(first, last + 1, every):
        rhythm.step(step)


def test_two_pauses_give_the_interval_and_the_next_on_it_is_expected() -> None:
    rhythm = JobRhythm()
    printed(rhythm, 10, 500, 10)
    rhythm.learn(500, 45 * US, PAUSE)
    assert rhythm.expected_us(1000, PAUSE, 3.0) == 0  # one pause: no rhythm yet
    printed(rhythm, 510, 1000, 10)
    rhythm.learn(1000, 40 * US, PAUSE)
    assert rhythm.expected_us(1500, PAUSE, 3.0) == 135 * US  # three times the longest
    assert rhythm.expected_us(2500, PAUSE, 3.0) == 135 * US
    assert rhythm.expected_us(1510, PAUSE, 3.0) == 0  # a silence off the rhythm
    assert rhythm.expected_us(1490, PAUSE, 3.0) == 0


def test_a_pause_between_printed_steps_follows_the_step_printed_before_it() -> None:
    # Saves every 25 steps of a job printing every 10: the pause follows steps 20, 50, 70 ...
    rhythm = JobRhythm()
    for step in (20, 50, 70, 100):
        rhythm.learn(step, 60 * US, PAUSE)
    assert rhythm.expected_us(120, PAUSE, 2.0) == 120 * US
    assert rhythm.expected_us(110, PAUSE, 2.0) == 0
    rhythm.learn(120, 60 * US, PAUSE)
    assert rhythm.expected_us(150, PAUSE, 2.0) == 120 * US


def test_the_history_says_how_often_a_pause_this_long_came_and_whether_on_rhythm() -> None:
    rhythm = JobRhythm()
    for step, seconds in ((100, 40), (200, 90), (300, 45)):
        rhythm.learn(step, seconds * US, PAUSE)
    assert [rhythm.precedents(s * US) for s in (30, 45, 60, 100)] == [3, 2, 1, 0]
    assert rhythm.on_rhythm(400) and rhythm.on_rhythm(500)
    assert not rhythm.on_rhythm(450) and not rhythm.on_rhythm(None)
    assert not JobRhythm().on_rhythm(400)  # no pause yet: no rhythm


def test_a_stall_of_the_same_gpu_is_expected_once_it_came_back_by_itself() -> None:
    stall = kind_of([("n2", 3)], ("n1", 0))
    other = kind_of([("n3", 1)], ("n1", 0))
    rhythm = JobRhythm()
    printed(rhythm, 1, 40, 1)
    assert rhythm.expected_us(40, stall, 3.0) == 0  # the first stall: no allowance
    rhythm.learn(40, 100 * US, stall)
    assert rhythm.expected_us(97, stall, 3.0) == 300 * US  # at any step
    assert rhythm.expected_us(97, other, 3.0) == 0  # another GPU apart: not that kind
    assert rhythm.expected_us(97, PAUSE, 3.0) == 0


def test_the_writer_apart_or_several_gpus_apart_is_a_scheduled_pause() -> None:
    assert kind_of([("n1", 0)], ("n1", 0)) == PAUSE
    assert kind_of([("n1", 0), ("n2", 0)], ("n1", 0)) == PAUSE
    assert kind_of([], None) == PAUSE


def test_only_the_latest_pauses_are_kept() -> None:
    rhythm = JobRhythm(keep=4)
    for step in range(100, 1100, 100):
        rhythm.learn(step, US, PAUSE)
    assert rhythm.steps.tolist() == [700, 800, 900, 1000]


# --- in the hang detector -------------------------------------------------------------------


def _stalled(gpu_apart: tuple[str, int]) -> GpuState:
    """One rank's data loader stalls: its GPU idle, saying so, the others spin."""
    return lambda t, node, gpu: IDLE if (node, gpu) == gpu_apart else SPIN


def _with_stalls(stalls: list[tuple[float, tuple[str, int]]], end: float) -> Job:
    """A job printing every 2 s whose listed ranks stall for 110 s at the given times; the
    step in which the stall came then computes for 10 s before its line."""
    job = Job().start().steps(10, stalls[0][0]).telemetry(0, stalls[0][0], constant(COMPUTE))
    for i, (t, who) in enumerate(stalls):
        job.telemetry(t, t + 110, _stalled(who))
        resume = stalls[i + 1][0] if i + 1 < len(stalls) else end
        job.steps(t + 120, resume).telemetry(t + 110, resume, constant(COMPUTE))
    return job


def test_a_gpu_that_stalled_before_and_came_back_is_expected_to_stall_again() -> None:
    # The first 110 s stall is past what a stall may last unknown (90 s): a false hang that
    # nothing tells from a rank stuck in host code. The same GPU's next ones are its rhythm.
    job = _with_stalls([(400, ("n2", 1)), (900, ("n2", 1)), (1400, ("n2", 1))], 1900)
    found = run(HangDetector(), [job], 1900)
    assert [f.detected_at < at(900) for f in found] == [True]


def test_another_gpu_stalling_is_not_the_same_kind() -> None:
    job = _with_stalls([(400, ("n2", 1)), (900, ("n3", 2))], 1400)
    found = run(HangDetector(), [job], 1400)
    assert len(found) == 2
    assert "n3 GPU 2" in found[1].summary


def test_a_stall_on_rhythm_past_its_allowance_still_fires() -> None:
    # Stalls of 110 s before: three times that, then a hang of the same rank is reported.
    job = _with_stalls([(400, ("n2", 1)), (900, ("n2", 1))], 1400)
    job.telemetry(1400, 2200, _stalled(("n2", 1)))
    found = run(HangDetector(), [job], 2200)
    assert len(found) == 2
    assert at(1400 + 250) <= found[1].detected_at <= at(1400 + 3 * 110 + 60)


def _train(job: Job, t: float, count: int) -> float:
    """``count`` steps printed every 2 s from ``t``, GPUs computing; the time after them."""
    job.telemetry(t, t + 2 * count, constant(COMPUTE))
    for _ in range(count):
        job.step += 1
        job.say(t, megatron_line(job.step, 2000.0))
        t += 2.0
    return t


def test_a_pause_at_the_jobs_own_step_interval_is_expected_once_two_gave_it() -> None:
    # Every 150 steps the GPUs spin in a wait for 60 s, announced by nothing, then train 20 s
    # before the next line: the spell ended before the step came, so only the rhythm says
    # it was the job's own.
    job = Job().start()
    t, starts = _train(job, 10.0, 150), []
    for _ in range(5):
        starts.append(t)
        job.telemetry(t, t + 60, constant(SPIN)).telemetry(t + 60, t + 80, constant(COMPUTE))
        t = _train(job, t + 80, 150)
    found = run(HangDetector(), [job], t)
    assert len(found) == 2  # the first two: no rhythm yet
    assert found[1].detected_at < at(starts[2])
    # What the calibration reads of them: the second came after one pause as long as itself.
    history = [{k: f.evidence[k] for k in ("pauses", "like_pauses", "on_rhythm")} for f in found]
    assert history[0] == {"pauses": 0, "like_pauses": 0, "on_rhythm": False}
    assert history[1]["pauses"] == 1 and history[1]["like_pauses"] == 1
    assert found[1].evidence["longest_pause_s"] >= 60.0


def test_a_rank_at_work_that_the_others_wait_for_is_no_corroboration() -> None:
    # Rank 0 evaluates alone, the others spin in the next collective, 55 s: the silence is
    # judged by the job's step gaps (60 s at least), not the 45 s of GPUs corroborating.
    def evaluating(t: float, node: str, gpu: int) -> dict[str, Any]:
        return EVAL if (node, gpu) == ("n1", 0) else SPIN

    job = Job().start().steps(10, 400).telemetry(0, 400, constant(COMPUTE))
    job.telemetry(400, 455, evaluating).steps(455, 800).telemetry(455, 800, constant(COMPUTE))
    assert run(HangDetector(), [job], 800) == []
    deadlock = Job().start().steps(10, 400).telemetry(0, 400, constant(COMPUTE))
    deadlock.telemetry(400, 455, constant(SPIN))
    deadlock.steps(455, 800).telemetry(455, 800, constant(COMPUTE))
    assert len(run(HangDetector(), [deadlock], 800)) == 1
