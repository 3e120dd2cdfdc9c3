"""Progress extraction: training steps and phases (checkpoint, evaluation, start, end) from logs.

The ``progress`` stream has one row per log line that says a job moved on: a training step
(with its step number, and its step time or throughput when the framework prints them), or a
phase event (checkpoint save/load, evaluation, training start/end, the scheduler cancelling the
job). The hang and straggler detectors read it; it is derived once per logs batch.

The formats are data (``FORMATS``), each row citing where its text comes from. One literal
prefilter (over every format's anchor) picks the candidate lines; each candidate is then tried
only with the formats whose anchor it holds, by priority, and the first that matches reads it
(``first_match``). Operators add their own formats with ``[parsers.progress]`` in medic.toml
(tried on every candidate line)::

    [[parsers.progress.patterns]]
    pattern = 'it (?P<step>\\d+) took (?P<step_time_s>[\\d.]+)s'
    framework = "mytrainer"          # optional, default "custom"
    event = "step"                   # optional, one of EVENTS

A pattern uses Rust regex syntax (no look-around) and names its values with the groups in
``FIELDS``; user patterns are tried before the built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl
import pyarrow as pa

from medic.detectors.base import register_parser
from medic.ingest.base import Batch
from medic.ingest.first_match import PATTERN, ROW, FirstMatch, Shortcut
from medic.parse.prefixes import PrefixStripper
from medic.schema import TIME

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
)
"""What a progress row says. ``step``: a training step finished. ``eval_step``: an evaluation
batch finished. ``*_start``/``*_end``: a phase boundary (a later ``step`` also closes a phase).
``train_end``: the training loop returned. ``job_end``: the scheduler cancelled the job."""

FIELDS = ("step", "step_time_s", "step_time_ms", "throughput", "it_per_s", "s_per_it")
"""Named groups a format may capture; step time is normalised to seconds."""

PROGRESS = pa.schema(
    [
        pa.field("time", TIME, nullable=False),
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("rank", pa.int32()),
        pa.field("framework", pa.string(), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("step", pa.int64()),
        pa.field("step_time_s", pa.float64()),
        pa.field("throughput", pa.float64()),
        pa.field("throughput_unit", pa.string()),
    ]
)

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
    tried with this format only when it holds one of them."""
    pattern: str
    """Rust regex, named groups from FIELDS."""
    source: str
    unit: str | None = None
    """Unit of the ``throughput`` group."""
    once: tuple[str, ...] = ()
    """For a format that reads the last of several matches on a line (its pattern begins with
    ``^.*``): literals of which each match holds one, at a place that fixes where the match
    starts. A line holding them at most once in all can match at one place only: it is read
    without the ``^.*``, which costs half as much to capture."""

    def __post_init__(self) -> None:
        if self.once and not self.pattern.startswith(_TQDM_LAST):
            raise ValueError(f"{self.framework} {self.event}: 'once' needs a pattern led by ^.*")

    def shortcut(self) -> Shortcut | None:
        """The pattern without its ``^.*``, for the lines holding ``once`` at most once."""
        if not self.once:
            return None
        return Shortcut(self.pattern.removeprefix(_TQDM_LAST), self.once)


_TQDM_RATE = r"(?:(?P<s_per_it>[0-9.]+)s/it|(?P<it_per_s>[0-9.]+)it/s)"

