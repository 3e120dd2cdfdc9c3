"""Progress extraction from real framework lines (each case names the source that prints it)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from medic.config import ConfigError, from_dict
from medic.detectors.registry import DETECTORS
from medic.ingest.base import Batch
from medic.parse.prefixes import MAX_ROUNDS, PrefixStripper
from medic.parse.progress import (
    ANSI_ESCAPE,
    FORMATS,
    LOOKALIKE,
    PHASE_EVENTS,
    PROGRESS,
    ProgressConfig,
    ProgressFormat,
    ProgressParser,
    _bar_seconds,
)
from medic.pipeline import Pipeline
from medic.testing.builders import batch, log
from tests.corpus.bundled import bundled_logs
from tests.corpus.progress import load_corpus


def parse(*messages: str, parser: ProgressParser | None = None, **extra: Any) -> list[dict]:
    rows = [log(i, m, **extra) for i, m in enumerate(messages)]
    out = (parser or ProgressParser()).parse(batch("logs", rows))
    if out is None:
        return []
    assert out.data.schema == PROGRESS
    return out.frame.drop("time", "job_id", "node").to_dicts()


def one(message: str, **extra: Any) -> dict:
    rows = parse(message, **extra)
    assert len(rows) == 1, rows
    return rows[0]


# Megatron-LM megatron/training/training.py training_log(): printed by the last rank.
MEGATRON_STEP = (
    " [2026-03-01 10:12:03] iteration      100/  500000 | consumed samples:        51200 |"
    " elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 180.3 |"
    " learning rate: 1.500000E-04 | global batch size:   512 | lm loss: 2.345678E+00 |"
    " loss scale: 1.0 | grad norm: 0.876 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 |"
)


def test_megatron_iteration_line() -> None:
    row = one(MEGATRON_STEP)
    assert row["framework"] == "megatron" and row["event"] == "step"
    assert row["step"] == 100
    assert row["step_time_s"] == pytest.approx(1.2345)
    assert row["throughput"] == pytest.approx(180.3)
    assert row["throughput_unit"] == "TFLOP/s/GPU"


def test_an_mmcv_line_naming_its_epoch_out_of_the_runs_epochs() -> None:
    # Det3D's copy of mmcv's text logger (det3d/torchie/trainer/hooks/logger/text.py): the epoch
    # out of the run's epochs, the step's time split into its stages, no loss on the line.
    row = one(
        "Epoch [3/20][50/1856]\tlr: 0.00104, eta: 17:42:10, time: 1.712, data_time: 0.044,"
        " transfer_time: 0.021, forward_time: 0.803, loss_parse_time: 0.001 memory: 5120, "
    )
    assert (row["framework"], row["step"], row["step_time_s"]) == ("mmcv", 50, 1.712)


def test_megatron_checkpoint_and_evaluation_phases() -> None:
    # megatron/training/checkpointing.py save_checkpoint() / load_checkpoint();
    # megatron/training/training.py evaluate() and evaluate_and_print_results().
    rows = parse(
        "saving checkpoint at iteration     200 to /ckpt in torch_dist format",
        "  successfully saved checkpoint from iteration     200 to /ckpt [ t 1/8, p 1/1 ]",
        " loading checkpoint from /ckpt at iteration 200",
        " loading distributed checkpoint from /ckpt at iteration 200",
        "Evaluating on 5120 samples",
        "Evaluating iter 3/10",
        " validation loss at iteration 1000 | lm loss value: 2.1 | lm loss PPL: 8.2 |",
        "[after training is done] datetime: 2026-03-01 12:00:00 ",
    )
    assert [(r["event"], r["step"]) for r in rows] == [
        ("checkpoint_start", 200),
        ("checkpoint_end", 200),
        ("checkpoint_load", None),
        ("checkpoint_load", None),
        ("eval_start", None),
        ("eval_step", 3),
        ("eval_end", 1000),
        ("train_end", None),
    ]
    assert {r["framework"] for r in rows} == {"megatron"}


def test_phase_announcements_can_be_left_out_and_steps_are_still_read() -> None:
    # [parsers.progress] phase_announcements = false: a leave-one-out measurement of what the
    # detectors do with no line announcing a checkpoint or an evaluation.
    off = ProgressParser(from_dict(ProgressConfig, {"phase_announcements": False}))
    rows = parse(
        MEGATRON_STEP,
        "saving checkpoint at iteration     200 to /ckpt in torch_dist format",
        "  successfully saved checkpoint from iteration     200 to /ckpt [ t 1/8, p 1/1 ]",
        "Evaluating on 5120 samples",
        "Evaluating iter 3/10",
        " validation loss at iteration 1000 | lm loss value: 2.1 | lm loss PPL: 8.2 |",
        parser=off,
    )
    assert [(r["event"], r["step"]) for r in rows] == [("step", 100)]
    assert not any(f.event in PHASE_EVENTS for f in off.formats)
    assert any(f.event in PHASE_EVENTS for f in ProgressParser().formats)


def test_a_frameworks_formats_can_be_left_out_and_the_rest_still_read() -> None:
    # [parsers.progress] frameworks_off: a site whose lines a built-in format misreads, or a
    # measurement of what the learning reader makes of a framework medic has no format for.
    off = ProgressParser(from_dict(ProgressConfig, {"frameworks_off": ["megatron"]}))
    assert not any(f.framework == "megatron" for f in off.formats)
    assert "megatron" not in {r["framework"] for r in parse(MEGATRON_STEP, parser=off)}
    assert [r["framework"] for r in parse(MEGATRON_STEP)] == ["megatron"]
    with pytest.raises(ConfigError, match="no built-in format is of framework 'megatronlm'"):
        from_dict(ProgressConfig, {"frameworks_off": ["megatronlm"]}, "parsers.progress")


def test_nemo_bar_with_step_timing() -> None:
    # NeMo's TimingCallback metric on Lightning's bar, as in NeMo's performance docs;
    # global_step is rounded by the bar ("2e+3"), so the counter gives the step.
    row = one(
        "Epoch 0: : 100%|██████████| 2000/603000 [1:03:17<317:00:58, v_num=, "
        "reduced_train_loss=2.600, global_step=2e+3, consumed_samples=1.28e+6, "
        "train_step_timing in s=1.900, val_loss=2.800]"
    )
    assert (row["framework"], row["step"], row["step_time_s"]) == ("nemo", 2000, 1.9)
    row = one(
        "Epoch 1: : 1it [00:04,  4.36s/it, v_num=d3c7, reduced_train_loss=0.674, "
        "global_step=1.000, consumed_samples=128.0, train_step_timing in s=3.370]"
    )
    assert (row["framework"], row["step"], row["step_time_s"]) == ("nemo", 1, 3.37)


def test_a_lightning_bar_shows_a_step_time_its_module_logs_where_it_shows_no_rate() -> None:
    off = ProgressParser(ProgressConfig(frameworks_off=("nemo",)))
    rows = parse(
        "Epoch 2: : 40/500 [00:31<06:00, train_loss=1.25, step_time_s=0.750, lr=3e-4]",
        "Epoch 2:   8%|▊         | 41/500 [00:32<05:58,  1.25it/s, step_time_ms=790.0]",
        parser=off,
    )
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [
        ("lightning", 40, 0.75),
        ("lightning", 41, 0.8),
    ]


def test_torchtitan_metrics_line_with_colours() -> None:
    # torchtitan/components/metrics.py MetricsProcessor.log(), colour codes included.
    line = (
        "[rank0]:[titan] 2026-03-01 10:23:45,123 - root - INFO - \x1b[31mstep: 10  "
        "\x1b[32mloss:  9.1234  \x1b[33mmemory: 45.67GiB(48.12%)  \x1b[34mtps: 5,432  "
        "\x1b[36mtflops: 123.45  \x1b[35mmfu: 39.57%\x1b[39m"
    )
    row = one(line)
    assert (row["framework"], row["step"], row["throughput"]) == ("torchtitan", 10, 5432.0)
    assert row["throughput_unit"] == "tokens/s"
    assert row["rank"] == 0
    older = one("[rank0]:2024-05-01 00:00:01,000 - root - INFO - step:  5  loss: 10.1  wps: 1,234")
    assert (older["step"], older["throughput"]) == (5, 1234.0)


def test_torchtitan_checkpoint_and_lifecycle() -> None:
    # torchtitan/components/checkpoint.py CheckpointManager.save()/load(); torchtitan/train.py.
    rows = parse(
        "[rank0]:[titan] 2026-03-01 10:00:00,000 - root - INFO - Training starts at step 1.",
        "[rank0]:[titan] ... - root - INFO - Saving the checkpoint (or staging if async is "
        "enabled).",
        "[rank0]:[titan] ... - root - INFO - Finished saving the checkpoint (or staging if async "
        "is enabled)in 12.34 seconds.",
        "[rank0]:[titan] ... - root - INFO - Saving a full checkpoint at step 500",
        "[rank0]:[titan] ... - root - INFO - Training completed",
    )
    assert [r["event"] for r in rows] == [
        "startup",
        "checkpoint_start",
        "checkpoint_end",
        "checkpoint_start",
        "train_end",
    ]


def test_deepspeed_progress_and_checkpoint() -> None:
    # deepspeed/runtime/engine.py _report_progress() and _save_checkpoint();
    # deepspeed/utils/timer.py ThroughputTimer; torch_checkpoint_engine.py commit().
    rows = parse(
        "[2026-03-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=100, "
        "skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]",
        "[2026-03-01 10:00:00,123] [INFO] [timer.py:260:stop] epoch=0/micro_step=100/"
        "global_step=100, RunningAvgSamplesPerSec=123.45, CurrSamplesPerSec=120.1, "
        "MemAllocated=12.3GB, MaxMemAllocated=14.5GB",
        "[2026-03-01 10:00:01,000] [INFO] [engine.py:3000:_save_checkpoint] [Rank 0] Saving "
        "model checkpoint: /ckpt/global_step100/mp_rank_00_model_states.pt",
        "[2026-03-01 10:00:09,000] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] "
        "Checkpoint global_step100 is ready now!",
    )
    assert [(r["event"], r["step"], r["throughput"]) for r in rows] == [
        ("step", 100, None),
        ("step", 100, 120.1),
        ("checkpoint_start", None, None),
        ("checkpoint_end", None, None),
    ]
    assert rows[0]["rank"] == 0
    assert rows[1]["throughput_unit"] == "samples/s"


def test_hf_trainer_dicts_bars_and_phases() -> None:
    # transformers trainer_callback.py ProgressCallback.on_log (str(logs)) and its tqdm bar;
    # trainer.py evaluation_loop / _save / _inner_training_loop.
    rows = parse(
        "***** Running training *****",
        " 12%|█▏        | 120/1000 [02:00<14:40,  1.00s/it]",
        "{'loss': 2.3456, 'grad_norm': 1.23, 'learning_rate': 4.5e-05, 'epoch': 0.12}",
        "***** Running Evaluation *****",
        "{'eval_loss': 2.1, 'eval_runtime': 12.3, 'eval_samples_per_second': 3.0, 'epoch': 0.5}",
        "Saving model checkpoint to /out/checkpoint-500",
        "{'train_runtime': 1234.5, 'train_samples_per_second': 3.2, 'train_loss': 2.0}",
    )
    assert [(r["framework"], r["event"], r["step"]) for r in rows] == [
        ("hf", "startup", None),
        ("tqdm", "step", 120),
        ("hf", "step", None),
        ("hf", "eval_start", None),
        ("hf", "eval_end", None),
        ("hf", "checkpoint_start", None),
        ("hf", "train_end", None),
    ]
    assert rows[1]["step_time_s"] == 1.0


def test_tqdm_carriage_return_updates_keep_the_last() -> None:
    # tqdm/std.py format_meter: updates separated by \r may arrive as one line.
    row = one(
        " 12%|█▏        | 120/1000 [02:00<14:40,  1.00s/it]\r"
        " 12%|█▏        | 121/1000 [02:01<14:39,  2.00it/s]"
    )
    assert (row["step"], row["step_time_s"]) == (121, 0.5)
    assert one("  0%|          | 0/1000 [00:00<?, ?it/s]")["step_time_s"] is None


def test_an_evaluation_bar_beside_the_training_bar_makes_no_step() -> None:
    # transformers trainer_callback.py ProgressCallback: the training bar counts to max_steps,
    # the evaluation bar (no description either) to len(eval_dataloader). Batch by batch: what
    # the training bar showed is kept.
    parser = ProgressParser()
    train = parse(" 10%|█         | 300/3000 [05:00<45:00,  1.00s/it]", parser=parser)
    assert [r["step"] for r in train] == [300]
    evaluation = parse(
        "  8%|▊         | 10/125 [00:01<00:11,  9.81it/s]",
        "100%|██████████| 125/125 [00:10<00:00, 12.38it/s]",
        parser=parser,
    )
    assert evaluation == []
    again = parse(" 10%|█         | 301/3000 [05:12<45:10,  1.10s/it]", parser=parser)
    assert [r["step"] for r in again] == [301]


def test_a_bar_without_description_leaves_the_jobs_own_lines_to_the_learning_reader() -> None:
    # A loop no format knows logs its updates; tqdm's bare bar (an evaluation's, say, over
    # five batches) comes between them. The bar is no framework's: the job's lines are still
    # learned, in the same batch and in later ones.
    parser = ProgressParser()
    rows = parse(
        "epoch 1 | update 40 | train_loss 2.318 | 0.512 s per update",
        "epoch 1 | update 80 | train_loss 2.207 | 0.509 s per update",
        " 40%|████      | 2/5 [00:00<00:01,  2.19it/s]",
        "epoch 1 | update 120 | train_loss 2.114 | 0.515 s per update",
        parser=parser,
    )
    assert [(r["framework"], r["step"]) for r in rows] == [
        ("learned", 40),
        ("learned", 80),
        ("tqdm", 2),
        ("learned", 120),
    ]
    later = parse("epoch 1 | update 160 | train_loss 2.051 | 0.511 s per update", parser=parser)
    assert [(r["step"], r["step_time_s"]) for r in later] == [(160, 0.511)]


def test_a_described_bar_is_its_frameworks_and_keeps_the_learning_reader_off() -> None:
    rows = parse(
        "Epoch 0:  12%|█▏        | 120/1000 [01:00<07:20,  2.00it/s, loss=2.31]",
        "epoch 0 | update 120 | train_loss 2.114 | 0.515 s per update",
    )
    assert [r["step"] for r in rows] == [120]


def test_a_boosting_round_is_a_step_and_a_bracketed_count_alone_is_not() -> None:
    # XGBoost's and LightGBM's evaluation logs (their callbacks): a round, then its metrics
    rows = parse(
        "[40]\ttrain-auc:0.91802\tvalid-auc:0.87113",
        "[40]\ttraining's auc: 0.918021\tvalid_1's auc: 0.871126",
        "[3]\tzork loaded shard 3 of 8",
    )
    assert [(r["framework"], r["step"]) for r in rows] == [("xgboost", 40), ("lightgbm", 40)]


def test_a_smaller_loop_before_the_training_loop_in_one_batch() -> None:
    # The largest total is training, whichever comes first; a bar before the larger loop's
    # first line cannot be told apart yet. Keras evaluate() after fit() (Progbar, test steps).
    rows = parse(
        " 100/1875 [=>............................] - ETA: 9s - loss: 0.9230",
        "1875/1875 [==============================] - 14s 7ms/step - loss: 0.3076",
        "313/313 [==============================] - 1s 3ms/step - loss: 0.0772",
    )
    assert [r["step"] for r in rows] == [100, 1875]


def test_a_keras_bar_over_a_dataset_of_unknown_size_is_its_count_alone() -> None:
    # keras/src/utils/progbar.py: without a target the bar is "%7d/Unknown", then the
    # elapsed seconds and the time per step (tf.keras put " - " before them)
    rows = parse(
        "    938/Unknown - 31s 33ms/step - loss: 0.2033 - accuracy: 0.9408",
        "    950/Unknown 32s 34ms/step - loss: 0.2012",
    )
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [
        ("keras", 938, 0.033),
        ("keras", 950, 0.034),
    ]


def test_litgpt_names_the_optimizer_step_not_the_iteration_however_it_sets_them_apart() -> None:
    rows = parse(
        "iter 77 step 39: loss 10.8259, iter time: 214.40ms (optimizer.step)",
        "Epoch 3 | iter 800 step 200 | loss train: 2.846, val: n/a | iter time: 112.20 ms",
        "Ep 1 | iter 808 | step 202: loss train (curr): 1.761 | iter time: 121.17 ms (opt.step)",
    )
    assert [(r["framework"], r["step"]) for r in rows] == [
        ("litgpt", 39),
        ("litgpt", 200),
        ("litgpt", 202),
    ]


def test_loops_are_told_apart_per_process_description_and_job() -> None:
    # Another rank's, another description's and another job's bar have their own totals.
    parser = ProgressParser()
    parse(" 10%|█         | 300/3000 [05:00<45:00,  1.00s/it]", parser=parser, rank=0)
    rows = parse(
        " 10%|█         | 12/120 [00:12<01:48,  1.00s/it]",
        "Epoch 1:  10%|█         | 12/120 [00:12<01:48,  1.00s/it]",
        parser=parser,
        rank=1,
    )
    assert [r["step"] for r in rows] == [12, 12]
    other = parse(" 10%|█         | 12/120 [00:12<01:48,  1.00s/it]", parser=parser, job_id="7")
    assert [r["step"] for r in other] == [12]


def test_a_job_end_forgets_its_loops() -> None:
    parser = ProgressParser()
    parse(" 10%|█         | 300/3000 [05:00<45:00,  1.00s/it]", parser=parser)
    parse("slurmstepd: error: *** JOB 100 ON n1 CANCELLED AT 2026-03-01T10:00 ***", parser=parser)
    rows = parse(" 10%|█         | 12/120 [00:12<01:48,  1.00s/it]", parser=parser)
    assert [r["step"] for r in rows] == [12]


def test_lightning_bars_and_checkpoint() -> None:
    # lightning/pytorch/callbacks/progress/tqdm_progress.py and callbacks/model_checkpoint.py.
    rows = parse(
        "Epoch 0:  12%|█▏        | 120/1000 [02:00<14:40,  1.00it/s, v_num=0, train_loss=2.340]",
        "Validation DataLoader 0:  50%|█████     | 10/20 [00:01<00:01,  8.00it/s]",
        "Epoch 0, global step 500: 'val_loss' reached 2.10000 (best 2.10000), saving model to "
        "'/ckpt/epoch=0-step=500.ckpt' as top 1",
        "`Trainer.fit` stopped: `max_epochs=1` reached.",
    )
    assert [(r["framework"], r["event"], r["step"]) for r in rows] == [
        ("lightning", "step", 120),
        ("lightning", "eval_step", None),
        ("lightning", "checkpoint_start", 500),
        ("lightning", "train_end", None),
    ]
    assert rows[0]["step_time_s"] == 1.0


def test_slurm_cancel_ends_the_job() -> None:
    # slurmstepd's cancel banner (also for the time limit).
    row = one(
        "slurmstepd: error: *** JOB 4242 ON n1 CANCELLED AT 2026-03-01T10:00:00 DUE TO TIME "
        "LIMIT ***"
    )
    assert (row["framework"], row["event"]) == ("slurm", "job_end")


def test_a_line_the_first_format_it_names_cannot_read_goes_to_the_next() -> None:
    # "Epoch " names Lightning's bar first, which does not read this line; the tqdm bar does.
    row = one("Epoch summary follows  12%|█▏        | 120/1000 [02:00<14:40,  1.00s/it]")
    assert (row["framework"], row["step"], row["step_time_s"]) == ("tqdm", 120, 1.0)


def test_formats_mixed_in_a_batch_come_out_in_line_order() -> None:
    lines = [
        " 12%|█▏        | 120/1000 [02:00<14:40,  1.00s/it]",
        MEGATRON_STEP,
        "{'loss': 2.1, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.1}",
        "random line about a checkpoint",
        " 12%|█▏        | 121/1000 [02:01<14:39,  1.00s/it]",
        "Saving model checkpoint: /ckpt/global_step100",
        "Epoch 0:  12%|█▏        | 120/1000 [02:00<14:40,  1.00it/s, v_num=0]",
    ]
    rows = parse(*lines)
    assert [(r["framework"], r["step"]) for r in rows] == [
        ("tqdm", 120),
        ("megatron", 100),
        ("hf", None),
        ("tqdm", 121),
        ("deepspeed", None),
        ("lightning", 120),
    ]


def test_custom_pattern_reads_a_line_before_the_built_in_formats() -> None:
    config = from_dict(ProgressConfig, {"patterns": [{"pattern": r"iteration\s+(?P<step>\d+)/"}]})
    rows = parse(MEGATRON_STEP, "Evaluating iter 3/10", parser=ProgressParser(config))
    assert [(r["framework"], r["event"], r["step"]) for r in rows] == [
        ("custom", "step", 100),
        ("megatron", "eval_step", 3),
    ]


def test_a_parser_reads_only_the_built_in_formats_it_is_given() -> None:
    """Left without Megatron's formats, its line is no step of Megatron's."""
    kept = tuple(f for f in FORMATS if f.framework != "megatron")
    assert [r["framework"] for r in parse(MEGATRON_STEP)] == ["megatron"]
    assert "megatron" not in {
        r["framework"] for r in parse(MEGATRON_STEP, parser=ProgressParser(builtin=kept))
    }


def test_numbers_with_a_magnitude_suffix_or_thousands_separators() -> None:
    """nanotron writes its values through human_format ("1.23K"); others group thousands."""
    line = (
        "[INFO|DP=0|PP=0|TP=0|gpu-a01]: iteration: 12 / 500 | consumed_tokens: 3.15M |"
        " elapsed_time_per_iteration_ms: 2.46K | tokens_per_sec: 426K |"
        " tokens_per_sec_per_gpu: 53.3K | global_batch_size: 256 | lm_loss: 7.41 |"
    )
    row = one(line)
    assert (row["framework"], row["step"]) == ("nanotron", 12)
    assert row["step_time_s"] == pytest.approx(2.46)
    assert row["throughput"] == pytest.approx(53_300.0)
    config = from_dict(
        ProgressConfig,
        {"patterns": [{"pattern": r"it (?P<step>[\d,]+) took (?P<step_time_ms>[\d.,]+)"}]},
    )
    rows = parse("it 1,204 took 1,250.5 ms", parser=ProgressParser(config))
    assert [(r["step"], r["step_time_s"]) for r in rows] == [(1204, pytest.approx(1.2505))]


def test_a_records_throughput_is_its_first_part_formats_with_that_parts_unit() -> None:
    def pattern(regex: str, **extra: str) -> dict[str, str]:
        return {"pattern": regex, "framework": "rec", **extra}

    config = from_dict(
        ProgressConfig,
        {
            "patterns": [
                pattern(r"^== step (?P<step>\d+)( (?P<throughput>[\d.]+) img/s)?", unit="img/s"),
                pattern(r"^ dev (?P<throughput>[\d.]+)$", event="part", unit="tokens/s/dev"),
                pattern(r"^ all (?P<throughput>[\d.]+)$", event="part", unit="samples/s"),
                pattern(r"^ took (?P<step_time_s>[\d.]+)$", event="part"),
            ]
        },
    )
    lines = ["== step 1", " all 30.5", " dev 12.5", " took 0.5", "== step 2", " all 31.5"]
    lines += ["== step 3 7.5 img/s", " dev 13.5", "== step 4"]
    rows = parse(*lines, parser=ProgressParser(config))
    assert [(r["step"], r["step_time_s"], r["throughput"], r["throughput_unit"]) for r in rows] == [
        (1, 0.5, 12.5, "tokens/s/dev"),
        (2, None, 31.5, "samples/s"),
        (3, None, 7.5, "img/s"),
        (4, None, None, None),
    ]


def test_a_site_pattern_reads_a_rate_with_its_unit_and_no_rate_without_one() -> None:
    config = from_dict(
        ProgressConfig, {"patterns": [{"pattern": r"loop (?P<step>\d+) (?P<bar_rate>\S+)$"}]}
    )
    rows = parse("loop 5 2.5it/s", "loop 6 3.0s/it", "loop 7 2.5", parser=ProgressParser(config))
    assert [(r["step"], r["step_time_s"]) for r in rows] == [
        (5, pytest.approx(0.4)),
        (6, pytest.approx(3.0)),
        (7, None),
    ]


def _number(groups: dict[str, str | None], name: str) -> float | None:
    value = groups.get(name)
    if value is None:
        return None
    plain = value.replace(",", "")
    scale = {"K": 1e3, "M": 1e6, "G": 1e9}.get(plain[-1:], 1.0)
    try:
        return float(plain.rstrip("KMG")) * scale
    except ValueError:
        return None


def _step_time(groups: dict[str, str | None]) -> float | None:
    """Seconds per step from a line's groups, as the parser documents it: the first of the step
    time, the time in ms, s/it and 1 / it/s that reads as a number; kept if finite and > 0."""
    ms, rate = _number(groups, "step_time_ms"), _number(groups, "it_per_s")
    candidates = (
        _number(groups, "step_time_s"),
        None if ms is None else ms / 1000.0,
        _number(groups, "s_per_it"),
        None if rate is None else (1.0 / rate if rate else math.inf),
    )
    seconds = next((c for c in candidates if c is not None), None)
    return seconds if seconds is not None and math.isfinite(seconds) and seconds > 0 else None


def _rounded(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Floats to 12 significant digits (polars may divide by multiplying with the inverse)."""
    return [tuple(f"{v:.12g}" if isinstance(v, float) else v for v in row) for row in rows]


