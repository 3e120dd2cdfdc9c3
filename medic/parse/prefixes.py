"""Line prefixes that launchers, loggers and log shippers put before a program's own text.

The same training line reaches medic bare, or behind ``srun --label``'s task number, torchrun's
``[default3]:``, a logging timestamp, pdsh's ``host: ``, a container runtime's
``<time> stdout F `` or a journal's ``<time> <host> kernel: ``, often several stacked. Both log
parsers (progress and signatures) read the bare message, so their formats are written once; what
a prefix says (the rank, the local rank, the host, the time as written) is kept beside it.

The stripper is vectorised: one anchored scan over every line finds those with a prefix; only
those are captured (one regex, the prefixes as alternatives by priority), the prefix cut off,
and the rest scanned again for the next stacked prefix, for at most ``MAX_ROUNDS`` rounds.
Sites add their own prefixes in medic.toml (tried before the built-in ones)::

    [parsers.prefixes]
    patterns = ['<(?P<host>[a-z0-9-]+)> ']   # named groups: rank, local_rank, host, time
    builtin = true                           # false: only the site's own prefixes

A pattern uses Rust regex syntax (no look-around), is anchored at the line's start, and the
whole of its match is cut off. The parsers share one stripper, which remembers the last frame it
stripped, so a batch is stripped once for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

PREFIX_FIELDS = ("rank", "local_rank", "host", "time")
"""What a prefix may say, as named groups; the stripper's output has one ``prefix_<field>``
column for each (the ranks as Int32, the others as written)."""
IPV4 = r"(?:\d{1,3}\.){3}\d{1,3}\b"
"""An IPv4 address, as a line names a host or a peer by it (a launcher's prefix, a report)."""
RAW = "raw_message"
"""The column holding each line as it came, prefixes and all (control characters a shipper
escaped written back: ``SYSLOG_ESCAPES``)."""
CUT = "_prefix"
"""A line's stacked prefixes, as cut off it."""
PIECE = "_piece"
"""One prefix of a line's stacked prefixes."""
MAX_ROUNDS = 6
"""Stacked prefixes cut off at most (a shipper's, a launcher's, a logger's and a level)."""
SYSLOG_ESCAPES = {"#011": "\t", "#015": "\r", "#033": "\x1b"}
"""Control characters as rsyslog writes them by default ("#" and the octal code:
``$EscapeControlCharactersOnReceive``), as a line shipped through it arrives (mmcv's
``Epoch [1][450/1833]#011lr: ...``): the tab, carriage return and escape a program wrote, which
its format reads."""
_ESCAPED = "|".join(SYSLOG_ESCAPES)

ASCII_CLASSES = {r"\d": "[0-9]", r"\w": "[0-9A-Za-z_]", r"\s": r"[\t ]", r"\S": r"[^\t ]"}
"""Unicode classes and their ASCII forms (a nested class works inside brackets too)."""
_LEVEL = r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|NOTICE|TRACE)"
_ISO_TIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?: ?(?:Z|UTC|[+-]\d{2}:?\d{2}))?"
_SYSLOG_TIME = r"[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?"
"""The traditional syslog time, with journalctl's microseconds where asked for
(``-o short-precise``: ``Mar 13 11:01:55.588061 host kernel: ...``)."""
_SYSLOG_ISO_TIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:?\d{2})"
"""The ISO time a syslog daemon or journalctl writes (short-iso, short-iso-precise, RFC 5424):
a T, at most microseconds, a zone. A logging module's time (a space or a comma, no zone) or a
container runtime's (nanoseconds) before an application's ``Word word: text`` is no syslog
line: ``GPU available: True`` names no host."""
_PROGRAM = r"[A-Za-z_][\w.@/-]*(?:\[\d+\])?: "


@dataclass(frozen=True)
class LinePrefix:
    """One prefix: a regex read at a line's start (named groups from ``PREFIX_FIELDS``), and
    where its form was observed."""

    name: str
    pattern: str
    source: str


