"""Progress extraction: training steps and phases (checkpoint, evaluation, start, end) from logs.

The ``progress`` stream has one row per log line that says a job moved on: a training step
(with its step number, and its step time or throughput when the framework prints them), or a
phase event (checkpoint save/load, evaluation, training start/end, the scheduler cancelling the
job). The hang and straggler detectors read it; it is derived once per logs batch.

Lines are read without their launchers' and shippers' prefixes (``medic.parse.prefixes``), in
two ways:

* the known formats, the fast path: data (``progress_formats.toml``, loaded once by
  ``medic.parse.progress_formats``), each citing where its text comes from. One literal
  prefilter (over every format's anchor) picks the candidate lines; each candidate is tried
  only with the formats whose anchor it holds, by priority, and the first that matches reads
  it (``first_match``). A bar whose description
  says it is no training loop (loading, evaluating, tokenising, ...) makes no step; the later
  lines of a multi-line record (``part``) complete the step line before them;
* the learning reader (``medic.parse.learned``), for jobs no format has read a step of: per
  job, the recurring template with a rising counter and a duration or a rate. It reads what a
  terminal would show of a line (``REDRAWN``, without control sequences), however many of a
  bar's updates the line holds.

Operators add their own formats with ``[parsers.progress]`` in medic.toml (tried on every
candidate line, before the built-in ones)::

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

from medic.ingest.base import Batch
from medic.parse.announced_eval import AnnouncedEvaluations
from medic.parse.first_match import PATTERN, ROW, FirstMatch
from medic.parse.learned import MAGNITUDES, LearnedProgress, metrics_records
from medic.parse.prefixes import PrefixStripper
from medic.parse.progress_formats import (
    ANSI_ESCAPE,
    DESC,
    EVENTS,
    FIELDS,
    FORMATS,
    ITEMS_PER_S,
    LOOKALIKE,
    RANK_IN_TEXT,
    REDRAWN,
    TERMINAL_CONTROL,
    TOTAL,
    ProgressFormat,
    clock_seconds,
)

__all__ = [
    "ANSI_ESCAPE",
    "EVENTS",
    "FIELDS",
    "FORMATS",
    "LOOKALIKE",
    "PROGRESS",
    "RANK_IN_TEXT",
    "CustomPattern",
    "ProgressConfig",
    "ProgressFormat",
    "ProgressParser",
]
from medic.schema import TIME

LINE = "_line"
"""A line's place in the batch (of the lines with a job), for the readers to refer to it."""
READ = ("time", "job_id", "node", "rank", "prefix_rank", "message")
"""The columns of a stripped logs frame that the readers use (fewer to filter and gather)."""
RANK = "_rank"
"""A read line's rank (``_rank()``), computed once for the loops' keys and the output."""
PART_WINDOW = 64
"""Lines after a record's step line in which its parts are looked for."""

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
        pa.field("loss", pa.float64()),
    ]
)
LOSS = (
    r"(?i)(?:^|[^\w/.-])(?P<other>(?:val(?:id(?:ation)?)?|eval|dev|test)[ _/])?"
    r"(?:train(?:ing)?[ _/]|reduced_train_|lm[ _]|total_|train/ce |train/crossentropy)?"
    r"(?:loss(?:/train/total| train)?|xent)['\"]?(?:\s*[:=]\s*|\s+is\s+|\s+)"
    r"(?:tensor\()?(?P<loss>[-+]?(?:nan|inf(?:inity)?|[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?))"
)
"""A training loss on a step line, whatever its format: ``loss``, ``train_loss``,
``train/loss``, ``lm loss``, ``lm_loss``, ``total_loss``, ``reduced_train_loss``,
``train/CE loss``, ``train/CrossEntropyLoss``, ``loss/train/total``, ``loss train`` or
``xent`` (a cross-entropy: OpenNMT's) (any case), then ``:``, ``=``, ``': ``, ``is`` or
spaces, then a number, ``nan`` or ``inf`` (also inside ``tensor(...)``). The first such key
on the line is read; one qualified as validation, evaluation or test (``valid loss``) gives
none (``other``); ``val_loss`` and ``eval/loss`` are not keys (a word character or a slash
before ``loss``)."""
CARRIED = (*FIELDS, "loss")
"""The values a later line of a record (``part``) fills in on its step line."""
UNIT = "_unit"
"""The unit of a throughput a record's part filled in (its part format's), where the step
line's own format gives none: the part's throughput, not the step format's."""