def _bare(line: str, prefix: re.Pattern[str]) -> str:
    """``line`` without its prefixes, cut one at a time with Python's re."""
    for _ in range(MAX_ROUNDS):
        found = prefix.match(line)
        if found is None:
            break
        line = line[found.end() :]
    return line


def test_every_bundled_log_line_is_read_as_a_line_by_line_reading_reads_it() -> None:
    # The reference: each line on its own, without its prefixes, the first format (by priority)
    # whose anchor it holds and whose regex matches reads it (with Python's re, without any
    # shortcut).
    logs = bundled_logs()
    formats = [(f, re.compile(f.pattern)) for f in FORMATS]
    prefix = re.compile(PrefixStripper().pattern)
    expected = []
    for job_id, line in zip(
        logs.column("job_id").to_pylist(), logs.column("message").to_pylist(), strict=True
    ):
        message = _bare(line, prefix)
        text = re.sub(ANSI_ESCAPE, "", message)
        for fmt, regex in formats:
            found = regex.search(text) if any(a in message for a in fmt.anchors) else None
            if job_id is not None and found is not None:
                groups = found.groupdict()
                step = _number(groups, "step")
                if fmt.bar and re.search(LOOKALIKE, groups.get("desc") or ""):
                    break
                assert fmt.event != "part"  # no multi-line records in the bundled logs
                expected.append(
                    (
                        fmt.framework,
                        fmt.event,
                        None if step is None else int(step),
                        _step_time(groups),
                        _number(groups, "throughput"),
                    )
                )
                break
    out = ProgressParser().parse(Batch("logs", logs))
    assert out is not None and len(expected) > 10_000
    read = (
        out.frame.filter(pl.col("framework") != "learned")
        .select("framework", "event", "step", "step_time_s", "throughput")
        .rows()
    )
    assert _rounded(read) == _rounded(expected)
    assert sum(row[3] is not None for row in read) > 5_000


