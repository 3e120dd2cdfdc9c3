"""Per-rank timings: what a job prints of each rank's own share of a step, for the straggler
detector's peer comparison (``medic.detectors.rank_share``).

The ``rank_timing`` stream has one row per rank per report: the rank measured (not the one that
printed: a framework gathers every rank's figure and prints them from one rank), the node the
line names for it (if any), and a value of one of four kinds:

* ``time``: seconds of the rank's own work in the report's interval (compared with its peers');
* ``score``: a relative performance score, 1.0 the best rank, 0.5 twice as slow as it;
* ``ratio``: the rank's time over the fastest rank's;
* ``verdict``: the framework itself names the rank a straggler (no value);
* ``layout``: how the job's ranks split (``metric`` says which figure), for comparing each rank
  only with the ranks that do the same work.

Built-in formats, from the frameworks' own logging code:

* NVIDIA Resiliency Extension's straggler detection (nvidia-resiliency-ext,
  ``src/nvidia_resiliency_ext/ptl_resiliency/straggler_det_callback.py``, the PTL callback
  NeMo 2 uses): rank 0 logs ``\\nGPU relative performance:\\n`` then, per rank (all, or the
  worst and best few under `` Worst performing 3/64 ranks:`` / `` Best performing ...``),
  ``  Rank=17 Node=gpu-a07 Score=0.62`` (``_format_gpu_scores``); the same lines follow
  ``GPU individual performance:`` (a rank against its own past, not its peers: not read).
  The relative score is the best rank's median CUDA kernel time over this rank's, NCCL kernels
  left out (``attribution/straggler/reporting.py``, ``_compute_gpu_perf_score``,
  ``_filter_out_nccl_kernels``): a compute-only share. Its verdicts:
  ``STRAGGLER DETECTION WARNING: Some GPUs have worse relative performance. Affected ranks:
  {StragglerId(rank=17, node='gpu-a07')}`` (a set of ``StragglerId`` dataclasses; ``Some GPUs
  performance dropped.`` for the individual scores; older releases printed a list of ranks).
* Megatron-LM's timers with ``--timing-log-option all`` (``megatron/core/timers.py``,
  ``_get_all_ranks_time_string``), printed by the last rank every log interval:
  ``times across ranks (ms):``, then per timer ``  forward-compute:`` and per rank
  ``     rank  3: 812.40`` (milliseconds per iteration). Only the timers that measure a rank's
  own work are read (``OWN_WORK_TIMERS``): ``forward-backward`` also holds the gradient
  all-reduce (``finalize_model_grads`` runs inside it in
  ``megatron/core/pipeline_parallel/schedules.py``), where every rank waits for the slowest,
  so it is the same on every rank and says nothing of which one is slow.
* Megatron-LM's arguments, printed by rank 0 at start-up (``megatron/training/arguments.py``,
  ``_print_args``): between ``---- arguments ----`` rules, one ``  <name> <dots> <value>`` line
  per argument, the dots padding the name to 48 characters. ``pipeline_model_parallel_size``
  and ``world_size`` are read: ranks of different pipeline stages do different work (the first
  stage holds the embedding, the last the output layer and the loss; only those two load
  batches, ``get_batch`` in ``pretrain_gpt.py``), so their timers differ by design.
* Megatron-LM's ``StragglerDetector`` (``--log-straggler``, ``megatron/core/utils.py``
  ``report()``): rank 0 logs ``| MnRtt/Rnk: 3453.08ms/8 | MxRtt/Rnk: 3468.20ms/0 | ...``, the
  fastest and slowest rank's time in the traced forward ops: the slowest rank gets the ratio
  of the two. (``MnDRtt``/``MxDRtt``, the data-loading latency, is left out: prefetching makes
  it spread widely among healthy ranks, 14 to 35 ms in the README_STRAGGLER.md example.)

* Any framework's own slow-rank report, whatever its wording, in the two shapes such reports
  take (``REPORT_RATIO``, ``REPORT_VERDICT``): a rank's figure against its peers' (TraceML's
  ``Rank r2 input wait was 199.7ms vs median rank r0 at 10.4ms``, ``rank 5 is 1.4x slower than
  the median``: a ``ratio``), and a rank called a straggler, slow or lagging (``Stragglers
  detected: ranks [3, 5]``, ``rank 3 is a straggler``: a ``verdict``). A rank against its own
  past, or a report that names none (``No stragglers detected``), is not read.

Lines that each rank prints of its own wall-clock step time carry no per-rank information in
synchronous data-parallel training (each step ends with an all-reduce that waits for the
slowest rank, so the wall time per step is the same on every rank): they are progress lines,
not read here.

Sites add their own per-rank lines in medic.toml (one line per rank and report; the rank is the
``rank`` group, else the printing rank)::

    [[parsers.rank_timing.patterns]]
    pattern = 'rank (?P<rank>\\d+) compute (?P<time_ms>[0-9.]+) ms'
    metric = "compute"               # optional, default "custom"
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

import polars as pl
import pyarrow as pa

from medic.ingest.base import Batch
from medic.parse.prefixes import PrefixStripper
from medic.parse.progress import named_groups
from medic.schema import TIME

RANK_TIMING = pa.schema(
    [
        pa.field("time", TIME, nullable=False),
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("rank_node", pa.string()),
        pa.field("source", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("value", pa.float64()),
    ]
)
KINDS = ("time", "score", "ratio", "verdict", "layout")
VALUE_GROUPS = {"time_s": 1.0, "time_ms": 1e-3, "score": 1.0, "ratio": 1.0}
"""A custom pattern's value group and its factor to the row's value (seconds for times)."""
GROUPS = ("rank", "node", *VALUE_GROUPS)
OWN_WORK_TIMERS = ("forward-compute", "backward-compute", "batch-generator")
"""Megatron timers that time one rank's own work (``--timing-log-level 2``): its forward and
backward compute and its data loading, not the collectives it waits in."""
NVRX = "nvrx"
MEGATRON_TIMERS = "megatron_timers"
MEGATRON_STRAGGLER = "megatron_straggler"
MEGATRON_ARGS = "megatron_args"
LAYOUT_ARGS = ("pipeline_model_parallel_size", "world_size")
"""Megatron arguments that say how the ranks split into pipeline stages."""
ANCHORS = (
    "Rank=",
    "performance:",
    "STRAGGLER DETECTION WARNING",
    "MxRtt/Rnk",
    *LAYOUT_ARGS,
)
"""Literals one of which every built-in line holds, but the slow-rank reports (``REPORTS``) and
Megatron's timer lines, found by their shape: a timer's name line is a lone word and a colon
(``LONE_WORD``), a rank's line begins with ``rank `` (``RANK_LINE``; NCCL's lines hold "rank "
too, tens of thousands of them)."""
LONE_WORD = r":\s*$"
RANK_LINE = r"^\s*rank "
NVRX_HEADER = r"GPU (?P<block>relative|individual) performance:"
NVRX_SCORE = r"^\s*Rank=(?P<rank>\d+) Node=(?P<node>\S+) Score=(?P<score>[0-9.]+)\s*$"
NVRX_WARNING = (
    r"STRAGGLER DETECTION WARNING: Some GPUs (?P<scores>have worse relative|performance dropped)"
    r".*? Affected ranks: (?P<ranks>.*)$"
)
NVRX_ID = r"StragglerId\(rank=(\d+), node='([^']*)'\)"
TIMER_NAME = r"^\s*(?P<block>[a-z][a-z0-9-]*):\s*$"
TIMER_RANK = r"^\s*rank\s+(?P<rank>\d+): (?P<time_ms>[0-9.]+)\s*$"
STIMER = (
    r"MnRtt/Rnk: (?P<low>[0-9.]+)ms/(?P<low_rank>\d+) \| "
    r"MxRtt/Rnk: (?P<high>[0-9.]+)ms/(?P<rank>\d+)"
)
ARGUMENT = rf"^\s*(?P<name>{'|'.join(LAYOUT_ARGS)}) \.+ (?P<value>\d+)\s*$"
REPORTS = r"traggl|TRAGGL|[Ss]low|SLOW|[Ll]agging|LAGGING| vs\b|[Vv]ersus|[Cc]ompared (?:to|with)"
"""What every slow-rank report holds, in its usual cases (its gate, scanned for on every line:
literals, where a case-blind regex costs three times as much)."""
_RANK = r"\brank\s*[:=#]?\s*r?(?P<rank>\d+)\b"
_TIME = r"(?P<{0}>\d+(?:\.\d+)?)\s*(?P<{0}_unit>ms|us|µs|s|sec|secs|seconds)\b"
PEERS = r"(?:median|mean|average|avg|typical|fastest|others?|other ranks?|peers?|rest|rank)\b"
"""What a rank's figure is set against in a slow-rank report: its peers, never its own past."""
REPORT_RATIO = (
    rf"(?i){_RANK}[^.;|]*?\b(?:{_TIME.format('value')}[^;|]*?\b(?:vs\.?|versus|compared (?:to|with)"
    rf"|against)\s+(?:the\s+)?{PEERS}[^;|]*?\b{_TIME.format('ref')}"
    rf"|(?P<times>\d+(?:\.\d+)?)\s*(?:x|×|times)\s+slower\s+than\s+(?:the\s+|its\s+)?{PEERS}"
    rf"|(?P<percent>\d+(?:\.\d+)?)\s*%\s+slower\s+than\s+(?:the\s+|its\s+)?{PEERS})"
)
"""A rank's time against its peers' (the ratio of the two), or its slowdown over them as a
factor or a percentage."""
_LIST = r"[\[({{]?\s*r?(?P<{0}>\d+(?:\s*(?:,|and|&)\s*(?:rank\s*)?r?\d+)*)"
REPORT_VERDICT = (
    r"(?i)\bstragglers?\s*(?:(?:was|were|is|are)\s+)?(?:detected|found|identified)?\s*"
    rf"(?:on|at|in|:|=|-)?\s*(?:global\s+)?ranks?\s*[:=]?\s*{_LIST.format('ranks')}"
    rf"|\branks?\s*[:=#]?\s*{_LIST.format('subject')}\s+(?:is|are|was|were)\s+"
    r"(?:an?\s+|the\s+)?(?:stragglers?|slow|lagging)\b"
)
"""Ranks a report calls stragglers, slow or lagging (right before or after its rank list)."""
REPORT_NONE = r"(?i)\b(?:no|not|zero|none|0)\s+(?:an?\s+)?(?:stragglers?|slow|lagging)\b"
"""A report that says there is none."""
UNITS = {"ms": 1e-3, "us": 1e-6, "µs": 1e-6}
"""Seconds per unit of a report's times (the others are seconds)."""
LOG_REPORT = "log_report"
CARRIED = 4096
"""Most (job, printer, family) headers remembered across batches (a bound)."""
LINE = "_line"
WHO = "_who"


