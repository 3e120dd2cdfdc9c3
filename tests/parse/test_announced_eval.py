"""Bars inside an evaluation announced before a job trained are evaluation steps."""

from __future__ import annotations

from medic.parse.progress import ProgressConfig, ProgressParser
from medic.testing.builders import batch, log

ANNOUNCED = "[INFO|trainer.py:4181] 2026-11-30 06:02:11,204 >> ***** Running Evaluation *****"
TRAINING = "[INFO|trainer.py:2414] 2026-11-30 06:02:24,771 >> ***** Running training *****"
EVAL_BAR = " 34%|███▍      | 40/117 [00:03<00:06, 12.41it/s]"
EVAL_DONE = "100%|██████████| 117/117 [00:09<00:00, 12.63it/s]"
TRAIN_BAR = "  1%|          | 17/2808 [00:25<1:09:47,  1.50s/it]"


def events(parser: ProgressParser, *messages: str, job: str = "7", start: int = 0) -> list:
    rows = [log(start + i, m, job_id=job) for i, m in enumerate(messages)]
    out = parser.parse(batch("logs", rows))
    return [] if out is None else out.frame.select("event", "step").rows()


def test_an_evaluation_announced_before_training_counts_no_training_steps() -> None:
    parser = ProgressParser()
    read = events(parser, ANNOUNCED, EVAL_BAR, EVAL_DONE, TRAINING, TRAIN_BAR)
    assert read == [
        ("eval_start", None),
        ("eval_step", 40),
        ("eval_step", 117),
        ("startup", None),
        ("step", 17),
    ]


def test_the_announcement_holds_across_batches_and_per_job() -> None:
    parser = ProgressParser()
    assert events(parser, ANNOUNCED) == [("eval_start", None)]
    assert events(parser, EVAL_BAR, start=1) == [("eval_step", 40)]
    assert events(parser, EVAL_BAR, job="8", start=2) == [("step", 40)]
    assert events(parser, TRAINING, TRAIN_BAR, start=3) == [("startup", None), ("step", 17)]


def test_an_evaluation_announced_once_the_job_trains_leaves_its_training_bar_alone() -> None:
    parser = ProgressParser()
    assert events(parser, TRAIN_BAR) == [("step", 17)]
    later = "  2%|▏         | 52/2808 [01:17<1:08:24,  1.49s/it]"
    assert events(parser, ANNOUNCED, later, start=1) == [("eval_start", None), ("step", 52)]


def test_a_scripts_phase_banners_announce_without_the_trainers_own_formats() -> None:
    """The banners are a convention of many training scripts, not the Trainer's alone: with
    the Trainer's formats off they still open the evaluation and the training."""
    parser = ProgressParser(ProgressConfig(frameworks_off=("hf",)))
    lines = ["***** Running evaluation *****", EVAL_BAR, "***** Running training *****"]
    assert events(parser, *lines, TRAIN_BAR) == [
        ("eval_start", None),
        ("eval_step", 40),
        ("startup", None),
        ("step", 17),
    ]