def test_a_line_with_several_bars_is_read_at_its_last_in_every_bar_format() -> None:
    # Bars of one line joined by \r: the last is read, as with a single bar (which takes the
    # cheaper reading without the leading ^.*).
    lightning = "Epoch 0:  12%|█▏        | {0}/1000 [02:00<14:40,  {1}it/s, v_num=0]"
    nemo = (
        "Epoch 0: : 12%|█▏        | {0}/1000 [02:00<14:40, v_num=, reduced_train_loss=2.6, "
        "train_step_timing in s={1}]"
    )
    tqdm = " 12%|█▏        | {0}/1000 [02:00<14:40,  {1}s/it]"
    for bar, framework, seconds in ((lightning, "lightning", 0.5), (nemo, "nemo", 2.0)):
        rows = parse(bar.format(120, 1.0), bar.format(121, 1.0) + "\r" + bar.format(122, 2.0))
        assert [(r["framework"], r["step"]) for r in rows] == [(framework, 120), (framework, 122)]
        assert rows[1]["step_time_s"] == seconds
    rows = parse(tqdm.format(7, 3.0), tqdm.format(8, 3.0) + "\r" + tqdm.format(9, 4.0))
    assert [(r["step"], r["step_time_s"]) for r in rows] == [(7, 3.0), (9, 4.0)]