@dataclass(frozen=True)
class CustomPattern:
    """A site's own progress line: a regex with named groups from FIELDS."""

    pattern: str
    """A regular expression whose named groups are progress fields: step, step_time_s,
    step_time_ms, step_time_us, throughput, it_per_s, s_per_it, step_time_clock (a step time
    written as mm:ss or h:mm:ss), bar_rate (a rate with its unit: 2.5it/s or 1.3s/it) (and
    desc, a bar's description; total, its loop's length: a smaller total than the largest its
    bar showed marks another loop, such as an evaluation)."""
    framework: str = "custom"
    """The ``framework`` column of the lines it matches."""
    event: str = "step"
    """What a match is: step, eval_step, eval_start, eval_end, checkpoint_start,
    checkpoint_end, checkpoint_load, startup, train_end, job_end, or part (a later line of a
    multi-line record, completing the step line of its framework before it)."""
    unit: str | None = None
    """Unit of the throughput group, when the pattern has one."""

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"event must be one of {', '.join(EVENTS)}, got {self.event!r}")
        groups = named_groups(self.pattern)
        unknown = sorted(groups - {*FIELDS, DESC, TOTAL})
        if unknown:
            raise ValueError(f"pattern group '{unknown[0]}' is not one of {', '.join(FIELDS)}")


PHASE_EVENTS = frozenset(
    {"eval_start", "eval_end", "eval_step", "checkpoint_start", "checkpoint_end", "checkpoint_load"}
)
"""Events of the lines that announce a phase (``[parsers.progress] phase_announcements``)."""


