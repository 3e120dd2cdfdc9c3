"""``nan_divergence``: a loss gone non-finite or diverged, and the healthy look-alikes that are
not (fp16 loss-scale overflow skips while the scale settles, one NaN a framework skips, a
spike, a fine-tune's near-zero loss rising back to where it began)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from medic.actions.config import load_rules
from medic.actions.rules import RuleSet
from medic.detectors.base import Detection
from medic.detectors.nan_divergence import NanDivergenceConfig, NanDivergenceDetector
from medic.ingest.base import Batch
from medic.testing.builders import at
from tests.detectors.scenarios import seconds
from tests.detectors.training import Job, run


def megatron(step: int, loss: float) -> str:
    """megatron/training/training.py training_log(), with the loss as Megatron formats it."""
    return (
        f" [2026-03-01 10:00:00] iteration {step:8d}/  500000 | consumed samples: {step * 512:12d}"
        " | elapsed time per iteration (ms): 1000.0 | learning rate: 1.5E-04 | global batch"
        f" size:   512 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 0.876 |"
    )


def hf(loss: float) -> str:
    """transformers Trainer.log() on the console: the logs dict's repr."""
    return f"{{'loss': {loss!r}, 'grad_norm': 1.25, 'learning_rate': 1e-05, 'epoch': 0.5}}"


def losses(job: Job, t0: float, values: list[float], every: float = 10.0) -> float:
    """One Megatron step line per value, ``every`` seconds apart from ``t0``; the time after."""
    t = t0
    for value in values:
        job.step += 10
        job.say(t, megatron(job.step, value))
        t += every
    return t


def detect(*jobs: Job, duration_s: float = 3600.0, **config: float) -> list[Detection]:
    detector = NanDivergenceDetector(NanDivergenceConfig(**config))  # type: ignore[arg-type]
    return run(detector, jobs, duration_s)


def healthy_curve(count: int, start: float = 10.5, floor: float = 2.2) -> list[float]:
    """A pre-training loss: a fast early drop, a slow decay, a little noise."""
    return [
        floor + (start - floor) * math.exp(-i / 40) + 0.03 * math.sin(7 * i) for i in range(count)
    ]


def test_a_loss_that_stays_nan_is_a_divergence_of_the_job_blaming_no_node() -> None:
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(30))
    losses(job, t, [math.nan] * 4)
    (found,) = detect(job)
    assert found.kind == "nan_divergence" and found.job_id == job.job_id
    assert found.culprits == () and found.ranks == ()
    assert found.onset == at(t)
    assert "NaN or infinite" in found.summary and 0.5 <= found.score <= 1.0


def test_a_loss_grown_by_orders_of_magnitude_is_a_divergence() -> None:
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(60))
    losses(job, t, [2.5, 30.0, 400.0, 5e3, 6e4, 7e5, 8e6])
    (found,) = detect(job)
    assert "grew to" in found.summary
    assert found.evidence["loss"] > 100 * found.evidence["level"]


def test_a_loss_climbing_slowly_at_every_printed_step_is_a_divergence() -> None:
    # Printed every second, the loss climbs tenfold every 300 steps: never a hundredfold over
    # the few dozen reports before the latest, but a hundredfold over its lowest level.
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(200), every=1.0)
    losses(job, t, [2.2 * 10 ** (i / 300) for i in range(1200)], every=1.0)
    (found,) = detect(job)
    assert "grew to" in found.summary
    assert found.evidence["loss"] >= 100 * found.evidence["level"]
    assert t + 600 <= seconds(found.detected_at) <= t + 620  # once it is a hundredfold


def test_hugging_face_nan_losses_read_from_the_logs_dict() -> None:
    job = Job().start(0)
    for i, value in enumerate([2.5, 2.4, math.nan, math.nan, math.nan]):
        job.say(10 + 10 * i, hf(value))
    (found,) = detect(job)
    assert found.onset == at(30)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([math.nan] + [2.3] * 5, id="one NaN the framework skipped"),
        pytest.param(
            [math.nan, 2.3, 2.3, math.inf, 2.3, 2.3, 2.3, math.nan, 2.2], id="one in a few reports"
        ),
        pytest.param([2.3, 120.0, 95.0, 2.4, 2.3, 2.3, 2.2], id="a spike of two reports"),
    ],
)
def test_what_a_framework_recovers_from_is_no_divergence(values: list[float]) -> None:
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(40))
    losses(job, t, values + healthy_curve(20, start=2.3))
    assert detect(job) == []