def test_a_bar_whose_unit_names_a_loops_steps_gives_their_time() -> None:
    # tqdm's `unit` set to the loop's batches or steps (a custom Lightning bar): "4.0batch/s",
    # "2.5s/step" are its steps' rate as "it/s" is
    bar = "Epoch 0:  40%|████      | {0}/100 [00:10<00:15,  {1}, loss=1.2]"
    rows = parse(bar.format(40, "4.00batch/s"), bar.format(41, "2.50s/step"))
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [
        ("lightning", 40, 0.25),
        ("lightning", 41, 2.5),
    ]


def test_a_lightning_bar_of_a_loader_of_unknown_length_is_a_step() -> None:
    # the bar's format writes the unknown total as "?"; NeMo's timing callback fills the
    # postfix only once a step was timed
    bar = "Epoch 0: :   0%|          | {0}/? [23:53<00:00, v_num=, train_step_timing in s={1}]"
    rows = parse(bar.format(614, ""), bar.format(615, "2.01"))
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [
        ("lightning", 614, None),
        ("nemo", 615, 2.01),
    ]
    # ... as any tqdm bar under such a format
    rows = parse(" 45%|████▌     | 45/? [00:10<00:12,  4.00it/s]")
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [("tqdm", 45, 0.25)]


def test_a_shortcut_needs_a_pattern_that_reads_the_last_match() -> None:
    with pytest.raises(ValueError, match="needs a pattern led by"):
        ProgressFormat("x", "step", ("Epoch ",), r"Epoch (?P<step>\d+)", "src", once=("Epoch ",))