FORMATS: tuple[ProgressFormat, ...] = (
    # Megatron-LM, megatron/training/training.py training_log(), printed by the last rank:
    # " [2026-03-01 10:12:03] iteration      100/  500000 | consumed samples: ... |
    #  elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 180.3 | ..."
    ProgressFormat(
        "megatron",
        "step",
        ("elapsed time per iteration (ms)",),
        r"iteration\s+(?P<step>\d+)/\s*\d+ \|.*?elapsed time per iteration \(ms\): "
        r"(?P<step_time_ms>[0-9.]+)(?:.*?throughput per GPU \(TFLOP/s/GPU\): "
        r"(?P<throughput>[0-9.]+))?",
        "NVIDIA/Megatron-LM megatron/training/training.py training_log()",
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
    # 1.00it/s, v_num=0, train_loss=2.340]"; the counter restarts every epoch.
    ProgressFormat(
        "lightning",
        "step",
        ("Epoch ",),
        _TQDM_LAST + r"Epoch \d+:[^|\[]*(?:\|[^|]*\|)?\s*(?P<step>\d+)(?:/\d+| ?it) "
        r"\[[^,\]]*(?:,\s*" + _TQDM_RATE + r")?",
        "Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/progress/tqdm_progress.py",
        once=("Epoch ",),  # a match starts with it
    ),
    ProgressFormat(
        "lightning",
        "eval_step",
        ("DataLoader ",),
        r"(?:Validation|Sanity Checking) DataLoader \d+:",
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
        "step",
        ("{'loss': ",),
        r"^\s*\{'loss': ",
        "huggingface/transformers src/transformers/trainer_callback.py ProgressCallback.on_log",
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
    # [02:00<14:40,  1.00s/it]"; the rate reads "?it/s" until tqdm has one.
    ProgressFormat(
        "tqdm",
        "step",
        ("s/it", "it/s"),
        _TQDM_LAST + r"\|\s*(?P<step>\d+)/\d+ \[[0-9:]+<[0-9:?]+,\s*(?:" + _TQDM_RATE + r"|\?it/s)",
        "tqdm/tqdm tqdm/std.py format_meter (default bar format)",
        # A match ends with its rate, and holds no "|" after the one it starts with.
        once=("s/it", "it/s"),
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


@dataclass(frozen=True)
class CustomPattern:
    """A site's own progress line: a regex with named groups from FIELDS."""

    pattern: str
    """A regular expression whose named groups are progress fields: step, step_time_s,
    step_time_ms, throughput, it_per_s, s_per_it."""
    framework: str = "custom"
    """The ``framework`` column of the lines it matches."""
    event: str = "step"
    """What a match is: step, eval_step, eval_start, eval_end, checkpoint_start,
    checkpoint_end, checkpoint_load, startup, train_end or job_end."""
    unit: str | None = None
    """Unit of the throughput group, when the pattern has one."""

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"event must be one of {', '.join(EVENTS)}, got {self.event!r}")
        groups = _named_groups(self.pattern)
        unknown = sorted(groups - set(FIELDS))
        if unknown:
            raise ValueError(f"pattern group '{unknown[0]}' is not one of {', '.join(FIELDS)}")


@dataclass(frozen=True)
class ProgressConfig:
    """``[parsers.progress]``: extra formats, tried before the built-in ones."""

    patterns: tuple[CustomPattern, ...] = ()
    """The site's own progress formats."""


def _named_groups(pattern: str) -> set[str]:
    """The named groups of a Rust regex; ValueError naming the problem when it does not compile."""
    try:
        extracted = pl.Series([""], dtype=pl.String).str.extract_groups(pattern)
    except pl.exceptions.ComputeError as exc:
        first = str(exc).splitlines()
        raise ValueError(
            f"pattern {pattern!r} is not a valid regex ({first[-1].strip()})"
        ) from None
    names = {f.name for f in extracted.dtype.fields}  # type: ignore[attr-defined]
    return {name for name in names if not name.isdigit()}


def _compiled_formats(config: ProgressConfig) -> tuple[ProgressFormat, ...]:
    custom = tuple(
        ProgressFormat(p.framework, p.event, (), p.pattern, "medic.toml [parsers.progress]", p.unit)
        for p in config.patterns
    )
    return custom + FORMATS


@register_parser
class ProgressParser:
    """logs -> progress: one row per step or phase line of a known (or configured) format."""

    name: ClassVar[str] = "progress"
    input_stream: ClassVar[str] = "logs"
    output_stream: ClassVar[str] = "progress"
    row_wise: ClassVar[bool] = True
    """Each output row comes from one input row: batches may be parsed together."""
    Config: ClassVar[type] = ProgressConfig
    strips_prefixes: ClassVar[bool] = True
    """Reads lines without their launchers' and shippers' prefixes (``build_parsers``)."""

    def __init__(
        self, config: ProgressConfig | None = None, prefixes: PrefixStripper | None = None
    ) -> None:
        self.config = config or ProgressConfig()
        self.prefixes = prefixes or PrefixStripper()
        self.formats = _compiled_formats(self.config)
        self._first = FirstMatch(
            [f.pattern for f in self.formats],
            [f.anchors for f in self.formats],
            FIELDS,
            [f.shortcut() for f in self.formats],
        )
        self._prefilter = self._first.candidates(pl.col("message"))
        self._measures, self._output = self._output_columns()

    def parse(self, batch: Batch) -> Batch | None:
        frame = batch.frame
        if frame.is_empty() or "message" not in frame.columns:
            return None
        frame = self.prefixes.strip(frame)
        candidates = frame.filter(pl.col("job_id").is_not_null() & self._prefilter)
        if candidates.is_empty():
            return None
        message = candidates.get_column("message")
        read = self._first.read(message, message.str.replace_all(ANSI_ESCAPE, ""))
        if read.is_empty():
            return None
        rows = (
            candidates[read.get_column(ROW)]
            .hstack(_without_commas(read.drop(ROW)))
            .with_columns(self._measures)
            .select(self._output)
            .sort("time", maintain_order=True)
        )
        return Batch.from_frame(self.output_stream, rows, PROGRESS)

    def _output_columns(self) -> tuple[list[pl.Expr], list[pl.Expr]]:
        """From a read line: its values (the step time normalised to seconds), then the output
        columns with its format's meaning."""

        def value(name: str) -> pl.Expr:
            return pl.col(name).cast(pl.Float64, strict=False)

        measures = [
            value("step").cast(pl.Int64, strict=False).alias("_step"),
            pl.coalesce(
                value("step_time_s"),
                _divided(value("step_time_ms"), 1000.0),
                value("s_per_it"),
                1.0 / value("it_per_s"),
            ).alias("_step_time"),
            value("throughput").alias("_throughput"),
        ]
        chosen = pl.col(PATTERN)

        def pick(attribute: str) -> pl.Expr:
            values = [getattr(f, attribute) for f in self.formats]
            return pl.lit(pl.Series(values, dtype=pl.String)).gather(chosen)

        step_time, throughput = pl.col("_step_time"), pl.col("_throughput")
        rank = pl.coalesce(
            pl.col("rank"),
            pl.col("prefix_rank"),
            pl.col("message").str.extract(RANK_IN_TEXT, 1).cast(pl.Int32, strict=False),
        )
        output = [
            pl.col("time"),
            pl.col("job_id"),
            pl.col("node"),
            rank.alias("rank"),
            pick("framework").alias("framework"),
            pick("event").alias("event"),
            pl.col("_step").alias("step"),
            pl.when(step_time.is_finite() & (step_time > 0)).then(step_time).alias("step_time_s"),
            throughput.alias("throughput"),
            pl.when(throughput.is_not_null()).then(pick("unit")).alias("throughput_unit"),
        ]
        return measures, output


def _without_commas(values: pl.DataFrame) -> pl.DataFrame:
    """The fields with their thousands separators dropped ("tps: 12,345"). Few batches hold
    one: looking for a comma costs a fraction of replacing in every field."""
    found = values.select(pl.col(FIELDS).str.contains(",", literal=True).any()).row(0)
    held = [name for name, comma in zip(FIELDS, found, strict=True) if comma]
    if not held:
        return values
    return values.with_columns(pl.col(held).str.replace_all(",", "", literal=True))


def _divided(dividend: pl.Expr, divisor: float) -> pl.Expr:
    """``dividend / divisor`` as IEEE division rounds it. Polars divides a column of two rows or
    more by a scalar by multiplying with the reciprocal, one ulp off at times: a line's value
    would depend on how many lines came in its batch."""
    return dividend.map_batches(
        lambda column: pl.Series(column.to_numpy() / divisor, nan_to_null=True),
        return_dtype=pl.Float64,
    )