PREFIXES: tuple[LinePrefix, ...] = (
    LinePrefix(
        "cri",
        r"(?P<time>\d{4}-\d{2}-\d{2}T\S+) (?:stdout|stderr) [FP] ",
        "kubernetes/cri-api (CRI log format: RFC 3339 time, stream, P/F tag); "
        "https://docs.fluentbit.io/manual/pipeline/parsers/configuring-parser (cri parser)",
    ),
    LinePrefix(
        "kubectl",
        r"\[pod/(?P<host>[^/\]\s]+)/[^\]\s]+\] ",
        "kubernetes/kubectl pkg/cmd/logs/logs.go (--prefix: [pod/<pod>/<container>])",
    ),
    LinePrefix(
        "docker-compose",
        r"(?P<host>[\w.-]+[-_]\d+)\s+\| ",
        "docker/compose cmd/formatter/logs.go (service-N | line)",
    ),
    LinePrefix(
        "syslog",
        rf"(?P<time>{_SYSLOG_TIME}|{_SYSLOG_ISO_TIME}) (?P<host>[A-Za-z0-9][\w.-]*) {_PROGRAM}",
        "RFC 3164 / journalctl -o short, short-precise and short-iso (time host program[pid]: )",
    ),
    LinePrefix(
        "journal-host",
        r"(?P<host>[A-Za-z0-9][\w.-]*) kernel: ",
        "journalctl -o short without its time column; systemd/systemd src/shared/logs-show.c",
    ),
    LinePrefix(
        "dmesg",
        r"\[\s*(?P<time>\d+\.\d+|[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\] ",
        "util-linux sys-utils/dmesg.c (seconds since boot, or -T's ctime)",
    ),
    LinePrefix(
        "openmpi",
        r"\[(?:\d+,)?(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>: ?",
        "https://docs.open-mpi.org/en/main/man-openmpi/man1/mpirun.1.html (--tag-output: "
        "[job,rank]<stream>:); horovod/horovod horovod/runner/common/util/safe_shell_exec.py "
        "prefix_connection (horovodrun's own launcher: [rank]<stream>:)",
    ),
    LinePrefix(
        "determined",
        r"\[rank=(?P<rank>\d+)\] ",
        "determined-ai/determined harness/determined/launch/wrap_rank.py ([rank=N] before each "
        "line of a worker)",
    ),
    LinePrefix(
        "srun-label",
        r" *(?P<rank>\d+): ",
        "https://slurm.schedmd.com/srun.html (-l, --label: the task number, right-aligned)",
    ),
    LinePrefix(
        "torch-rank",
        r"\[rank(?P<rank>\d+)\]: ?",
        "https://github.com/sgl-project/sglang/pull/18040 (torchrun workers' [rankN]: lines)",
    ),
    LinePrefix(
        "torchrun",
        r"\[[A-Za-z_][\w-]*?(?P<local_rank>\d+)\]:",
        "pytorch/pytorch torch/distributed/elastic/agent/server/local_elastic_agent.py "
        "(--tee / --redirects: [<role><local_rank>]:)",
    ),
    LinePrefix(
        "lightning-rank",
        r"\[rank: (?P<rank>\d+)\] ",
        "Lightning-AI/utilities src/lightning_utilities/core/rank_zero.py rank_prefixed_message",
    ),
    LinePrefix(
        "ray-worker",
        r"\((?:[A-Za-z_][\w.:-]* )?pid=\d+(?:, ip=[0-9A-Fa-f.:]+)?\) ",
        "ray-project/ray doc/source/ray-observability/ray-logging.rst (a task's or actor's lines "
        "on the driver: (pid=N), (ActorName pid=N), ', ip=A' from another node)",
    ),
    LinePrefix(
        "nvswitch",
        r"nvidia-nvswitch\d+: ",
        "NVIDIA open-gpu-kernel-modules src/common/nvswitch (the NVSwitch driver's tag on its "
        "kernel lines, 'nvidia-nvswitchN: SXid ...': a device, not pdsh's host)",
    ),
    LinePrefix(
        "talosctl",
        r"(?P<host>[A-Za-z0-9][\w.-]*): [a-z]+: *[a-z]+: "
        r"\[(?P<time>\d{4}-\d{2}-\d{2}T[^\]\s]+)\]: ",
        "siderolabs/talos docs, talosctl dmesg (<node>: <facility>: <level>: [<RFC 3339 time>]: , "
        "the node by name or address)",
    ),
    LinePrefix(
        "pdsh",
        rf"(?P<host>[a-z][a-z0-9-]*\d[a-z0-9.-]*|{IPV4}): ",
        "chaos/pdsh src/pdsh/main.c and cea-hpc/clustershell (host: line; hosts named by name or "
        "by address, pdsh -w 10.0.0.[1-4])",
    ),
    LinePrefix(
        "nemo",
        rf"\[NeMo [IWEDC] (?P<time>{_ISO_TIME}) [^\]]+\] ",
        "NVIDIA/NeMo nemo/utils/formatters/base.py BaseNeMoFormatter ([NeMo I time module:line])",
    ),
    LinePrefix(
        "absl",
        r"[IWEF](?P<time>\d{4} \d{2}:\d{2}:\d{2}\.\d+)\s+\d+ [\w./\\-]+:\d+\] ",
        "abseil/abseil-py absl/logging/__init__.py "
        "(glog style: I0501 12:00:00.123456 pid file:line]); pytorch/pytorch "
        "torch/_logging/_internal.py (the same with the file's path, relative to the package "
        "root, in the platform's separators: torch/distributed/elastic/.../api.py:702])",
    ),
    LinePrefix(
        "hf-examples",
        rf"\[{_LEVEL}\|[^\]\s]+\] (?:(?P<time>{_ISO_TIME}) )?>> ",
        "huggingface/transformers examples/pytorch (format [%(levelname)s|%(filename)s:"
        "%(lineno)s] %(asctime)s >> %(message)s)",
    ),
    LinePrefix(
        "sglang",
        r"\[(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})"
        r"(?: TP(?P<rank>\d+)(?: EP\d+)?\]| (?:[A-Z_]+\d+ )*[A-Z_]+\d+\]) ",
        "sgl-project/sglang python/sglang/srt/managers/scheduler.py run_scheduler_process and "
        "srt/utils configure_logger ([time DP<d> PP<p> TP<t> EP<e>] , each tag only where that "
        "parallelism is used: the TP index is the process's rank when no DP or PP tag is before "
        "it)",
    ),
    LinePrefix(
        "python-logging",
        rf" *\[?(?P<time>{_ISO_TIME})\]?:?"
        # the logging module's usual layouts after the time: " - name - LEVEL - ",
        # " - LEVEL - name - ", fairseq's " | LEVEL | name | ", loguru's " | LEVEL | mod:fn:ln - ",
        # DeepSpeed's " [LEVEL] [file:line:fn] ", or a bare level; then the message.
        rf"(?: - [\w.]+ - {_LEVEL} - | - {_LEVEL} - [\w.]+ - | \| {_LEVEL} +\| [\w.]+ \| "
        rf"| \| {_LEVEL} +\| [\w.<>]+:[\w.<>]+:\d+ - | \[{_LEVEL}\] \[[^\]\s]+\] "
        rf"|\s*[|:-]?\s*\[?{_LEVEL}\]?\s*[|:-]?)?\s*",
        "Python logging (asctime's default 'YYYY-MM-DD HH:MM:SS,mmm'); "
        "facebookresearch/fairseq fairseq_cli/train.py; Delgan/loguru; "
        "microsoft/DeepSpeed deepspeed/utils/logging.py",
    ),
    LinePrefix(
        "python-basic",
        rf"{_LEVEL}:[\w.]+:",
        "Python logging.basicConfig() default format (LEVEL:name:message)",
    ),
)
"""The built-in prefixes, by priority (the first that matches at a line's start is cut)."""