def test_unrelated_lines_lines_without_job_and_lookalikes_are_skipped() -> None:
    assert parse("Epoch 3 finished with loss 2.0", "random line about a checkpoint") == []
    assert parse(MEGATRON_STEP, job_id=None) == []
    assert ProgressParser().parse(batch("logs", [])) is None


def test_a_bar_too_fast_for_training_steps_counts_items() -> None:
    # a dataset download's bar counts bytes; a step bar of a fast loop is still a step
    assert parse("9920512it [00:00, 14787158.04it/s]", "32768it [00:00, 770194.81it/s]") == []
    assert one("100%|██████████| 500/500 [00:01<00:00, 412.33it/s]")["step"] == 500


def test_a_bar_described_by_the_word_epoch_alone_counts_epochs() -> None:
    # the outer loop of trange(epochs, desc="Epoch") around the step bar; "Epoch 3:" is the
    # step bar of epoch 3
    assert parse("Epoch:  33%|███▎      | 1/3 [10:12<20:24, 612.00s/it]") == []
    assert parse("epochs:   0%|          | 0/10 [00:12<?, ?it/s]") == []
    assert one("Epoch 3:  58%|█████▊    | 318/545 [03:51<02:43,  1.38it/s]")["step"] == 318


def test_a_bar_of_the_same_epoch_with_a_smaller_total_counts_another_loop() -> None:
    # our values: a trainer that names its evaluation bar after the epoch, as Lightning names
    # its training bar; each epoch's own bars are steps
    lines = [
        "Epoch 0: 100%|██████████| 273/273 [00:30<00:00,  9.00it/s, loss=0.674]",
        "Epoch 0: 100%|██████████| 117/117 [00:12<00:00,  9.43it/s, acc=0.511, loss=0.692]",
        "Epoch 1:  50%|█████     | 136/273 [00:12<00:12, 11.04it/s, loss=0.683]",
        "Epoch 1: 100%|██████████| 117/117 [00:11<00:00, 10.06it/s, acc=0.674, loss=0.614]",
    ]
    assert [row["step"] for row in parse(*lines)] == [273, 136]