@dataclass(frozen=True)
class ProgressConfig:
    """``[parsers.progress]``: extra formats, tried before the built-in ones."""

    patterns: tuple[CustomPattern, ...] = ()
    """The site's own progress formats."""
    phase_announcements: bool = True
    """Read the built-in formats' lines that announce a phase (a checkpoint or an evaluation
    starting, ending or counting its batches). false leaves every such reader out, as a
    leave-one-out measurement does: the hang detector then has only the GPUs and the job's own
    rhythm to tell a pause from a hang (slower to confirm, never less precise), and an
    evaluation's bars read as nothing."""
    frameworks_off: tuple[str, ...] = ()
    """Built-in frameworks whose formats are not read (``["megatron"]``): for a site whose
    lines a built-in format misreads, and for measuring what the learning reader alone makes of
    a framework's lines (``bench/frameworks_off.py``)."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.frameworks_off) - {f.framework for f in FORMATS})
        if unknown:
            raise ValueError(
                f"frameworks_off: no built-in format is of framework {unknown[0]!r} "
                f"(known: {', '.join(sorted({f.framework for f in FORMATS}))})"
            )


def named_groups(pattern: str) -> set[str]:
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


def _compiled_formats(
    config: ProgressConfig, builtin: tuple[ProgressFormat, ...]
) -> tuple[ProgressFormat, ...]:
    custom = tuple(
        ProgressFormat(p.framework, p.event, (), p.pattern, "medic.toml [parsers.progress]", p.unit)
        for p in config.patterns
    )
    if not config.phase_announcements:
        builtin = tuple(f for f in builtin if f.event not in PHASE_EVENTS)
    builtin = tuple(f for f in builtin if f.framework not in config.frameworks_off)
    return custom + builtin


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
        self,
        config: ProgressConfig | None = None,
        prefixes: PrefixStripper | None = None,
        builtin: tuple[ProgressFormat, ...] = FORMATS,
    ) -> None:
        """``builtin``: the built-in formats to read with (all of them unless a measurement
        leaves some out, to see what the rest and the learning reader make of their lines)."""
        self.config = config or ProgressConfig()
        self.prefixes = prefixes or PrefixStripper()
        self.formats = _compiled_formats(self.config, builtin)
        self.learned = LearnedProgress()
        """What the learning reader knows of each job's own step lines."""
        self._formatted: set[str] = set()
        """Jobs whose steps a format reads: the learning reader leaves their lines alone. A bar
        without a description marks none: any loop may draw one (an evaluation's, between the
        training lines of a loop no format knows)."""
        self._loops: dict[str, dict[tuple[object, ...], int]] = {}
        """Per job, per bar (format, process, description): the largest total it showed, the
        training loop's (``TOTAL``)."""
        self._evaluations = AnnouncedEvaluations()
        """Per job: whether it is in an evaluation announced before it trained."""
        self._first = FirstMatch(
            [f.pattern for f in self.formats],
            [f.anchors for f in self.formats],
            (*FIELDS, DESC, TOTAL),
            [f.shortcut() for f in self.formats],
        )
        self._prefilter = self._first.candidates(pl.col("message"))
        self._bars = [i for i, f in enumerate(self.formats) if f.bar]
        self._parts = [i for i, f in enumerate(self.formats) if f.event == "part"]
        self._measures, self._output = self._output_columns()

    def parse(self, batch: Batch) -> Batch | None:
        frame = batch.frame
        if frame.is_empty() or "message" not in frame.columns:
            return None
        lines = self.prefixes.strip(frame).select(READ).with_row_index(LINE)
        has_job = pl.col("job_id").is_not_null()
        known, read = self._known(lines.filter(has_job & self._prefilter))
        dicts = lines.filter(has_job & pl.col("message").str.contains("{", literal=True))
        dicts = dicts.filter(~pl.col(LINE).is_in(read.implode()))
        learned = self._learned(self._unformatted(lines, read), dicts)
        found = [rows for rows in (known, learned) if rows is not None]
        if not found:
            return None
        rows = _sorted_by(_sorted_by(pl.concat(found), LINE).drop(LINE), "time")
        for job in rows.filter(pl.col("event") == "job_end").get_column("job_id").unique():
            self.learned.forget(job)
            self._formatted.discard(job)
            self._loops.pop(job, None)
            self._evaluations.forget(job)
        return Batch.from_frame(self.output_stream, rows, PROGRESS)

    def _unformatted(self, lines: pl.DataFrame, read: pl.Series) -> pl.DataFrame:
        """The lines worth learning from: of jobs no format has read a step of, not read by a
        format, holding a duration or a rate."""
        jobs = set(lines.get_column("job_id").drop_nulls().unique().to_list())
        open_jobs = pl.Series(sorted(jobs - self._formatted), dtype=pl.String)
        if open_jobs.is_empty():
            return lines.clear()
        rest = lines.filter(pl.col("job_id").is_in(open_jobs.implode()))
        return rest.filter(~pl.col(LINE).is_in(read.implode())).filter(self.learned.candidates)

    def _known(self, candidates: pl.DataFrame) -> tuple[pl.DataFrame | None, pl.Series]:
        """The candidate lines a format reads, as output rows (none for a look-alike bar or a
        part of a record), and the ``LINE`` of every line a format matched."""
        if candidates.is_empty():
            return None, pl.Series(LINE, [], dtype=pl.UInt32)
        message = candidates.get_column("message")
        coloured = message.str.contains("\x1b", literal=True).fill_null(False).arg_true()
        text = message
        if len(coloured):  # the colour escapes cut off the few lines holding one
            uncoloured = message.gather(coloured).str.replace_all(ANSI_ESCAPE, "")
            text = message.clone().scatter(coloured, uncoloured)
        read = self._first.read(message, text)
        rows = candidates[read.get_column(ROW)].hstack(_plain_numbers(read.drop(ROW)))
        rows = rows.with_columns(_losses(text.gather(read.get_column(ROW))))
        rows = rows.with_columns(self._rank().alias(RANK))
        matched = rows.get_column(LINE)
        if self._bars:
            counting = pl.col("it_per_s").cast(pl.Float64, strict=False) >= ITEMS_PER_S
            described = pl.col(DESC).str.contains(LOOKALIKE).fill_null(False)
            lookalike = pl.col(PATTERN).is_in(self._bars) & (described | counting.fill_null(False))
            rows = rows.filter(~lookalike)
        rows = self._without_other_loops(rows)
        if self._parts:
            rows, orphans = self._with_parts(rows)
            matched = matched.filter(~matched.is_in(orphans.implode()))
        if UNIT not in rows.columns:
            rows = rows.with_columns(pl.lit(None, pl.String).alias(UNIT))
        if rows.is_empty():
            return None, matched
        bar = pl.col(PATTERN).is_in(self._bars)
        events = self._evaluations.events(rows, self._pick("event"), bar)
        read_rows = rows.with_columns(self._measures).select(LINE, *self._output)
        read_rows = read_rows.with_columns(events.alias("event"))
        framing = rows.select(~bar | pl.col(DESC).str.strip_chars().fill_null("").ne(""))
        framed = read_rows.filter(pl.col("event").eq("step") & framing.to_series())
        self._formatted.update(framed.get_column("job_id").unique().to_list())
        return read_rows, matched

    def _without_other_loops(self, rows: pl.DataFrame) -> pl.DataFrame:
        """``rows`` without the bars of a job's other loops: under one description, from one
        process, a bar with a smaller total than the largest yet (``TOTAL``)."""
        keys = ["job_id", "node", RANK, PATTERN, DESC]
        bars = rows.filter(pl.col(TOTAL).is_not_null()).select(
            LINE, *keys, pl.col(TOTAL).cast(pl.Int64)
        )
        if bars.is_empty():
            return rows
        before = pl.DataFrame(
            [
                (job, *loop, largest)
                for job in bars.get_column("job_id").unique().to_list()
                for loop, largest in self._loops.get(job, {}).items()
            ],
            schema=bars.select(*keys).schema | {"_before": pl.Int64},
            orient="row",
        )
        largest = pl.max_horizontal("_before", pl.col(TOTAL).cum_max().over(keys))
        bars = bars.join(before, on=keys, how="left", maintain_order="left", nulls_equal=True)
        for job, *loop, most in bars.group_by(keys).agg(pl.col(TOTAL).max()).iter_rows():
            loops = self._loops.setdefault(job, {})
            loops[tuple(loop)] = max(most, loops.get(tuple(loop), 0))
        other = bars.filter(pl.col(TOTAL) < largest).get_column(LINE)
        if other.is_empty():
            return rows
        return rows.filter(~pl.col(LINE).is_in(other.implode()))

    def _with_parts(self, rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        """The step lines with the values of the later lines of their records (``part``
        formats) filled in: each part completes the nearest step line of its framework before
        it in the same job, at most ``PART_WINDOW`` lines back; the parts make no rows. Also
        the ``LINE`` of the parts that complete no step line (another framework's line that
        looks like one: left to the learning reader)."""
        framework = self._pick("framework").alias("_framework")
        is_part = pl.col(PATTERN).is_in(self._parts)
        rows = rows.with_columns(framework)
        parts, steps = rows.filter(is_part), rows.filter(~is_part)
        if parts.is_empty():
            return steps.drop("_framework"), pl.Series(LINE, [], dtype=pl.UInt32)
        owners = steps.select(LINE, "job_id", "_framework", pl.col(LINE).alias("_owner"))
        unrated = pl.col("throughput").is_null()
        owned = parts.select(
            LINE, "job_id", "_framework", PATTERN, *CARRIED, self._pick("unit").alias("unit")
        ).join_asof(
            owners,
            on=LINE,
            by=["job_id", "_framework"],
            strategy="backward",
            tolerance=PART_WINDOW,
            check_sortedness=False,
        )
        orphans = owned.filter(pl.col("_owner").is_null()).get_column(LINE)
        values = (
            owned.filter(pl.col("_owner").is_not_null())
            .group_by("_owner")
            .agg(
                pl.col(CARRIED).drop_nulls().first().name.suffix("_part"),
                # Of a record's throughputs, its first part format's (the formats' priority).
                *(
                    pl.col(name)
                    .sort_by(unrated, PATTERN, maintain_order=True)
                    .first()
                    .alias(f"{name}_rated")
                    for name in ("throughput", "unit")
                ),
            )
        )
        own = pl.col("throughput").is_not_null()
        completed = (
            steps.join(values, left_on=LINE, right_on="_owner", how="left", maintain_order="left")
            .with_columns(
                pl.when(~own).then(pl.col("unit_rated")).alias(UNIT),
                pl.coalesce("throughput", "throughput_rated").alias("throughput"),
                *(
                    pl.coalesce(name, f"{name}_part").alias(name)
                    for name in CARRIED
                    if name != "throughput"
                ),
            )
            .drop(
                "_framework",
                "throughput_rated",
                "unit_rated",
                *(f"{name}_part" for name in CARRIED),
            )
        )
        return completed, orphans

    def _learned(self, lines: pl.DataFrame, dicts: pl.DataFrame) -> pl.DataFrame | None:
        """The step lines of templates the learning reader knows (or learns now) for their
        job, among the lines no format read that hold a duration or a rate, and the metrics
        dicts among ``dicts`` (the lines of any job no format read that hold a brace) that
        the templates do not read."""
        if lines.is_empty() and dicts.is_empty():
            return None
        shown = pl.col("message").str.replace_all(TERMINAL_CONTROL, "").str.replace(REDRAWN, "$1")
        steps = self.learned.read(lines.select(LINE, "job_id", self._who().alias("_who"), shown))
        unread = dicts.filter(~pl.col(LINE).is_in(steps.get_column(LINE).implode()))
        records = metrics_records(unread.select(LINE, "message"))
        if not records.is_empty():
            steps = pl.concat([steps, records]).sort(LINE)
            read = dicts.join(records.select(LINE), on=LINE).join(lines, on=LINE, how="anti")
            lines = pl.concat([lines, read]).sort(LINE)
        if steps.is_empty():
            return None
        rank = self._rank()
        step_time = pl.col("step_time_s")
        lines = lines.join(steps, on=LINE, how="inner")
        text = lines.select(shown).to_series()
        return lines.with_columns(_losses(text)).select(
            LINE,
            "time",
            "job_id",
            "node",
            rank.alias("rank"),
            pl.lit("learned").alias("framework"),
            pl.lit("step").alias("event"),
            "step",
            pl.when(step_time.is_finite() & (step_time > 0)).then(step_time).alias("step_time_s"),
            "throughput",
            "throughput_unit",
            pl.col("loss").cast(pl.Float64),
        )

    def _pick(self, attribute: str) -> pl.Expr:
        """The ``attribute`` of the format that read each line."""
        values = [getattr(f, attribute) for f in self.formats]
        return pl.lit(pl.Series(values, dtype=pl.String)).gather(pl.col(PATTERN))

    @classmethod
    def _who(cls) -> pl.Expr:
        """The process that printed a line: its node and rank."""
        return pl.concat_str(
            pl.col("node"), cls._rank().cast(pl.String), separator="/", ignore_nulls=True
        )

    @staticmethod
    def _rank() -> pl.Expr:
        return pl.coalesce(
            pl.col("rank"),
            pl.col("prefix_rank"),
            pl.col("message").str.extract(RANK_IN_TEXT, 1).cast(pl.Int32, strict=False),
        )

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
                _divided(value("step_time_us"), 1_000_000.0),
                value("s_per_it"),
                1.0 / value("it_per_s"),
                clock_seconds(pl.col("step_time_clock")),
                _bar_seconds(pl.col("bar_rate")),
            ).alias("_step_time"),
            value("throughput").alias("_throughput"),
        ]
        pick = self._pick
        step_time, throughput = pl.col("_step_time"), pl.col("_throughput")
        output = [
            pl.col("time"),
            pl.col("job_id"),
            pl.col("node"),
            pl.col(RANK).alias("rank"),
            pick("framework").alias("framework"),
            pick("event").alias("event"),
            pl.col("_step").alias("step"),
            pl.when(step_time.is_finite() & (step_time > 0)).then(step_time).alias("step_time_s"),
            throughput.alias("throughput"),
            pl.when(throughput.is_not_null())
            .then(pl.coalesce(UNIT, pick("unit")))
            .alias("throughput_unit"),
            pl.when(pick("event") == "step").then(pl.col("loss").cast(pl.Float64)).alias("loss"),
        ]
        return measures, output