@dataclass(frozen=True)
class RankTimingPattern:
    """A site's own per-rank line: a regex with one value group (time_s, time_ms, score or
    ratio) and optionally rank and node groups."""

    pattern: str
    """A regular expression (Rust syntax) whose named groups are from rank, node, time_s,
    time_ms (a rank's own work in the interval), score (1.0 = the best rank) or ratio (over
    the fastest rank)."""
    metric: str = "custom"
    """The ``metric`` column of its rows (ranks are compared per metric)."""

    def __post_init__(self) -> None:
        names = named_groups(self.pattern)
        unknown = sorted(names - set(GROUPS))
        if unknown:
            raise ValueError(f"pattern group '{unknown[0]}' is not one of {', '.join(GROUPS)}")
        if len(names & set(VALUE_GROUPS)) != 1:
            raise ValueError(f"pattern {self.pattern!r} needs one of {', '.join(VALUE_GROUPS)}")

    @property
    def value_group(self) -> str:
        return next(g for g in VALUE_GROUPS if f"(?P<{g}>" in self.pattern)


@dataclass(frozen=True)
class RankTimingConfig:
    """``[parsers.rank_timing]``: the site's own per-rank timing lines."""

    patterns: tuple[RankTimingPattern, ...] = ()
    """Extra formats, each line one rank's figure."""


