"""The progress formats: the lines frameworks print as they train, as data.

Each format names its framework and what its lines mean (``EVENTS``), the literals that find its
lines, a Rust regex whose named groups (``FIELDS``) read them, and where the format was
observed. The progress parser (``medic.parse.progress``) tries them by priority; a line none
of them reads may still be read by the learning reader (``medic.parse.learned``).
"""

from __future__ import annotations

from dataclasses import dataclass

from medic.parse.first_match import Shortcut

EVENTS = (
    "step",
    "eval_step",
    "eval_start",
    "eval_end",
    "checkpoint_start",
    "checkpoint_end",
    "checkpoint_load",
    "startup",
    "train_end",
    "job_end",
    "part",
)
"""What a progress row says. ``step``: a training step finished. ``eval_step``: an evaluation
batch finished. ``*_start``/``*_end``: a phase boundary (a later ``step`` also closes a phase).
``train_end``: the training loop returned. ``job_end``: the scheduler cancelled the job.
``part``: a later line of a multi-line step record (OLMo's, Composer's): its values complete
the step line of its framework before it, and it makes no row of its own."""

FIELDS = (
    "step",
    "step_time_s",
    "step_time_ms",
    "step_time_us",
    "throughput",
    "it_per_s",
    "s_per_it",
    "step_time_clock",
    "bar_rate",
)
"""Named groups a format may capture: numbers, ``step_time_clock``, a duration written as a
clock (``mm:ss`` or ``h:mm:ss``), and ``bar_rate``, a tqdm rate with its unit (``2.5it/s`` or
``1.3s/it``, one group where a one-pass regex cannot choose the group by the unit that follows
the number); step time is normalised to seconds."""
DESC = "desc"
"""A progress bar's description (the text before its bar): a bar described as loading,
evaluating, tokenising, downloading... (``LOOKALIKE``) is not training."""
TOTAL = "total"
"""A loop's length, as its bar shows it (``step/total``). A job's training loop and the other
loops it runs in between (Hugging Face Trainer's evaluation bar, Keras ``evaluate()``) print
the same bar without a description that tells them apart; the evaluation loop runs over the
evaluation set, smaller than the training run, so under one description the loop with the
largest total is training and a bar with a smaller total is another loop."""
LOOKALIKE = (
    r"(?i)load|map\b|map \(|filter|eval|valid|test|predict|infer|generat|token|process|shard"
    r"|convert|saving|extract|cach|sampl|decod|encod|prompt|fetch|prepar|writ|read|index|build"
    r"|compil|warm|calibrat|quantiz|export|merg|resolv|verif|search|benchmark|profil|upload|split"
    r"|captur|pack|map50|top1_acc|request|^\s*batches\b|embedding|comput|calculat|scoring"
)
"""What a bar that is not a training loop says it does (looked for in its description).
Ultralytics' validation bar is described by its metrics' column heads (``mAP50``, and
``top1_acc`` for classification); vLLM's ``Adding requests``, sentence-transformers'
``Batches`` (encode) and embedding, scoring and metric bars are inference."""

ANSI_ESCAPE = r"\x1b\[[0-9;]*m"
RANK_IN_TEXT = r"\[Rank (\d+)\]"
"""DeepSpeed's rank tag inside a message (a launcher's rank prefix is the stripper's)."""
NUMBER = r"[0-9][0-9.,]*(?:[eE][+-]?[0-9]+)?"


# The last update of a tqdm bar (several \r-separated updates can arrive as one line).
_TQDM_LAST = r"^.*"


@dataclass(frozen=True)
class ProgressFormat:
    """One line format: the framework, what it means, how to find and read it, and its source."""

    framework: str
    event: str
    anchors: tuple[str, ...]
    """Literals of which every line the format reads holds one: the prefilter, and a line is
    tried with this format only when it holds one of them. None: the pattern, anchored at the
    line's start, is its own prefilter (a line with no word to find it by, as fastai's epoch
    rows; a pattern anchored so fails at a line's first characters)."""
    pattern: str
    """Rust regex, named groups from FIELDS."""
    source: str
    unit: str | None = None
    """Unit of the ``throughput`` group."""
    bar: bool = False
    """A progress bar (or metrics line) of any loop: read as a step unless its description
    (the ``desc`` group: a bar's text, a metrics collection's name) says it is no training
    loop (``LOOKALIKE``)."""
    once: tuple[str, ...] = ()
    """For a format that reads the last of several matches on a line (its pattern begins with
    ``^.*``): literals of which each match holds one, at a place that fixes where the match
    starts. A line holding them at most once in all can match at one place only: it is read
    without the ``^.*``, which costs half as much to capture."""
    strict: str | None = None
    """For a format with ``once``: a regex anchored at the line's start and one-pass (no lazy
    repeat, no alternatives that begin alike; ``bar_rate`` in place of the two rate groups) that
    reads the plain form of its lines (one match, led by nothing) as the pattern does, where it
    matches. The regex crate captures such a regex's groups three times faster; the lines it
    does not match are read with the pattern (``medic.parse.first_match.Shortcut``)."""

    def __post_init__(self) -> None:
        if self.once and not self.pattern.startswith(_TQDM_LAST):
            raise ValueError(f"{self.framework} {self.event}: 'once' needs a pattern led by ^.*")
        if self.strict is not None and not (self.once and self.strict.startswith("^")):
            raise ValueError(f"{self.framework} {self.event}: 'strict' needs 'once' and a ^")

    def shortcut(self) -> Shortcut | None:
        """The pattern without its ``^.*``, for the lines holding ``once`` at most once."""
        if not self.once:
            return None
        return Shortcut(self.pattern.removeprefix(_TQDM_LAST), self.once, self.strict)