def _sorted_by(rows: pl.DataFrame, column: str) -> pl.DataFrame:
    """``rows`` sorted by ``column``, ties in their order; not sorted again when already in order
    (the usual case: the lines came sorted, and sorting every column costs more than looking)."""
    if rows.get_column(column).is_sorted():
        return rows
    return rows.sort(column, maintain_order=True)


def _losses(text: pl.Series) -> pl.Series:
    """The training loss each line of ``text`` names (``LOSS``), as text; null where it names
    none. Only the lines holding ``oss`` or ``xent`` are read (most progress lines name no
    loss)."""
    held = text.str.contains("(?i)oss|xent").fill_null(False).arg_true()
    losses = pl.repeat(None, len(text), dtype=pl.String, eager=True).alias("loss")
    if held.is_empty():
        return losses
    found = text.gather(held).str.extract_groups(LOSS).struct.unnest()
    named = found.select(pl.when(pl.col("other").is_null()).then(pl.col("loss")))
    return losses.scatter(held, named.to_series())


def _plain_numbers(values: pl.DataFrame) -> pl.DataFrame:
    """The fields as plain numbers: thousands separators dropped ("tps: 12,345") and a
    magnitude suffix written as an exponent ("1.23K": nanotron's human_format). Few values
    hold either: only those are rewritten."""
    odd = values.select(pl.col(FIELDS).str.contains(f"[,{''.join(MAGNITUDES)}]"))
    held = [(name, odd.get_column(name).arg_true()) for name in FIELDS]
    plain = [_plain(values.get_column(name), at) for name, at in held if len(at)]
    return values.with_columns(plain) if plain else values