@dataclass(frozen=True)
class PrefixConfig:
    """``[parsers.prefixes]``: the site's own line prefixes, tried before the built-in ones."""

    patterns: tuple[str, ...] = ()
    """The site's own prefixes: Rust regexes read at a line's start (the whole match is cut
    off), naming what they say with the groups rank, local_rank, host and time."""
    builtin: bool = True
    """Also cut the built-in prefixes (launchers', loggers' and log shippers')."""

    def __post_init__(self) -> None:
        for pattern in self.patterns:
            _check(pattern)


def _check(pattern: str) -> None:
    """ValueError naming the problem when ``pattern`` is not a usable prefix regex."""
    try:
        probe = pl.Series([""], dtype=pl.String)
        groups = probe.str.extract_groups(pattern).dtype.fields  # type: ignore[attr-defined]
        empty = probe.str.contains(f"^(?:{pattern})$").item()
    except pl.exceptions.ComputeError as exc:
        reason = str(exc).strip().splitlines()[-1].strip()
        raise ValueError(f"prefix {pattern!r} is not a valid regex ({reason})") from None
    unknown = sorted({g.name for g in groups if not g.name.isdigit()} - set(PREFIX_FIELDS))
    if unknown:
        raise ValueError(
            f"prefix {pattern!r}: group '{unknown[0]}' is not one of {', '.join(PREFIX_FIELDS)}"
        )
    if empty:
        raise ValueError(f"prefix {pattern!r} matches an empty line start (it must cut something)")