_TQDM_RATE = r"(?:(?P<s_per_it>[0-9.]+)s/it|(?P<it_per_s>[0-9.]+)it/s)"
_BAR_RATE = r"(?P<bar_rate>[0-9.]+(?:s/it|it/s))"
"""``_TQDM_RATE`` as one-pass regexes read it (``FIELDS``)."""
_BAR_TIMES = r"\[[0-9:]+<[0-9:?]+, +"
"""A tqdm bar's elapsed and remaining time, and the space before its rate: its ``strict`` form."""

FORMATS: tuple[ProgressFormat, ...] = (
    # Megatron-LM, megatron/training/training.py training_log(), printed by the last rank:
    # " [2026-03-01 10:12:03] iteration      100/  500000 | consumed samples: ... |
    #  elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 180.3 | ..."
    # Megatron-DeepSpeed (megatron/training.py training_log()) prints the same line with
    # "consumed tokens:", "(s)" instead of "(ms)" in its newer releases, and "samples per
    # second:" / "TFLOPs:" at the end.
    ProgressFormat(
        "megatron",
        "step",
        ("elapsed time per iteration (ms)", "elapsed time per iteration (s)"),
        r"iteration\s+(?P<step>\d+)/\s*\d+ \|.*?elapsed time per iteration "
        r"\((?:ms\): (?P<step_time_ms>[0-9.]+)|s\): (?P<step_time_s>[0-9.]+))"
        r"(?:.*?throughput per GPU \(TFLOP/s/GPU\): (?P<throughput>[0-9.]+))?",
        "NVIDIA/Megatron-LM megatron/training/training.py training_log(); "
        "microsoft/Megatron-DeepSpeed megatron/training.py training_log()",
        "TFLOP/s/GPU",
    ),
    # megatron/training/checkpointing.py save_checkpoint() / load_checkpoint().
    ProgressFormat(
        "megatron",
        "checkpoint_end",
        ("successfully saved checkpoint from iteration",),
        r"successfully saved checkpoint from iteration\s+(?P<step>\d+)",
        "NVIDIA/Megatron-LM megatron/training/checkpointing.py save_checkpoint()",
    ),
    ProgressFormat(
        "megatron",
        "checkpoint_start",
        ("saving checkpoint at iteration",),
        r"saving checkpoint at iteration\s+(?P<step>\d+)",
        "NVIDIA/Megatron-LM megatron/training/checkpointing.py save_checkpoint()",
    ),
    ProgressFormat(
        "megatron",
        "checkpoint_load",
        ("loading checkpoint from", "loading distributed checkpoint from"),
        r"^\s*loading (?:distributed )?checkpoint from",
        "NVIDIA/Megatron-LM megatron/training/checkpointing.py load_checkpoint()",
    ),
    # megatron/training/training.py evaluate() (verbose) and evaluate_and_print_results().
    ProgressFormat(
        "megatron",
        "eval_start",
        ("Evaluating on ",),
        r"Evaluating on \d+ samples",
        "NVIDIA/Megatron-LM megatron/training/training.py evaluate()",
    ),
    ProgressFormat(
        "megatron",
        "eval_step",
        ("Evaluating iter ",),
        r"Evaluating iter (?P<step>\d+)/\d+",
        "NVIDIA/Megatron-LM megatron/training/training.py evaluate()",
    ),
    ProgressFormat(
        "megatron",
        "eval_end",
        ("validation loss at iteration",),
        r"validation loss at iteration\s+(?P<step>\d+)",
        "NVIDIA/Megatron-LM megatron/training/training.py evaluate_and_print_results()",
    ),
    # print_datetime() around the training loop in megatron/training/training.py pretrain().
    ProgressFormat(
        "megatron",
        "startup",
        ("[before the start of training step]",),
        r"\[before the start of training step\]",
        "NVIDIA/Megatron-LM megatron/training/training.py pretrain()",
    ),
    ProgressFormat(
        "megatron",
        "train_end",
        ("[after training is done]",),
        r"\[after training is done\]",
        "NVIDIA/Megatron-LM megatron/training/training.py pretrain()",
    ),
    # NeMo 2.x (nemo/lightning/pytorch/callbacks, MegatronProgressBar without a bar): "Training
    # epoch 0, iteration 99/999 | lr: 3e-05 | global_batch_size: 8 | global_step: 99 |
    # reduced_train_loss: 1.2 | train_step_timing in s: 2.5 | consumed_samples: 800".
    ProgressFormat(
        "nemo",
        "step",
        ("train_step_timing in s: ",),
        r"Training epoch \d+, iteration \d+/\d+ \|.*?\bglobal_step: (?P<step>\d+) \|.*?"
        r"train_step_timing in s: (?P<step_time_s>[0-9.]+)",
        "NVIDIA/NeMo nemo/lightning/pytorch/callbacks/progress_printer.py; NeMo 2 user guide "
        "(training step logs)",
    ),
    # DeepSpeed pipeline engine, deepspeed/runtime/pipe/engine.py train_batch(): "steps: 100
    # loss: 2.3456 iter time (s): 1.234 samples/sec: 415.2" (forks print "step: 100 / 500").
    ProgressFormat(
        "deepspeed",
        "step",
        ("iter time (s): ",),
        r"\bsteps?: *(?P<step>\d+)(?: */ *\d+)? loss: \S+ .*?iter time \(s\): "
        r"(?P<step_time_s>[0-9.]+) samples/sec: (?P<throughput>[0-9.]+)",
        "microsoft/DeepSpeed deepspeed/runtime/pipe/engine.py PipelineEngine.train_batch()",
        "samples/s",
    ),
    # DeepSpeed's older ThroughputTimer: "0/100, SamplesPerSec=123.45, MemAllocated=..."
    # (epoch/local step).
    ProgressFormat(
        "deepspeed",
        "step",
        (", SamplesPerSec=",),
        r"(?:^|\s)\d+/(?P<step>\d+), SamplesPerSec=(?P<throughput>" + NUMBER + ")",
        "microsoft/DeepSpeed deepspeed/utils/timer.py ThroughputTimer.stop() (releases <= 0.5)",
        "samples/s",
    ),
    # MaxText, MaxText/metric_logger.py (older: train.py record_scalar_metrics): "completed
    # step: 100, seconds: 1.234, TFLOP/s/device: 180.1, Tokens/s/device: 5432.1, ...".
    ProgressFormat(
        "maxtext",
        "step",
        ("completed step: ",),
        r"completed step: (?P<step>\d+), seconds: (?P<step_time_s>[0-9.]+), TFLOP/s/device: "
        r"(?P<throughput>[0-9.]+)",
        "AI-Hypercomputer/maxtext MaxText/metric_logger.py; docs/guides/monitoring_and_debugging/"
        "understand_logs_and_metrics.md",
        "TFLOP/s/device",
    ),
    # nanoGPT, train.py: "iter 100: loss 2.3456, time 123.45ms, mfu 45.67%".
    ProgressFormat(
        "nanogpt",
        "step",
        (", time ",),
        r"\biter (?P<step>\d+): loss [-0-9.naif]+, time (?P<step_time_ms>[0-9.]+)ms",
        "karpathy/nanoGPT train.py",
    ),
    # LitGPT (litgpt/pretrain.py, finetune/*.py): "Epoch 1 | iter 100 step 25 | loss train:
    # 2.345, val: n/a | iter time: 123.45 ms (step) remaining time: 1:23:45"; lit-gpt before
    # it: "iter 100 step 25: loss 2.3456, iter time: 123.45ms (optimizer.step)" and, without
    # gradient accumulation, "iter 100: loss 2.3456, iter time: 123.45ms".
    ProgressFormat(
        "litgpt",
        "step",
        ("iter time: ",),
        r"\biter (?:\d+ step )?(?P<step>\d+) ?[:|].*?iter time: (?P<step_time_ms>[0-9.]+) ?ms",
        "Lightning-AI/litgpt litgpt/pretrain.py fit(); Lightning-AI/lit-gpt finetune/*.py",
    ),
    # lit-gpt's pretraining scripts: "iter 100: loss 2.3456, time: 123.45ms".
    ProgressFormat(
        "litgpt",
        "step",
        (", time: ",),
        r"\biter (?P<step>\d+): loss [-0-9.naif]+, time: (?P<step_time_ms>[0-9.]+) ?ms",
        "Lightning-AI/lit-gpt pretrain/redpajama.py train()",
    ),
    # fairseq, fairseq/logging/progress_bar.py (JsonProgressBar/SimpleProgressBar): "epoch 001:
    # 100 / 1000 loss=3.456, ..., ups=1.23, ..., num_updates=100, ..." (older releases lead
    # with "| "); ups is updates per second.
    ProgressFormat(
        "fairseq",
        "step",
        ("num_updates=",),
        r"\bepoch \d+:\s+\d+ / \d+ .*?\bups=(?P<it_per_s>[0-9.]+).*?\bnum_updates=(?P<step>\d+)",
        "facebookresearch/fairseq fairseq/logging/progress_bar.py SimpleProgressBar.print()",
    ),
    # OpenMMLab mmengine, mmengine/runner/log_processor.py: "Epoch(train)  [1][ 100/1000]
    # lr: 1.0000e-02  eta: 1:23:45  time: 0.5123  data_time: 0.0123  memory: 12345  loss:
    # 1.2345" (iteration-based: "Iter(train) [  100/80000]"); val/test loops alike.
    ProgressFormat(
        "mmengine",
        "step",
        ("(train)",),
        r"(?:Epoch|Iter)\(train\)\s+(?:\[\d+\])?\s*\[\s*(?P<step>\d+)/\d+\].*?\btime: "
        r"(?P<step_time_s>[0-9.]+)",
        "open-mmlab/mmengine mmengine/runner/log_processor.py LogProcessor.get_log_after_iter()",
    ),
    ProgressFormat(
        "mmengine",
        "eval_step",
        ("(val)", "(test)"),
        r"(?:Epoch|Iter)\((?:val|test)\)\s+(?:\[\d+\])?\s*\[\s*(?P<step>\d+)/\d+\]",
        "open-mmlab/mmengine mmengine/runner/log_processor.py LogProcessor.get_log_after_iter()",
    ),
    # mmcv 1.x TextLoggerHook: "Epoch [1][50/7330]\tlr: 1.990e-03, eta: 11:07:42, time: 0.456,
    # data_time: 0.050, memory: 3500, loss: 1.2" ("Iter [50/80000]" when iteration-based).
    ProgressFormat(
        "mmcv",
        "step",
        (", time: ",),
        r"(?:Epoch \[\d+\]\[|Iter \[)\s*(?P<step>\d+)/\d+\]\s+lr: .*?, time: "
        r"(?P<step_time_s>[0-9.]+)",
        "open-mmlab/mmcv mmcv/runner/hooks/logger/text.py TextLoggerHook._log_info()",
    ),
    # detectron2 CommonMetricPrinter: "eta: 1:23:45  iter: 99  total_loss: 1.234  ...  time:
    # 0.4567  last_time: 0.4512  data_time: 0.0123  ...  lr: 0.00999  max_mem: 12345M".
    ProgressFormat(
        "detectron2",
        "step",
        ("total_loss: ",),
        r"\biter: (?P<step>\d+)\s+total_loss: .*?\btime: (?P<step_time_s>[0-9.]+)",
        "facebookresearch/detectron2 detectron2/utils/events.py CommonMetricPrinter.write()",
    ),
    # torchvision references' MetricLogger.log_every (also DETR, DeiT, MAE): "Epoch: [0]
    # [ 100/5005]  eta: 0:41:21  lr: 0.1  img/s: 1234.5  loss: 6.5 (6.8)  time: 0.4567
    # (0.4612)  data: 0.0123 (0.0130)  max mem: 10000"; "Test:" loops are evaluation.
    ProgressFormat(
        "torchvision",
        "step",
        ("Epoch: [",),
        r"Epoch: \[\d+\]\s+\[\s*(?P<step>\d+)/\d+\]\s+eta: .*?\btime: (?P<step_time_s>[0-9.]+)",
        "pytorch/vision references/classification/utils.py MetricLogger.log_every()",
    ),
    # pytorch/examples imagenet ProgressMeter: "Epoch: [0][  100/5005]\tTime  0.456 ( 0.512)
    # \tData  0.012 ( 0.020)\tLoss 6.5e+00 (6.8e+00)\tAcc@1   0.39 (  0.12)".
    ProgressFormat(
        "pytorch-examples",
        "step",
        ("Epoch: [",),
        r"Epoch: \[\d+\]\[\s*(?P<step>\d+)/\d+\]\s+Time\s+(?P<step_time_s>[0-9.]+)",
        "pytorch/examples imagenet/main.py ProgressMeter.display()",
    ),
    # timm train.py: "Train: 0 [ 100/1251 (  8%)]  Loss: 6.789 (6.90)  Time: 0.456s, 2245.61/s
    # (0.478s, 2141.12/s)  LR: 1.000e-04  Data: 0.012 (0.015)".
    ProgressFormat(
        "timm",
        "step",
        ("Train: ",),
        r"\bTrain: \d+ \[\s*(?P<step>\d+)/\d+ \(\s*\d+%\)\]\s+Loss: .*?Time: "
        r"(?P<step_time_s>[0-9.]+)s,\s*(?P<throughput>[0-9.]+)/s",
        "huggingface/pytorch-image-models train.py train_one_epoch()",
        "samples/s",
    ),
    # torchtune recipes: the bar's description is "<epoch>|<global step>|Loss: <loss>"; the bar's
    # own counter restarts every epoch, the described step does not.
    ProgressFormat(
        "torchtune",
        "step",
        ("|Loss: ",),
        _TQDM_LAST + r"\b\d+\|(?P<step>\d+)\|Loss: [^|]*?\d+%\|[^|]*\|\s*\d+/\d+ "
        r"\[[0-9:]+<[0-9:?]+,\s*(?:" + _TQDM_RATE + r"|\?it/s)",
        "pytorch/torchtune recipes/full_finetune_distributed.py (pbar.set_description)",
        once=("|Loss: ",),
    ),
    # torchtune's StdoutLogger (torchtune/training/metric_logging.py): "Step 100 | loss:2.345
    # lr:2e-05 tokens_per_second_per_gpu:1532.2 ".
    ProgressFormat(
        "torchtune",
        "step",
        (" | loss:",),
        r"\bStep (?P<step>\d+) \| loss:\S+"
        r"(?:.*?\btokens_per_second_per_gpu:(?P<throughput>[0-9.]+))?",
        "pytorch/torchtune torchtune/training/metric_logging.py StdoutLogger.log_dict()",
        "tokens/s/GPU",
    ),
    # Keras Progbar (keras/utils/generic_utils.py, Keras 3 keras/src/utils/progbar.py):
    # "  100/1875 [>....] - ETA: 1s - loss: 0.5", "1875/1875 [=====] - 5s 2ms/step - loss: 0.3"
    # and Keras 3's "  100/1875 ━━━━━━━━━━━━━━━━━━━━ 1s 1ms/step - accuracy: 0.8 - loss: 0.5";
    # a bar without metrics is predict(). evaluate() prints the same bar with its metrics,
    # over the test set's batches (keras/src/callbacks/progbar_logger.py: a new Progbar with
    # the test steps as its target): a smaller total than fit()'s bars (TOTAL).
    ProgressFormat(
        "keras",
        "step",
        ("s/step", "- ETA: ", "━"),
        r"^\s*(?P<step>\d+)/(?P<total>\d+) (?:\[[=>.]*\]|━+)\s+(?:- )?(?:ETA: )?\S+"
        r"(?: (?:(?P<step_time_s>[0-9.]+)s|(?P<step_time_ms>[0-9.]+)ms"
        r"|(?P<step_time_us>[0-9.]+)us)/step)? - \w+: ",
        "keras-team/keras keras/src/utils/progbar.py Progbar.update(); tf-keras "
        "keras/utils/generic_utils.py",
    ),
    # Levanter (src/levanter/callbacks/_metrics.py pbar_logger: a tqdm_loggable bar described
    # "train", its postfix the loss), logged once a minute by tqdm_loggable's display()
    # (tqdm_loggable/tqdm_logging.py): "Progress on:train 1.23kit/10.0kit rate:1.1it/s
    # remaining:2:10:12 elapsed:18:40 postfix:loss=2.94". The counts are tqdm's format_sizeof
    # ("5.00it", "15.0it", "150it", "1.23kit"): a count with an SI prefix is rounded, so it
    # gives no step number; without a total the count is printed bare ("150/-").
    ProgressFormat(
        "levanter",
        "step",
        ("Progress on:",),
        r"Progress on:(?P<desc>.*?) (?:(?P<step>[0-9]+(?:\.[0-9]+)?)(?:it)?|[0-9.]+[kMGTPEZY]it)/"
        r"\S+ rate:(?:(?P<it_per_s>[0-9.,]+)it/s|-) remaining:",
        "stanford-crfm/levanter src/levanter/callbacks/_metrics.py pbar_logger(); "
        "tradingstrategy-ai/tqdm-loggable tqdm_loggable/tqdm_logging.py tqdm_logging.display()",
        bar=True,
    ),
    # t5x's train metrics through CLU's LoggingWriter (clu/metric_writers/logging_writer.py
    # write_scalars: "[step] collection=<name> k=v, ..." sorted by key; t5x/models.py names
    # the rates "timing/steps_per_second", "timing/seqs_per_second", ...). The evaluation
    # collections ("training_eval/<task>") are no training steps.
    ProgressFormat(
        "t5x",
        "step",
        ("timing/steps_per_second=",),
        r"^\[(?P<step>\d+)\](?: collection=(?P<desc>\S+))? .*?\btiming/steps_per_second="
        r"(?P<it_per_s>[0-9.]+(?:e[-+]?[0-9]+)?)",
        "google/CommonLoopUtils clu/metric_writers/logging_writer.py write_scalars(); "
        "google-research/t5x t5x/models.py (timing metrics), t5x/trainer.py MetricsManager",
        bar=True,
    ),
    # paxml: the train program logs "steps/sec: 1.234567" (paxml/programs.py
    # _compute_steps_per_sec), then its summary "Metrics values at step 100:" and one
    # "  name=value (weight=...)" line per metric (paxml/summary_utils.py write_summary_entry).
    # The rate line is the step; the summary line after it gives its number. Evaluation
    # summaries print the same "Metrics values" line with no rate line of their own.
    ProgressFormat(
        "paxml",
        "step",
        ("steps/sec: ",),
        r"^steps/sec: (?P<it_per_s>[0-9.]+)$",
        "google/paxml paxml/programs.py _compute_steps_per_sec()",
    ),
    ProgressFormat(
        "paxml",
        "part",
        ("Metrics values at step ",),
        r"^Metrics values at step (?P<step>\d+):$",
        "google/paxml paxml/summary_utils.py write_summary_entry()",
    ),
    # OLMo (olmo/train.py Trainer.log_metrics_to_console): one record over several lines,
    # "[step=100/739328]" then "    train/CrossEntropyLoss=2.345", ...,
    # "    throughput/device/batches_per_second=0.4567", ...
    ProgressFormat(
        "olmo",
        "step",
        ("[step=",),
        r"\[step=(?P<step>\d+)/\d+\]",
        "allenai/OLMo olmo/train.py Trainer.log_metrics_to_console()",
    ),
    ProgressFormat(
        "olmo",
        "part",
        ("throughput/device/batches_per_second=",),
        r"^\s*throughput/device/batches_per_second=(?P<it_per_s>[0-9.]+)",
        "allenai/OLMo olmo/train.py Trainer.log_metrics_to_console()",
    ),
    # Composer's ConsoleLogger (also llm-foundry): "[batch=100/4800]:" (or
    # "[epoch=1][batch=100/1000]:"), then one "\t Train <name>: <value>" line per metric;
    # SpeedMonitor adds "Train throughput/batches_per_sec". "[Eval batch=5/50]" is evaluation.
    ProgressFormat(
        "composer",
        "step",
        ("[batch=",),
        r"^(?:\[epoch=\d+\])?\[batch=(?P<step>\d+)(?:/\d+)?\]:?\s*$",
        "mosaicml/composer composer/loggers/console_logger.py ConsoleLogger.log_to_console()",
    ),
    ProgressFormat(
        "composer",
        "part",
        ("Train throughput/batches_per_sec: ",),
        r"^\s*Train throughput/batches_per_sec: (?P<it_per_s>[0-9.eE+-]+)",
        "mosaicml/composer composer/callbacks/speed_monitor.py SpeedMonitor",
    ),
    ProgressFormat(
        "composer",
        "eval_step",
        ("[Eval batch=",),
        r"\[Eval batch=(?P<step>\d+)/\d+\]",
        "mosaicml/composer composer/loggers/console_logger.py _get_eval_progress_string()",
    ),
    # NeMo (Lightning bar plus NeMo's metrics): "Epoch 0: : 120/1000 [02:00<14:40, v_num=0,
    # reduced_train_loss=2.34, global_step=119.0, consumed_samples=30720.0,
    # train_step_timing in s=1.01]"; global_step is rounded ("2e+3"), so the counter is used.
    ProgressFormat(
        "nemo",
        "step",
        ("train_step_timing in s=",),
        _TQDM_LAST + r"Epoch \d+: .*?(?P<step>\d+)(?:/\d+ | ?it )\[[^\]]*?"
        r"train_step_timing in s=(?P<step_time_s>[0-9.]+)",
        "NVIDIA/NeMo nemo/utils/callbacks (TimingCallback) on Lightning's TQDMProgressBar",
        once=("Epoch ",),  # a match starts with it
    ),
    # PyTorch Lightning TQDMProgressBar: "Epoch 0:  12%|█▏   | 120/1000 [02:00<14:40,
    # 1.00it/s, v_num=0, train_loss=2.340]", or "Epoch 0: : 120it [02:00, 1.00it/s, v_num=0]"
    # for a loader of unknown length; the counter restarts every epoch. The text before the
    # counter is matched lazily, so a bar-less line's counter is read whole (not its last digit).
    ProgressFormat(
        "lightning",
        "step",
        ("Epoch ",),
        _TQDM_LAST + r"Epoch \d+:[^|\[]*?(?:\|[^|]*\|)?\s*(?P<step>\d+)(?:/\d+| ?it) "
        r"\[[^,\]]*(?:,\s*" + _TQDM_RATE + r")?",
        "Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/progress/tqdm_progress.py",
        once=("Epoch ",),  # a match starts with it
        strict=r"^Epoch [0-9]+: +[0-9]+%\|[^|\r}]*\| (?P<step>[0-9]+)/[0-9]+ "
        + _BAR_TIMES
        + _BAR_RATE,
    ),
    ProgressFormat(
        "lightning",
        "eval_step",
        ("DataLoader ",),
        r"(?:Validation|Sanity Checking|Testing|Predicting) DataLoader \d+:",
        "Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/progress/tqdm_progress.py",
    ),
    ProgressFormat(
        "lightning",
        "checkpoint_start",
        (", saving model to ",),
        r"Epoch \d+, global step (?P<step>\d+): .*, saving model to ",
        "Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/model_checkpoint.py",
    ),
    ProgressFormat(
        "lightning",
        "train_end",
        ("`Trainer.fit` stopped",),
        r"`Trainer\.fit` stopped",
        "Lightning-AI/pytorch-lightning src/lightning/pytorch/loops/fit_loop.py",
    ),
    # torchtitan, torchtitan/components/metrics.py MetricsProcessor.log() (older: train.py):
    # "step: 10  loss:  9.1234  memory: 45.67GiB(48.12%)  tps: 5,432  tflops: 123.45
    #  mfu: 39.57%" (older releases print "wps:"); colour escapes are stripped first.
    ProgressFormat(
        "torchtitan",
        "step",
        ("loss:",),
        r"\bstep:\s*(?P<step>\d+)\b.*?\bloss:.*?\b(?:tps|wps): (?P<throughput>[0-9,]+)",
        "pytorch/torchtitan torchtitan/components/metrics.py",
        "tokens/s",
    ),
    ProgressFormat(
        "torchtitan",
        "checkpoint_end",
        ("Finished saving the checkpoint",),
        r"Finished saving the checkpoint",
        "pytorch/torchtitan torchtitan/components/checkpoint.py CheckpointManager.save()",
    ),
    ProgressFormat(
        "torchtitan",
        "checkpoint_start",
        ("Saving the checkpoint", "Saving a full checkpoint", "Saving a model only checkpoint"),
        r"Saving (?:the checkpoint|a (?:full|model only) checkpoint)",
        "pytorch/torchtitan torchtitan/components/checkpoint.py CheckpointManager.save()",
    ),
    ProgressFormat(
        "torchtitan",
        "checkpoint_load",
        ("Loading the checkpoint",),
        r"Loading the checkpoint",
        "pytorch/torchtitan torchtitan/components/checkpoint.py CheckpointManager.load()",
    ),
    ProgressFormat(
        "torchtitan",
        "startup",
        ("Training starts at step",),
        r"Training starts at step",
        "pytorch/torchtitan torchtitan/train.py Trainer.train()",
    ),
    ProgressFormat(
        "torchtitan",
        "train_end",
        ("Training completed",),
        r"\bTraining completed\b",
        "pytorch/torchtitan torchtitan/train.py Trainer.train()",
    ),
    # DeepSpeed: engine.py _report_progress() "[Rank 0] step=100, skipped=0, lr=[...], mom=..."
    # and utils/timer.py ThroughputTimer "epoch=0/micro_step=100/global_step=100,
    # RunningAvgSamplesPerSec=123.45, CurrSamplesPerSec=120.1, MemAllocated=12.3GB, ...".
    ProgressFormat(
        "deepspeed",
        "step",
        ("CurrSamplesPerSec=",),
        r"global_step=(?P<step>\d+), RunningAvgSamplesPerSec="
        + NUMBER
        + r", CurrSamplesPerSec=(?P<throughput>"
        + NUMBER
        + ")",
        "microsoft/DeepSpeed deepspeed/utils/timer.py ThroughputTimer.stop()",
        "samples/s",
    ),
    ProgressFormat(
        "deepspeed",
        "step",
        (", skipped=",),
        r"\bstep=(?P<step>\d+), skipped=\d+",
        "microsoft/DeepSpeed deepspeed/runtime/engine.py DeepSpeedEngine._report_progress()",
    ),
    ProgressFormat(
        "deepspeed",
        "checkpoint_start",
        ("Saving model checkpoint: ",),
        r"Saving model checkpoint: ",
        "microsoft/DeepSpeed deepspeed/runtime/engine.py DeepSpeedEngine._save_checkpoint()",
    ),
    ProgressFormat(
        "deepspeed",
        "checkpoint_end",
        ("is ready now!",),
        r"Checkpoint \S+ is ready now!",
        "microsoft/DeepSpeed deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py",
    ),
    ProgressFormat(
        "deepspeed",
        "checkpoint_load",
        ("Loading checkpoint from",),
        r"\[Torch\] Loading checkpoint from",
        "microsoft/DeepSpeed deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py",
    ),
    # Hugging Face Trainer: ProgressCallback.on_log writes str(logs) (transformers/
    # trainer_callback.py); the train dict has no step number. Trainer logs the phases.
    ProgressFormat(
        "hf",
        "eval_end",
        ("{'eval_",),
        r"^\s*\{'eval_[a-z_]+': ",
        "huggingface/transformers src/transformers/trainer_callback.py ProgressCallback.on_log",
    ),
    ProgressFormat(
        "hf",
        "train_end",
        ("{'train_runtime': ",),
        r"^\s*\{'train_runtime': ",
        "huggingface/transformers src/transformers/trainer.py Trainer._inner_training_loop",
    ),
    ProgressFormat(
        "hf",
        "eval_start",
        ("***** Running Evaluation *****",),
        r"\*\*\*\*\* Running Evaluation \*\*\*\*\*",
        "huggingface/transformers src/transformers/trainer.py Trainer.evaluation_loop",
    ),
    ProgressFormat(
        "hf",
        "startup",
        ("***** Running training *****",),
        r"\*\*\*\*\* Running training \*\*\*\*\*",
        "huggingface/transformers src/transformers/trainer.py Trainer._inner_training_loop",
    ),
    ProgressFormat(
        "hf",
        "checkpoint_start",
        ("Saving model checkpoint to ",),
        r"Saving model checkpoint to ",
        "huggingface/transformers src/transformers/trainer.py Trainer._save",
    ),
    # A bare tqdm bar (Hugging Face Trainer's, or any loop's): " 12%|█▏  | 120/1000
    # [02:00<14:40,  1.00s/it]"; the rate reads "?it/s" until tqdm has one. Its description
    # (the text before the percentage, after the last \r or a message printed on the same
    # line) says which loop it is: loading, evaluation, tokenising... bars are no steps. The
    # Trainer's evaluation bar has no description (ProgressCallback.on_prediction_step: a bar
    # of len(eval_dataloader), beside the training bar of max_steps): its smaller total tells it
    # apart (TOTAL).
    ProgressFormat(
        "tqdm",
        "step",
        ("s/it", "it/s"),
        _TQDM_LAST + r"(?:^|[\r}])(?P<desc>[^\r}|]*?)\s*\d+%\|[^|]*\|\s*(?P<step>\d+)/"
        r"(?P<total>\d+) "
        r"\[[0-9:]+<[0-9:?]+,\s*(?:" + _TQDM_RATE + r"|\?it/s)",
        "tqdm/tqdm tqdm/std.py format_meter (default bar format)",
        bar=True,
        # A match ends with its rate, and holds no "|" after the one it starts with.
        once=("s/it", "it/s"),
        strict=r"^(?P<desc>) *[0-9]+%\|[^|\r}]*\| *(?P<step>[0-9]+)/(?P<total>[0-9]+) "
        + _BAR_TIMES
        + _BAR_RATE,
    ),
    # tqdm without a total (an iterable without len()): "Training: 120it [02:00,  1.00it/s]".
    ProgressFormat(
        "tqdm",
        "step",
        ("it [",),
        _TQDM_LAST + r"(?:^|[\r}])(?P<desc>[^\r}|]*?)\b(?P<step>\d+)it "
        r"\[[0-9:]+(?:<[0-9:?]+)?,\s*(?:" + _TQDM_RATE + r"|\?it/s)",
        "tqdm/tqdm tqdm/std.py format_meter (no total: n_fmt + 'it', elapsed, rate)",
        bar=True,
        once=("it [",),
    ),
    # Ultralytics' own bar (ultralytics/utils/tqdm.py TQDM._display, 8.3.x): "<desc>: 45%
    # ━━━━━╸────── 100/222 3.4it/s 30.1s<35.9s", each update behind "\r\x1b[K"; the rate is
    # always in it/s. The training bar's description is its epoch, memory and losses; the
    # validation bar's is its metrics' column heads (LOOKALIKE).
    ProgressFormat(
        "ultralytics",
        "step",
        ("% ━", "% ─", "% ╸"),
        _TQDM_LAST + r"(?:^|\r|\x1b\[K)(?P<desc>[^\r\x1b]*?): \d+% [━─╸]+ (?P<step>\d+)/"
        r"(?P<total>\d+) (?P<it_per_s>[0-9.]+)it/s",
        "ultralytics/ultralytics ultralytics/utils/tqdm.py TQDM._display",
        bar=True,
        once=("% ━", "% ─", "% ╸"),
    ),
    # veRL's console logger (verl/utils/logger/aggregate_logger.py concat_dict_to_str):
    # "step:12 - key:value - ...", the trainer's metrics in order; the step's duration is
    # timing_s/step, after the phases' timing_s/gen, timing_s/update_actor... Under Ray the
    # driver's lines carry "(TaskRunner pid=N) ".
    ProgressFormat(
        "verl",
        "step",
        ("timing_s/step:",),
        r"(?:^|pid=\d+(?:, ip=[0-9.]+)?\) )step:(?P<step>\d+) - .*?\btiming_s/step:"
        r"(?:np\.float64\()?(?P<step_time_s>[0-9.]+(?:[eE][+-]?[0-9]+)?)"
        r"(?:.* - perf/throughput:(?:np\.float64\()?(?P<throughput>[0-9.]+))?",
        "volcengine/verl verl/utils/logger/aggregate_logger.py concat_dict_to_str; "
        "verl/trainer/ppo/metric_utils.py compute_timing_metrics, compute_throughout_metrics",
        "tokens/s/GPU",
    ),
    # nanotron (src/nanotron/trainer.py train_step_logs, values through logging.human_format:
    # 3 significant digits and a K/M/G suffix): "iteration: 10 / 100 | consumed_tokens: 1.31M |
    # elapsed_time_per_iteration_ms: 1.23K | tokens_per_sec: 106K | tokens_per_sec_per_gpu:
    # 13.3K | ...".
    ProgressFormat(
        "nanotron",
        "step",
        ("elapsed_time_per_iteration_ms: ",),
        r"iteration: (?P<step>\d+) / \d+ \|.*? elapsed_time_per_iteration_ms: "
        r"(?P<step_time_ms>[0-9.]+[KMG]?) \|"
        r"(?:.*? tokens_per_sec_per_gpu: (?P<throughput>[0-9.]+[KMG]?) \|)?",
        "huggingface/nanotron src/nanotron/trainer.py train_step_logs; src/nanotron/logging.py",
        "tokens/s/GPU",
    ),
    # PaddleDetection (ppdet/engine/callbacks.py LogPrinter.on_step_end): "Epoch: [0] [  20/
    # 1000] learning_rate: 0.000100 loss: ... eta: 1:23:45 batch_cost: 0.5123 data_cost: 0.0012
    # ips: 15.6152 images/s"; the counter is the iteration within the epoch.
    ProgressFormat(
        "paddledetection",
        "step",
        ("batch_cost: ",),
        r"Epoch: \[\d+\] \[\s*(?P<step>\d+)/\d+\] .*?batch_cost: (?P<step_time_s>[0-9.]+)"
        r"(?:.*? ips: (?P<throughput>[0-9.]+) images/s)?",
        "PaddlePaddle/PaddleDetection ppdet/engine/callbacks.py LogPrinter",
        "images/s",
    ),
    # PaddleOCR (tools/program.py train): "epoch: [1/500], global_step: 10, lr: 0.001000,
    # loss: ..., avg_reader_cost: 0.01234 s, avg_batch_cost: 0.54321 s, avg_samples: 16.0,
    # ips: 29.45443 samples/s, eta: 1:23:45"; the batch cost is the mean step over the interval.
    ProgressFormat(
        "paddleocr",
        "step",
        ("avg_batch_cost: ",),
        r"global_step: (?P<step>\d+), .*?avg_batch_cost: (?P<step_time_s>[0-9.]+) s, "
        r"avg_samples: [0-9.]+, ips: (?P<throughput>[0-9.]+) samples/s",
        "PaddlePaddle/PaddleOCR tools/program.py train()",
        "samples/s",
    ),
    # ESPnet (espnet2/train/reporter.py SubReporter.log_message, from espnet2/train/trainer.py
    # every log_interval batches): "1epoch:train:101-200batch: iter_time=..., forward_time=...,
    # loss=..., backward_time=..., optim_step_time=..., optim0_lr0=..., train_time=0.456", the
    # batch count within the epoch; iter_time is the wait for data, train_time the whole step.
    ProgressFormat(
        "espnet",
        "step",
        ("epoch:train:",),
        r"\d+epoch:train:\d+-(?P<step>\d+)batch: .*?\btrain_time="
        r"(?P<step_time_s>[0-9.]+(?:e[-+][0-9]+)?)",
        "espnet/espnet espnet2/train/reporter.py SubReporter.log_message; espnet2/train/trainer.py",
    ),
    # TensorFlow 1.x Estimator (tensorflow/python/training/basic_session_run_hooks.py
    # LoggingTensorHook, every log_step_count_steps): "loss = 0.8123, step = 1200 (28.985 sec)",
    # the seconds those steps took together; StepCounterHook's "global_step/sec: 3.45" is a
    # rate line of its own. The step line gives no one step's duration.
    ProgressFormat(
        "tf_estimator",
        "step",
        (", step = ",),
        r"\bloss = [^,]+, step = (?P<step>\d+) \([0-9.]+ sec\)",
        "tensorflow/tensorflow tensorflow/python/training/basic_session_run_hooks.py "
        "LoggingTensorHook; tensorflow_estimator estimator.py (its {'loss', 'step'} tensors)",
    ),
    # MindSpore's LossMonitor (mindspore/train/callback/_loss_monitor.py step_end): "epoch: 1
    # step: 100, loss is 2.3025", the step within the epoch; no duration.
    ProgressFormat(
        "mindspore",
        "step",
        (", loss is ",),
        r"epoch: \d+ step: (?P<step>\d+), loss is ",
        "mindspore-ai/mindspore mindspore/python/mindspore/train/callback/_loss_monitor.py",
    ),
    # ms-swift's log dict (swift/trainers/mixin.py _maybe_log_save_evaluate): the Trainer's
    # dict with 'train_speed(iter/s)' (steps per second since the start) and the step as
    # 'global_step/max_steps': 'N/M'.
    ProgressFormat(
        "swift",
        "step",
        ("'global_step/max_steps': '",),
        r"\{'loss': (?:.*?'train_speed\((?:iter/s\)': (?P<it_per_s>[0-9.]+)|s/it\)': "
        r"(?P<s_per_it>[0-9.]+)))?.*?'global_step/max_steps': '(?P<step>\d+)/\d+'",
        "modelscope/ms-swift swift/trainers/mixin.py (logs['train_speed(iter/s)']); the dict's "
        "'global_step/max_steps' as quoted in ms-swift's own tests and public issue threads",
    ),
    # Hugging Face Trainer's log dict, also after a bar on the same line (the bar is read
    # first, above); the dict has no step number.
    ProgressFormat(
        "hf",
        "step",
        ("{'loss': ",),
        r"\{'loss': ",
        "huggingface/transformers src/transformers/trainer_callback.py ProgressCallback.on_log",
    ),
    # fastai's epoch table (fastai/callback/progress.py ProgressCallback._write_stats: each value
    # as f"{v:.6f}" when a float, else str(v); fastprogress/fastprogress.py
    # ConsoleMasterBar.write(table=True): a header of the names padded to 8 and joined by two
    # spaces, then one row per epoch, each value padded to its name's width plus two; the time
    # column is fastprogress's format_time, "mm:ss" or "h:mm:ss"). A row holds no word: it is
    # the epoch number, a 6-decimal float (or "#na#", a metric with no validation set), more
    # values, and the clock last. One row is one epoch, its time the epoch's.
    ProgressFormat(
        "fastai",
        "step",
        (),
        r"^(?P<step>[0-9]+) {2,}(?:-?[0-9]+\.[0-9]{6}|#na#)"
        r"(?: {2,}(?:-?[0-9]+(?:\.[0-9]{6})?|#na#|None))*"
        r" {2,}(?P<step_time_clock>(?:[0-9]+:)?[0-9]{2}:[0-9]{2}) *$",
        "fastai/fastai fastai/callback/progress.py ProgressCallback._write_stats; "
        "fastai/fastprogress fastprogress/fastprogress.py ConsoleMasterBar.write, format_time",
    ),
    # slurmstepd: "*** JOB 4242 ON n1 CANCELLED AT 2026-03-01T10:00:00 ***" (also "... DUE TO
    # TIME LIMIT ***"): the job is ending on purpose, whatever its log says next.
    ProgressFormat(
        "slurm",
        "job_end",
        (" CANCELLED AT ",),
        r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT ",
        "SchedMD/slurm src/slurmd/slurmstepd/req.c (job/step cancel message)",
    ),
)