class RankTimingParser:
    """logs -> rank_timing: one row per rank figure of a known (or configured) format."""

    name: ClassVar[str] = "rank_timing"
    input_stream: ClassVar[str] = "logs"
    output_stream: ClassVar[str] = "rank_timing"
    row_wise: ClassVar[bool] = True
    """Each output row comes from one input row (a record's header is carried across batches):
    batches may be parsed together."""
    Config: ClassVar[type] = RankTimingConfig
    strips_prefixes: ClassVar[bool] = True

    def __init__(
        self, config: RankTimingConfig | None = None, prefixes: PrefixStripper | None = None
    ) -> None:
        self.config = config or RankTimingConfig()
        self.prefixes = prefixes or PrefixStripper()
        self._headers: OrderedDict[tuple[str, str, str, str], str] = OrderedDict()
        """(job, node, printer, family) -> the block the latest header there opened: the
        lines of one record may come in two batches."""
        # one regex of the anchors (a SIMD search for a few literals: 8x faster than
        # contains_any's Aho-Corasick on a batch), a colon ending the line (searched from the
        # line's end, with no stripped copy of every line) and a rank's timer line (anchored
        # at the line's start: a glance at each line)
        message = pl.col("message")
        anchor = message.str.contains("|".join(map(pl.escape_regex, ANCHORS)))
        shapes = [
            message.str.contains(LONE_WORD),
            message.str.contains(RANK_LINE),
            message.str.contains(REPORTS),
        ]
        custom = [message.str.contains(p.pattern) for p in self.config.patterns]
        self._candidates = pl.any_horizontal(anchor, *shapes, *custom)

    def parse(self, batch: Batch) -> Batch | None:
        frame = batch.frame
        if frame.is_empty() or "message" not in frame.columns:
            return None
        lines = (
            self.prefixes.strip(frame)
            .with_row_index(LINE)
            .filter(pl.col("job_id").is_not_null() & self._candidates.fill_null(False))
            .select(
                LINE,
                "time",
                "job_id",
                "node",
                pl.coalesce("rank", "prefix_rank").cast(pl.Int32).alias("_printer"),
                "message",
            )
            .with_columns(pl.col("_printer").cast(pl.String).fill_null("").alias(WHO))
        )
        if lines.is_empty():
            return None
        found = [
            rows
            for rows in (
                self._blocks(lines),
                self._nvrx_warnings(lines),
                self._stimer(lines),
                self._layout(lines),
                *self._reports(lines),
                *(self._custom(lines, p) for p in self.config.patterns),
            )
            if not rows.is_empty()
        ]
        if not found:
            return None
        rows = pl.concat(found).sort("time", maintain_order=True)
        return Batch.from_frame(self.output_stream, rows, RANK_TIMING)

    def _blocks(self, lines: pl.DataFrame) -> pl.DataFrame:
        """The per-rank lines of multi-line records (NVRx's scores, Megatron's timers), each
        read under the header before it from the same printer."""
        message = pl.col("message")
        keys = ["job_id", "node", WHO, "_family"]
        headers = pl.concat(
            [
                lines.filter(message.str.contains(NVRX_HEADER)).select(
                    LINE,
                    *keys[:3],
                    pl.lit(NVRX).alias("_family"),
                    message.str.extract(NVRX_HEADER, 1).alias("_block"),
                ),
                lines.filter(message.str.contains(TIMER_NAME)).select(
                    LINE,
                    *keys[:3],
                    pl.lit(MEGATRON_TIMERS).alias("_family"),
                    message.str.extract(TIMER_NAME, 1).alias("_block"),
                ),
            ]
        )
        nvrx = _entries(lines, NVRX_SCORE, NVRX, "score", message.str.extract(NVRX_SCORE, 2))
        timers = _entries(lines, TIMER_RANK, MEGATRON_TIMERS, "time", pl.lit(None, pl.String))
        entries = pl.concat([nvrx, timers])
        carried = self._carried_headers(entries)
        self._remember(headers)
        if entries.is_empty():
            return _empty()
        headers = pl.concat([carried, headers.with_columns(pl.col(LINE).cast(pl.Int64))])
        read = (
            entries.with_columns(pl.col(LINE).cast(pl.Int64))
            .sort(LINE)
            .join_asof(
                headers.sort(LINE), on=LINE, by=keys, strategy="backward", check_sortedness=False
            )
        )
        wanted = (
            pl.when(pl.col("_family") == NVRX)
            .then(pl.col("_block") == "relative")
            .otherwise(pl.col("_block").is_in(OWN_WORK_TIMERS))
        )
        return _figures(
            read.filter(wanted.fill_null(False)),
            rank=pl.col("rank"),
            rank_node=pl.col("rank_node"),
            source=pl.col("_family"),
            metric=pl.when(pl.col("_family") == NVRX)
            .then(pl.lit("gpu_relative"))
            .otherwise(pl.col("_block")),
            kind=pl.col("kind"),
            value=pl.col("value"),
        )

    def _carried_headers(self, entries: pl.DataFrame) -> pl.DataFrame:
        """The headers earlier batches left open, for the entries of this one (before line 0)."""
        schema = {
            LINE: pl.Int64,
            "job_id": pl.String,
            "node": pl.String,
            WHO: pl.String,
            "_family": pl.String,
            "_block": pl.String,
        }
        if entries.is_empty() or not self._headers:
            return pl.DataFrame(schema=schema)
        rows = [(-1, *key, block) for key, block in self._headers.items()]
        return pl.DataFrame(rows, schema=schema, orient="row")

    def _remember(self, headers: pl.DataFrame) -> None:
        keys = ["job_id", "node", WHO, "_family"]
        latest = headers.sort(LINE).group_by(keys, maintain_order=True).agg(pl.col("_block").last())
        for job_id, node, who, family, block in latest.iter_rows():
            key = (job_id, node, who, family)
            self._headers.pop(key, None)
            self._headers[key] = block
        while len(self._headers) > CARRIED:
            self._headers.popitem(last=False)

    @staticmethod
    def _nvrx_warnings(lines: pl.DataFrame) -> pl.DataFrame:
        """NVRx's verdicts: one row per rank a warning names (with its node when named)."""
        warned = lines.filter(pl.col("message").str.contains(NVRX_WARNING)).with_columns(
            pl.col("message").str.extract(NVRX_WARNING, 2).alias("_ranks"),
            pl.when(pl.col("message").str.extract(NVRX_WARNING, 1).str.starts_with("have"))
            .then(pl.lit("gpu_relative"))
            .otherwise(pl.lit("gpu_individual"))
            .alias("metric"),
        )
        if warned.is_empty():
            return _empty()
        ids = (
            warned.with_columns(pl.col("_ranks").str.extract_all(NVRX_ID).alias("_id"))
            .with_columns(
                pl.when(pl.col("_id").list.len() > 0)
                .then(pl.col("_id"))
                .otherwise(pl.col("_ranks").str.extract_all(r"\d+"))
            )
            .explode("_id")
        )
        return _figures(
            ids.filter(pl.col("_id").is_not_null()),
            rank=pl.col("_id").str.extract(r"(\d+)", 1).cast(pl.Int32),
            rank_node=pl.col("_id").str.extract(r"node='([^']*)'", 1),
            source=pl.lit(NVRX),
            metric=pl.col("metric"),
            kind=pl.lit("verdict"),
            value=pl.lit(None, pl.Float64),
        )

    @staticmethod
    def _stimer(lines: pl.DataFrame) -> pl.DataFrame:
        """Megatron's StragglerDetector: the slowest rank, its time over the fastest's."""
        read = _matching(lines, STIMER)
        if read is None:
            return _empty()
        return _figures(
            read,
            rank=pl.col("rank").cast(pl.Int32),
            rank_node=pl.lit(None, pl.String),
            source=pl.lit(MEGATRON_STRAGGLER),
            metric=pl.lit("rtt"),
            kind=pl.lit("ratio"),
            value=pl.col("high").cast(pl.Float64) / pl.col("low").cast(pl.Float64),
        ).filter(pl.col("value").is_finite())

    def _reports(self, lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The slow-rank reports' rows, ratios then verdicts: the candidate lines that say there
        is none are left out once, for both shapes."""
        reports = lines.filter(~pl.col("message").str.contains(REPORT_NONE))
        return self._report_ratios(reports), self._report_verdicts(reports)

    @staticmethod
    def _report_ratios(lines: pl.DataFrame) -> pl.DataFrame:
        """A framework's report of a rank's figure against its peers': the ratio."""
        read = _matching(lines, REPORT_RATIO)
        if read is None:
            return _empty()

        def seconds(group: str) -> pl.Expr:
            factor = (
                pl.col(f"{group}_unit")
                .str.to_lowercase()
                .replace_strict(UNITS, default=1.0, return_dtype=pl.Float64)
            )
            return pl.col(group).cast(pl.Float64) * factor

        ratio = pl.coalesce(
            seconds("value") / seconds("ref"),
            pl.col("times").cast(pl.Float64),
            1.0 + pl.col("percent").cast(pl.Float64) / 100.0,
        )
        rows = _report_rows(read, pl.col("rank"), "compared", "ratio", ratio)
        return rows.filter(pl.col("value").is_finite())

    @staticmethod
    def _report_verdicts(lines: pl.DataFrame) -> pl.DataFrame:
        """A framework's report naming ranks stragglers: one verdict per rank."""
        read = _matching(lines, REPORT_VERDICT)
        if read is None:
            return _empty()
        ranks = pl.coalesce("ranks", "subject").str.extract_all(r"\d+")
        named = read.with_columns(ranks.alias("_rank")).explode("_rank")
        named = named.filter(pl.col("_rank").is_not_null())
        return _report_rows(named, pl.col("_rank"), "verdict", "verdict", pl.lit(None, pl.Float64))

    @staticmethod
    def _layout(lines: pl.DataFrame) -> pl.DataFrame:
        """Megatron's pipeline size and world size, as its arguments dump prints them."""
        read = _matching(lines, ARGUMENT)
        if read is None:
            return _empty()
        return _figures(
            read,
            rank=pl.col("_printer").fill_null(0),
            rank_node=pl.lit(None, pl.String),
            source=pl.lit(MEGATRON_ARGS),
            metric=pl.col("name"),
            kind=pl.lit("layout"),
            value=pl.col("value").cast(pl.Float64),
        )

    @staticmethod
    def _custom(lines: pl.DataFrame, pattern: RankTimingPattern) -> pl.DataFrame:
        """A site's lines: one rank's figure each (the printing rank's own, on the printing
        node, unless the line names a rank)."""
        read = _matching(lines, pattern.pattern, "_g_")
        if read is None:
            return _empty()
        present = {c.removeprefix("_g_") for c in read.columns if c.startswith("_g_")}
        named = (
            pl.col("_g_rank").cast(pl.Int32, strict=False)
            if "rank" in present
            else pl.lit(None, pl.Int32)
        )
        own_node = pl.when(named.is_null()).then(pl.col("node"))
        rank_node = pl.coalesce(pl.col("_g_node"), own_node) if "node" in present else own_node
        group = pattern.value_group
        value = pl.col(f"_g_{group}").cast(pl.Float64, strict=False) * VALUE_GROUPS[group]
        return _figures(
            read,
            rank=pl.coalesce(named, pl.col("_printer")),
            rank_node=rank_node,
            source=pl.lit("custom"),
            metric=pl.lit(pattern.metric),
            kind=pl.lit("time" if group.startswith("time") else group),
            value=value,
        ).filter(pl.col("rank").is_not_null() & pl.col("value").is_not_null())


def _entries(
    lines: pl.DataFrame, pattern: str, family: str, kind: str, rank_node: pl.Expr
) -> pl.DataFrame:
    """The per-rank lines of a record format: its rank (group 1), value (the last group, a
    time in milliseconds as seconds) and the node it names."""
    message = pl.col("message")
    value = message.str.extract(pattern, 3 if kind == "score" else 2).cast(pl.Float64, strict=False)
    return lines.filter(message.str.contains(pattern)).select(
        LINE,
        "time",
        "job_id",
        "node",
        WHO,
        "_printer",
        pl.lit(family).alias("_family"),
        message.str.extract(pattern, 1).cast(pl.Int32).alias("rank"),
        rank_node.alias("rank_node"),
        pl.lit(kind).alias("kind"),
        (value if kind == "score" else value / 1000.0).alias("value"),
    )


def _figures(lines: pl.DataFrame, **figure: pl.Expr) -> pl.DataFrame:
    """Rows of the ``rank_timing`` stream from a reader's lines: each line's time, job and
    node, then ``figure``'s expressions for the stream's other columns, in its order."""
    return lines.select(
        "time", "job_id", "node", *(figure[name].alias(name) for name in RANK_TIMING.names[3:])
    )


def _matching(lines: pl.DataFrame, pattern: str, prefix: str = "") -> pl.DataFrame | None:
    """The lines holding ``pattern``, with its named groups as columns (named ``prefix`` and
    the group's name); None when no line holds it."""
    read = lines.filter(pl.col("message").str.contains(pattern))
    if read.is_empty():
        return None
    groups = read.get_column("message").str.extract_groups(pattern).struct.unnest()
    return read.hstack(groups.select(pl.all().name.prefix(prefix)))


def _report_rows(
    read: pl.DataFrame, rank: pl.Expr, metric: str, kind: str, value: pl.Expr
) -> pl.DataFrame:
    """The ``rank_timing`` rows of slow-rank reports (no node: a report names none)."""
    return _figures(
        read,
        rank=rank.cast(pl.Int32),
        rank_node=pl.lit(None, pl.String),
        source=pl.lit(LOG_REPORT),
        metric=pl.lit(metric),
        kind=pl.lit(kind),
        value=value,
    )


def _empty() -> pl.DataFrame:
    empty = pl.from_arrow(RANK_TIMING.empty_table())
    assert isinstance(empty, pl.DataFrame)
    return empty
