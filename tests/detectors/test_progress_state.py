import gc
from typing import Any

import polars as pl
import pyarrow as pa

from medic.detectors.hang import HangConfig, HangDetector
from medic.detectors.progress_state import ProgressTracker, WatchedJobs, share_watched_jobs
from medic.detectors.straggler import StragglerConfig, StragglerDetector
from medic.parse.progress import PROGRESS
from medic.testing.builders import at, batch
from medic.timeutil import US

NUMBER, GAP_US, CLEAN, THROUGHPUT = 2, 3, 5, 7
"""Fields of a ``Step`` (a plain tuple) that the tests read."""


def progress(*events: tuple[Any, ...]) -> pl.DataFrame:
    """Rows (t, event, step[, framework[, rank, node]]) of job 7."""
    rows = []
    for t, event, step, *more in events:
        framework = more[0] if more else "megatron"
        rank, node = (more[1], more[2]) if len(more) > 1 else (None, "n1")
        rows.append(
            {
                "time": at(t),
                "job_id": "7",
                "node": node,
                "rank": rank,
                "framework": framework,
                "event": event,
                "step": step,
            }
        )
    frame = pl.from_arrow(pa.Table.from_pylist(rows, schema=PROGRESS))
    assert isinstance(frame, pl.DataFrame)
    return frame


def test_steps_report_their_gap_and_duplicates_count_once() -> None:
    tracker = ProgressTracker()
    steps = tracker.observe(
        progress((0, "step", 1), (2, "step", 2), (2.1, "step", 2), (4, "step", 3), (4.5, "step", 2))
    )
    assert [(s[NUMBER], s[GAP_US], s[CLEAN]) for s in steps] == [
        (1, None, False),
        (2, 2 * US, True),
        (3, 2 * US, True),
    ]
    assert tracker.jobs["7"].last_event_at == at(4.5)


def test_a_step_reported_over_two_lines_takes_its_pace_from_the_second() -> None:
    # DeepSpeed's step line, then its throughput timer's line for the same global step; a
    # print of the same step much later is no second line of the report.
    frame = progress((0, "step", 10), (0.001, "step", 10), (5, "step", 20), (9, "step", 20))
    frame = frame.with_columns(pl.Series("throughput", [None, 165.0, None, 120.0]))
    steps = ProgressTracker().observe(frame)
    assert [(s[NUMBER], s[THROUGHPUT]) for s in steps] == [(10, 165.0), (20, None)]
    # A save announced between the two lines of the report does not part them.
    frame = progress((0, "step", 10), (0.0005, "checkpoint_start", None), (0.001, "step", 10))
    frame = frame.with_columns(pl.Series("throughput", [None, None, 165.0]))
    assert [s[THROUGHPUT] for s in ProgressTracker().observe(frame)] == [165.0]


def test_a_phase_opens_on_its_start_and_closes_on_its_end_or_the_next_step() -> None:
    tracker = ProgressTracker()
    tracker.observe(progress((0, "step", 1), (10, "checkpoint_start", 1)))
    job = tracker.jobs["7"]
    assert job.phase is not None and job.phase.kind == "checkpoint"
    (step,) = tracker.observe(progress((70, "checkpoint_end", 1), (72, "step", 2)))
    assert job.phase is None
    assert job.longest_phase_us["checkpoint"] == 60 * US
    assert not step[CLEAN]  # the gap spanned the checkpoint
    assert job.phase_allowance_us("eval", 600 * US, 120 * US, 3.0) == 600 * US  # none yet
    assert job.phase_allowance_us("checkpoint", 600 * US, 10 * US, 3.0) == 180 * US
    assert job.phase_allowance_us("checkpoint", 600 * US, 300 * US, 3.0) == 300 * US


def test_a_phase_whose_end_was_delivered_first_does_not_stay_open() -> None:
    # torchtitan's "Saving the checkpoint" and "Finished saving the checkpoint" six seconds
    # later: a shipper delivered the later second first. The save is over, and it took 6 s.
    tracker = ProgressTracker()
    tracker.observe(progress((0, "step", 100, "torchtitan")))
    tracker.observe(progress((306, "checkpoint_end", None, "torchtitan")))
    tracker.observe(
        progress((300, "step", 200, "torchtitan"), (300, "checkpoint_start", None, "torchtitan"))
    )
    job = tracker.jobs["7"]
    assert job.phase is None
    assert job.longest_phase_us["checkpoint"] == 6 * US
    tracker.observe(progress((900, "checkpoint_start", None, "torchtitan")))
    assert job.phase is not None and job.phase.started == at(900)  # the next save opens