def _plain(field: pl.Series, odd: pl.Series) -> pl.Series:
    """``field`` with the values at ``odd`` (those holding a separator or a suffix) rewritten
    (the others, most of them, are left as they are)."""
    plain = field.gather(odd).str.replace_all(",", "", literal=True)
    for suffix, exponent in MAGNITUDES.items():
        plain = plain.str.replace(f"{suffix}$", exponent)
    return field.clone().scatter(odd, plain)


def _bar_seconds(rate: pl.Expr) -> pl.Expr:
    """A tqdm rate with its unit (``2.5it/s``, ``1.3s/it``) as seconds per iteration; null
    for a number without either unit."""
    number = rate.str.slice(0, rate.str.len_bytes() - 4).cast(pl.Float64, strict=False)
    unit = rate.str.slice(-4)
    return pl.when(unit == "s/it").then(number).when(unit == "it/s").then(1.0 / number)


def _divided(dividend: pl.Expr, divisor: float) -> pl.Expr:
    """``dividend / divisor`` as IEEE division rounds it. Polars divides a column of two rows or
    more by a scalar by multiplying with the reciprocal, one ulp off at times: a line's value
    would depend on how many lines came in its batch."""
    return dividend.map_batches(
        lambda column: pl.Series(column.to_numpy() / divisor, nan_to_null=True),
        return_dtype=pl.Float64,
    )