def test_rank_from_the_column_wins_over_the_prefix() -> None:
    assert one(MEGATRON_STEP, rank=63)["rank"] == 63


def test_custom_pattern_from_settings() -> None:
    config = from_dict(
        ProgressConfig,
        {
            "patterns": [
                {"pattern": r"it (?P<step>\d+) took (?P<step_time_s>[\d.]+)s", "framework": "mine"},
                {"pattern": r"snapshot begins", "event": "checkpoint_start"},
            ]
        },
    )
    rows = parse("my loop: it 7 took 1.5s", "snapshot begins", parser=ProgressParser(config))
    assert [(r["framework"], r["event"], r["step"], r["step_time_s"]) for r in rows] == [
        ("mine", "step", 7, 1.5),
        ("custom", "checkpoint_start", None, None),
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"pattern": "(?P<step>"}, "not a valid regex"),
        ({"pattern": r"(?P<iteration>\d+)"}, "'iteration' is not one of"),
        ({"pattern": "x", "event": "sleep"}, "event must be one of"),
        ({"regex": "x"}, "unknown setting"),
    ],
)
def test_bad_custom_pattern_is_a_one_line_config_error(entry: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        from_dict(ProgressConfig, {"patterns": [entry]}, "parsers.progress")
    assert "\n" not in str(caught.value)


def test_every_format_cites_its_source_and_has_a_prefilter_anchor() -> None:
    for fmt in FORMATS:
        assert fmt.source
        assert fmt.anchors or re.match(r"\^[^.]", fmt.pattern), fmt.framework


def test_parsers_table_in_settings_configures_the_pipeline_s_parser() -> None:
    pattern = r"it (?P<step>\d+) took (?P<step_time_s>[\d.]+)s"
    pipeline = Pipeline.from_settings(
        {
            "parsers": {"progress": {"patterns": [{"pattern": pattern}]}},
            "detectors": {name: {"enabled": False} for name in DETECTORS if name != "hang"},
        }
    )
    (parser,) = [p for p in pipeline.parsers if isinstance(p, ProgressParser)]
    assert parser.config.patterns[0].pattern == pattern
    with pytest.raises(ConfigError, match="unknown parser 'progres'"):
        Pipeline.from_settings({"parsers": {"progres": {}}})


def test_levanter_tqdm_loggable_lines() -> None:
    # levanter callbacks/_metrics.py pbar_logger through tqdm_loggable's display(): a count
    # with an SI prefix is rounded by format_sizeof and gives no step number.
    rows = parse(
        "Progress on:train 640it/10.0kit rate:1.6it/s remaining:1:37:40 elapsed:06:40 "
        "postfix:loss=3.12",
        "Progress on:train 2.56kit/10.0kit rate:2.0it/s remaining:1:02:00 elapsed:21:20 "
        "postfix:loss=2.87",
        "Progress on:eval 4.00it/20.0it rate:5.0it/s remaining:00:03 elapsed:00:01 postfix:-",
    )
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [
        ("levanter", 640, 0.625),
        ("levanter", None, 0.5),
    ]


def test_t5x_clu_train_collection_and_not_its_evaluations() -> None:
    # clu LoggingWriter.write_scalars: "[step] collection=<name> k=v, ..." sorted by key.
    rows = parse(
        "[2400] collection=train accuracy=0.5, loss=2.5, timing/seconds=40, "
        "timing/steps_per_second=2.5",
        "[2400] collection=training_eval/c4 accuracy=0.5, timing/steps_per_second=8",
    )
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [("t5x", 2400, 0.4)]


def test_paxml_rate_line_takes_its_number_from_the_summary_after_it() -> None:
    # paxml programs.py logs steps/sec, then summary_utils.py the "Metrics values" block; an
    # evaluation's block after it has no rate line and adds no step.
    rows = parse(
        "steps/sec: 0.500000",
        "Metrics values at step 300:",
        "  loss=2.500000",
        "step: 300, eval test c4 loss: 2.61",
        "Metrics values at step 300:",
        "steps/sec: 0.250000",
    )
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [
        ("paxml", 300, 2.0),
        ("paxml", None, 4.0),
    ]


def test_a_strict_form_reads_what_its_pattern_reads_wherever_it_matches() -> None:
    # Every bundled line and every corpus line holding a strict format's once-literals at most
    # once, read by the strict form and by the pattern without its ^.* (the shortcut): where the
    # strict form matches, the same step, total, description and pace (on thousands of lines).
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "progress"
    corpus = [line for cases in load_corpus(real).values() for case in cases for line in case.lines]
    lines = pl.Series([*bundled_logs().column("message").to_pylist(), *corpus])
    lines = lines.str.replace(PrefixStripper().pattern + "+", "")
    for fmt in (f for f in FORMATS if f.strict is not None):
        shortcut = fmt.shortcut()
        assert shortcut is not None and shortcut.strict is not None
        held = lines.str.count_matches("|".join(map(re.escape, fmt.once)))
        plain = lines.filter((held == 1) & lines.str.contains(shortcut.pattern))
        strict = plain.str.extract_groups(shortcut.strict).struct.unnest()
        loose = plain.str.extract_groups(shortcut.pattern).struct.unnest()
        matched = strict.get_column("step").is_not_null()
        assert matched.sum() > 1000, fmt.framework
        strict, loose = strict.filter(matched), loose.filter(matched)
        for group in ("step", "total", "desc"):
            if group in strict.columns:
                assert strict.get_column(group).equals(loose.get_column(group)), group
        pace = pl.coalesce(
            pl.col("s_per_it").cast(pl.Float64), 1 / pl.col("it_per_s").cast(pl.Float64)
        )
        assert (
            strict.select(_bar_seconds(pl.col("bar_rate")))
            .to_series()
            .equals(loose.select(pace).to_series(), check_names=False)
        ), fmt.framework


def test_a_strict_form_needs_once_and_an_anchor() -> None:
    with pytest.raises(ValueError, match="'strict' needs"):
        ProgressFormat("x", "step", ("a",), r"a(?P<step>\d+)", "src", strict=r"^a(?P<step>\d+)")


@pytest.mark.parametrize(
    ("line", "loss"),
    [
        (MEGATRON_STEP, 2.345678),
        ("{'loss': 2.8384, 'grad_norm': 4.9596, 'learning_rate': 8.7e-06, 'epoch': 2.55}", 2.8384),
        ("{'loss': nan, 'grad_norm': nan, 'learning_rate': 8.757e-06, 'epoch': 2.55}", math.nan),
        ("iter 130: loss inf, time 568.59ms, mfu 34.79%", math.inf),
        ("steps: 50 loss: 7.7539 iter time (s): 2.897 samples/sec: 88.367", 7.7539),
        ("epoch: 1 step: 250, loss is 1.3757", 1.3757),
        (
            " 900/1875 ━━━━━━━━━━━━━━━━━━━━ 6s 31ms/step - accuracy: 0.7917 - loss: 0.3305"
            " - val_loss: 0.4",
            0.3305,
        ),
        ("Epoch 1 | iter 100 step 25 | loss train: 2.661, val: n/a | iter time: 1747.52 ms", 2.661),
        ("Step 420/9000; acc: 0.12; ppl: nan; xent: nan; lr: 0.0007; 1800/2100 tok/s", math.nan),
        ("Step 430/9000; acc: 41.3; ppl: 10.2; xent: 2.32; lr: 0.0007; 1800/2100 tok/s", 2.32),
    ],
)
def test_a_step_line_carries_its_training_loss(line: str, loss: float) -> None:
    read = one(line)["loss"]
    assert read == pytest.approx(loss, nan_ok=True)


def test_no_loss_from_a_validation_key_a_phase_line_or_a_line_without_one() -> None:
    rows = parse(
        "step: 10  eval loss:  9.2077  memory: 48.89GiB(55.58%)  tps: 6,818  tflops: 205.89",
        "saving checkpoint at iteration     200 to /ckpt in torch_dist format",
        " iteration      300/  500000 | consumed samples:        51200 |"
        " elapsed time per iteration (ms): 1234.5 | learning rate: 1.5E-04 |",
    )
    assert [(row["event"], row["loss"]) for row in rows] == [
        ("step", None),
        ("checkpoint_start", None),
        ("step", None),
    ]


def test_a_trainer_dicts_step_key_and_step_rate_are_read_by_the_generic_dict_format() -> None:
    """Without ms-swift's own format, its dict is read as Hugging Face's with its own keys."""
    kept = ProgressParser(builtin=tuple(f for f in FORMATS if f.framework != "swift"))
    rows = parse(
        "{'loss': 1.5, 'learning_rate': 1e-05, 'train_speed(iter/s)': 0.25, 'epoch': 0.1, "
        "'global_step/max_steps': '40/900'}",
        "{'loss': 1.4, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.2}",
        parser=kept,
    )
    assert [(r["framework"], r["step"], r["step_time_s"]) for r in rows] == [
        ("hf", 40, 4.0),
        ("hf", None, None),
    ]