def test_a_line_without_a_step_number_does_not_end_a_phase_of_a_numbered_job() -> None:
    # Hugging Face Trainer: the bar numbers the steps, the log dict does not; the dict, on
    # stdout, may land after "Saving model checkpoint to" (stderr) in the job's output.
    tracker = ProgressTracker()
    tracker.observe(
        progress((0, "step", 99, "tqdm"), (1, "step", 100, "tqdm"), (1, "checkpoint_start", None))
    )
    assert tracker.observe(progress((1.01, "step", None, "hf"))) == []
    job = tracker.jobs["7"]
    assert job.phase is not None and job.phase.kind == "checkpoint"
    (step,) = tracker.observe(progress((140, "step", 101, "tqdm")))
    assert job.phase is None and job.longest_phase_us["checkpoint"] == 139 * US
    assert not step[CLEAN]
    # A job that numbers no step: such a line is its only sign of training again.
    tracker = ProgressTracker()
    tracker.observe(progress((0, "step", None, "hf"), (1, "checkpoint_start", None)))
    (step,) = tracker.observe(progress((30, "step", None, "hf")))
    assert tracker.jobs["7"].phase is None and not step[CLEAN]


def test_evaluation_bars_of_another_framework_stay_inside_the_eval_phase() -> None:
    # HF Trainer: "***** Running Evaluation *****", then the eval tqdm bar counts its own
    # batches (1..20 < the training step), then the eval dict, then training goes on.
    tracker = ProgressTracker()
    steps = tracker.observe(
        progress(
            (0, "step", 500, "tqdm"),
            (1, "eval_start", None, "hf"),
            (2, "step", 1, "tqdm"),
            (3, "step", 20, "tqdm"),
            (4, "eval_end", None, "hf"),
            (5, "step", 501, "tqdm"),
        )
    )
    assert [s[NUMBER] for s in steps] == [500, 501]
    assert tracker.jobs["7"].longest_phase_us["eval"] == 3 * US


def test_a_counter_that_starts_over_is_a_new_step_but_not_a_clean_gap() -> None:
    tracker = ProgressTracker()
    steps = tracker.observe(progress((0, "step", 1000, "lightning"), (2, "step", 0, "lightning")))
    assert [(s[NUMBER], s[CLEAN]) for s in steps] == [(1000, False), (0, False)]


def test_ranks_remember_their_last_step_and_node() -> None:
    tracker = ProgressTracker()
    tracker.observe(
        progress((0, "step", 5, "megatron", 0, "a"), (0.1, "step", 5, "megatron", 9, "b"))
    )
    tracker.observe(progress((2, "step", 6, "megatron", 0, "a")))
    assert tracker.jobs["7"].rank_steps == {0: (6, "a"), 9: (5, "b")}


def test_training_end_finishes_and_a_new_step_revives() -> None:
    tracker = ProgressTracker()
    tracker.observe(progress((0, "step", 1), (1, "train_end", None)))
    assert tracker.jobs["7"].finished_at == at(1)
    tracker.observe(progress((5, "step", 2)))
    assert tracker.jobs["7"].finished_at is None


def test_watched_jobs_are_released_at_the_end_and_ended_jobs_stay_ignored() -> None:
    jobs = WatchedJobs(forget_after_s=100)
    jobs.observe_progress(progress((0, "step", 1)))
    ended = jobs.observe_scheduler(
        batch("scheduler", [{"time": at(1), "kind": "job", "job_id": "7", "state": "COMPLETED"}])
    )
    assert ended == ["7"] and len(jobs.progress) == 0
    assert jobs.observe_progress(progress((2, "step", 2))) == []  # a late line
    assert jobs.release(at(200)) == [] and len(jobs) == 0  # the tombstone expired


def test_silent_jobs_are_released_after_forget_after_s() -> None:
    jobs = WatchedJobs(forget_after_s=100)
    jobs.observe_progress(progress((0, "step", 1)))
    assert jobs.release(at(50)) == []
    assert jobs.release(at(101)) == ["7"]


def test_detectors_sharing_a_watch_each_get_the_answer_the_first_call_got() -> None:
    jobs = WatchedJobs(forget_after_s=100)
    rows = progress((0, "step", 1), (2, "step", 2))
    first = jobs.observe_progress(rows)
    assert [s[NUMBER] for s in first] == [1, 2] and jobs.observe_progress(rows) == first
    assert jobs.progress.jobs["7"].last_step == 2
    assert [s[NUMBER] for s in jobs.observe_progress(progress((4, "step", 3)))] == [3]
    ended = batch("scheduler", [{"time": at(5), "kind": "job", "job_id": "7", "state": "FAILED"}])
    assert jobs.observe_scheduler(ended) == ["7"] and jobs.observe_scheduler(ended) == ["7"]
    assert jobs.release(at(300)) == [] and jobs.release(at(300)) == []


def test_hang_and_straggler_share_a_watch_only_when_they_forget_alike() -> None:
    hang, straggler = HangDetector(), StragglerDetector()
    share_watched_jobs([hang, straggler])
    assert hang.jobs is straggler.jobs
    hang = HangDetector(HangConfig(forget_after_s=600))
    straggler = StragglerDetector(StragglerConfig())
    share_watched_jobs([hang, straggler])
    assert hang.jobs is not straggler.jobs


def test_steps_are_plain_tuples_that_the_garbage_collector_lets_go_of() -> None:
    # A tuple subclass (a NamedTuple) stays tracked: the steps of a large batch would reach the
    # collector's oldest generation and set off full collections of the whole heap.
    steps = ProgressTracker().observe(progress(*((t, "step", t) for t in range(1, 50))))
    gc.collect()
    assert len(steps) == 49 and not any(gc.is_tracked(step) for step in steps)