class PrefixStripper:
    """Cuts the known prefixes off log lines: ``strip`` gives a logs frame its bare ``message``,
    its raw line (``RAW``) and what the prefixes said (``prefix_<field>`` columns)."""

    def __init__(self, config: PrefixConfig | None = None) -> None:
        self.config = config or PrefixConfig()
        builtin = [p.pattern for p in PREFIXES] if self.config.builtin else []
        patterns = [*self.config.patterns, *builtin]
        self._count = len(patterns)
        self.pattern = "^" + _either(patterns)
        """The one regex that reads a prefix at a line's start (the whole prefix as ``_cut``,
        prefix ``i``'s named groups renamed ``<group>_<i>``), as Python's ``re`` reads it too."""
        own = len(self.config.patterns)
        fast = [*patterns[:own], *map(_ascii, patterns[own:])]
        self._read = "^" + _either(fast)
        self._first = "^" + _either(fast, "?:") if patterns else ""
        self._stacked = self._first + "+"
        self._last: tuple[pl.DataFrame, pl.DataFrame] | None = None

    def strip(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``frame`` (with a ``message`` column) with each message's prefixes cut off."""
        if self._last is not None and self._last[0] is frame:
            return self._last[1]
        message = _unescaped(frame.get_column("message"))
        stripped = frame.with_columns(message.alias(RAW), *self._prefixes(message))
        self._last = (frame, stripped)
        return stripped

    def remember(self, frame: pl.DataFrame, stripped: pl.DataFrame) -> None:
        """Take ``stripped`` as what ``frame`` strips to (a frame changed in columns the
        stripper leaves alone, such as a placed ``node``, need not be stripped again)."""
        self._last = (frame, stripped)

    def _prefixes(self, message: pl.Series) -> list[pl.Series]:
        """The bare messages and the ``prefix_*`` columns, one row per line. One scan finds the
        lines with a prefix and one regex cuts all of a line's stacked prefixes at once (a
        regex that captures nothing runs at the speed of a scan); then only the distinct cut
        prefixes (a rank tag recurs on every line of its rank) are read for what they say."""
        columns = [f"prefix_{field}" for field in PREFIX_FIELDS]
        nulls = pl.Series(dtype=pl.String).extend_constant(None, len(message))
        if not self._first:
            return _typed([message, *(nulls.alias(c) for c in columns)])
        at = message.str.contains(self._first).fill_null(False).arg_true()
        if at.is_empty():
            return _typed([message, *(nulls.alias(c) for c in columns)])
        text = message.gather(at)
        bare = text.str.replace(self._stacked, "")
        cut = text.str.strip_suffix(bare).alias(CUT)
        said = cut.to_frame().join(
            self._read_cuts(cut.unique()), on=CUT, how="left", maintain_order="left"
        )
        return _typed(
            [
                message.clone().scatter(at, bare),
                *(_scattered(nulls, at, said.get_column(c)).alias(c) for c in columns),
            ]
        )

    def _read_cuts(self, cuts: pl.Series) -> pl.DataFrame:
        """What each of ``cuts`` (distinct stacked prefixes) says: the cuts split into their
        prefixes, one per round, each distinct prefix read once (a rank tag recurs in front of
        many timestamps), and for each field the outermost prefix that names it (the layer
        that collected the line: its host, its time), but for the rank the innermost: the
        worker's own tag. An outer number is its launcher's task (``srun --label`` over one
        torchrun a node numbers the nodes: ``5: [rank47]:`` is rank 47), and none is the rank
        when an inner prefix names a local rank and none inside it a rank (``5: [default3]:``
        is local rank 3 of node 5, global rank unknown)."""
        rows = pl.Series("_row", range(len(cuts)), dtype=pl.UInt32)
        pieces, left = [], cuts
        for depth in range(MAX_ROUNDS):
            rest = left.str.replace(self._first, "")
            piece = left.str.head(left.str.len_chars() - rest.str.len_chars())
            pieces.append(pl.DataFrame([rows, piece.alias(PIECE)]).with_columns(_depth=depth))
            more = rest.str.len_bytes() > 0
            rows, left = rows.filter(more), rest.filter(more)
            if left.is_empty():
                break
        split = pl.concat(pieces)
        distinct = split.get_column(PIECE).unique()
        read = distinct.str.extract_groups(self._read).struct.unnest()
        said = pl.DataFrame([distinct, *(self._said(read, f) for f in PREFIX_FIELDS)])
        columns = [f"prefix_{field}" for field in PREFIX_FIELDS]
        rank, local = pl.col("prefix_rank"), pl.col("prefix_local_rank")
        worker = pl.col("_depth").filter(local.is_not_null()).min().fill_null(0)
        first = (
            split.join(said, on=PIECE, how="left")
            .sort("_row", "_depth")
            .group_by("_row", maintain_order=True)
            .agg(
                rank.filter(pl.col("_depth") >= worker).drop_nulls().last(),
                pl.col([c for c in columns if c != "prefix_rank"]).drop_nulls().first(),
            )
            .select("_row", *columns)
        )
        return pl.DataFrame([cuts]).hstack(first.drop("_row"))

    def _said(self, read: pl.DataFrame, field: str) -> pl.Series:
        """What the prefix that each line's cut begins with says of ``field`` (null where it is
        silent)."""
        found = [
            read.get_column(f"{field}_{i}")
            for i in range(self._count)
            if f"{field}_{i}" in read.columns
        ]
        if not found:
            return pl.Series(f"prefix_{field}", [None] * read.height, dtype=pl.String)
        return read.select(pl.coalesce(found).alias(f"prefix_{field}")).to_series()


def _ascii(pattern: str) -> str:
    """``pattern`` with its digit, word and space classes ASCII-only. What launchers and loggers
    write is ASCII, and the Unicode classes make capturing twice as slow."""
    for unicode, ascii in ASCII_CLASSES.items():
        pattern = pattern.replace(unicode, ascii)
    return pattern


def _scattered(nulls: pl.Series, at: pl.Series, values: pl.Series) -> pl.Series:
    """``values`` placed at rows ``at`` of a column of nulls (the nulls alone when they are all
    null: most prefixes say nothing of most fields)."""
    if values.null_count() == len(values):
        return nulls
    return nulls.clone().scatter(at, values)


def _unescaped(message: pl.Series) -> pl.Series:
    """``message`` with rsyslog's escapes of control characters (``SYSLOG_ESCAPES``) written
    back as the characters, on the few lines holding one."""
    at = message.str.contains(_ESCAPED).fill_null(False).arg_true()
    if at.is_empty():
        return message
    text = message.gather(at)
    for escape, character in SYSLOG_ESCAPES.items():
        text = text.str.replace_all(escape, character, literal=True)
    return message.clone().scatter(at, text)


def _typed(columns: list[pl.Series]) -> list[pl.Series]:
    """The stripper's columns as it hands them out: the ranks as Int32."""
    return [c.cast(pl.Int32, strict=False) if c.name.endswith("rank") else c for c in columns]


def _either(patterns: list[str], group: str = "?P<_cut>") -> str:
    """One regex matching the first of ``patterns`` that matches, their named groups numbered
    apart (``_numbered``), as one group (``group``: its name, or ``?:``)."""
    alternatives = "|".join(f"(?:{_numbered(p, i)})" for i, p in enumerate(patterns))
    return f"({group}{alternatives})"


def _numbered(pattern: str, index: int) -> str:
    """``pattern`` with each named group ``g`` renamed ``g_<index>`` (the alternatives of one
    regex need distinct names)."""
    return re.sub(r"\(\?P<(\w+)>", lambda m: f"(?P<{m.group(1)}_{index}>", pattern)