def test_a_fine_tune_loss_rising_from_near_zero_back_below_its_start_is_no_divergence() -> None:
    # Overfitting drives the loss to ~1e-3; a new epoch's data lifts it 100-fold, still below
    # the 0.6 it started at.
    job = Job().start(0)
    t = losses(job, 10, [0.6 * math.exp(-i / 6) + 0.001 for i in range(40)])
    losses(job, t, [0.2, 0.25, 0.3, 0.28, 0.26, 0.3, 0.29])
    assert detect(job) == []


def test_fp16_loss_scale_settling_at_the_start_and_a_skip_now_and_then_is_healthy() -> None:
    # DeepSpeed's dynamic loss scaler starts at 2**32 and halves on every other overflow
    # (hysteresis 2) until the scale fits: some 40 skipped steps in the first minute, then
    # one every few thousand steps.
    job = Job().start(0)
    scale = 2**32
    for i in range(40):
        job.say(
            1 + 0.5 * i,
            f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale}, "
            f"reducing to {scale // 2}",
        )
        scale //= 2 if i % 2 else 1
    t = losses(job, 30, healthy_curve(100))
    job.say(t, "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 8192.0")
    losses(job, t + 5, healthy_curve(20, start=2.3))
    assert detect(job) == []


def test_overflow_skips_that_never_stop_are_a_divergence() -> None:
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(20))
    for i in range(70):
        job.say(t + i, "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1")
    (found,) = detect(job)
    assert "skipped 64 steps" in found.summary and found.onset == at(t)


def test_a_framework_giving_up_fires_at_once_and_once() -> None:
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(20))
    for rank in range(4):
        job.say(
            t + 0.1 * rank,
            f"AssertionError: Rank {rank}: found NaN in local forward loss calculation. "
            f"Device: {rank}, node: n1",
        )
    (found,) = detect(job)
    assert found.onset == at(t) and "megatron_nan_loss" in found.summary
    assert found.score == pytest.approx(0.9)


def test_a_divergence_repeating_after_a_restart_from_the_checkpoint_says_so() -> None:
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(30))
    t = losses(job, t, [math.nan] * 5)
    job.end(t, "REQUEUED", 0)
    job.start(t + 120)
    job.step = 200  # back to the checkpoint saved at step 200
    t = losses(job, t + 180, healthy_curve(10, start=2.4))
    losses(job, t, [math.nan] * 5)
    first, again = detect(job)
    assert "did again after a restart" not in first.summary
    assert "attempt 1 at step" in again.summary and "not a node" in again.summary
    assert again.evidence["repeats"] == 1 and again.score > first.score
    assert again.culprits == ()


def test_the_default_rules_hold_a_diverged_job_and_neither_drain_nor_requeue() -> None:
    detection = Detection(job_id="42", kind="nan_divergence", score=0.8)
    match = RuleSet(load_rules({})).match(detection)
    assert [(i.action, i.route) for i in match.intents] == [("hold", "nan-divergence")]


def test_a_job_is_forgotten_after_it_ended() -> None:
    job = Job().start(0)
    losses(job, 10, healthy_curve(10))
    job.end(200)
    detector = NanDivergenceDetector()
    run(detector, [job], 200 + NanDivergenceConfig().forget_s + 60)
    assert detector.state_size() == 0


def test_a_seldom_printed_loss_that_stays_nan_over_many_steps_is_a_divergence() -> None:
    # Printed every 100 steps: two NaN reports in a row mean the loss stayed non-finite for
    # 100 steps, which no skipped step explains.
    job = Job().start(0)
    for i, value in enumerate([2.5, 2.4, 2.45, math.nan, math.nan]):
        job.say(10 + 300 * i, megatron(100 * (i + 1), value))
    (found,) = detect(job)
    assert found.onset == at(910) and "over 100 steps" in found.summary


def test_two_nan_reports_a_few_steps_apart_are_not_yet_a_divergence() -> None:
    job = Job().start(0)
    t = losses(job, 10, healthy_curve(20))
    losses(job, t, [math.nan, math.nan, 2.3, 2.3, 2.2])
    assert detect(job) == []


def test_a_batchs_steps_are_read_in_time_order_and_rows_without_a_job_left_out() -> None:
    rows = pl.DataFrame(
        {
            "time": pl.Series([at(3), at(2), at(1)]).cast(pl.Datetime("us", "UTC")),
            "job_id": ["7", None, "7"],
            "node": ["n1", "n1", "n1"],
            "rank": pl.Series([0, 0, 0], dtype=pl.Int32),
            "event": ["step", "startup", "step"],
            "step": [20, None, 10],
            "loss": [2.0, None, 2.5],
        }
    )
    detector = NanDivergenceDetector()
    detector.update(Batch.with_frame("progress", rows.to_arrow(), rows))
    # Step 10 then step 20: no step back, no start-up of the job's own, so no new attempt.
    assert detector.jobs["7"].attempt == 0 and detector.jobs["7"].last_step == 20
