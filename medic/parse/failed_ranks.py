"""Failed ranks: which rank, task or process a launcher or runtime reports dead, on which host,
with which exit code or signal.

Launchers and runtimes print who died in a handful of shapes, whatever their wording. This
module reads the shapes, not the wordings:

* **a record of fields**: a run of ``key : value`` lines, opened by a line that is not one.
  torchrun's failure summary (``torch/distributed/elastic/multiprocessing/errors``,
  ``_format_failure``) prints one per failure under ``Failures:`` and ``Root Cause (first
  observed failure):``, each headed ``[i]:``, with ``host``, ``rank`` (``N (local_rank: M)``),
  ``exitcode`` (negative: the signal) fields; Open MPI's and PRRTE's "detected that one or more
  processes exited with non-zero status ... The first process to do so was:" is followed by
  ``Process name: [[job,vpid],rank]`` (PRRTE: ``[nspace@job,rank]``) and ``Exit code: N``;
* **one line** naming the process, maybe its host, and its end: Open MPI's "noticed that
  process rank N with PID P on node H exited on signal S", srun's ``srun: error: H: task(s)
  N[-M]: Exited with exit code C`` (or the signal's name), slurmstepd's ``task N exit code
  C``, DeepSpeed's launcher (``--local_rank=N`` in the command it reports, ``exits with return
  code = C``), MPICH's "application called MPI_Abort(comm, C) - process N", a runtime's
  "task N ... terminated".

Every line (not only a launcher's) is read for three fields, each by a few general patterns:
who (a global ``rank``, a ``task``, an MPI process name; a ``local_rank`` apart), where (``on
node H``, ``host : H``, srun's ``H: task``) and how it ended (an exit, exitcode or return
code, a signal number or name, a fatal word such as ``Segmentation fault`` or ``Killed``).
A record naming who (or only a local rank: torchrun's agent line ``failed (exitcode: 1)
local_rank: 0``, DeepSpeed's launcher) and a bad end is a failed rank: an exit code of 0, or
an end said to be normal, is none; nor is a rank ended by SIGTERM or reported
``Terminated``: its launcher stopped it after another failed (srun's ``tasks 0-57,59-63:
Terminated``). A record opened by, or right after, a line that says it is the first or root
failure is ``primary``.

The rows (stream ``failed_ranks``) name no incident by themselves; the crash detector takes
the ranks of a job's incident from them (``medic.detectors.crash``), their hosts checked
against the job's nodes by the pipeline's placement. Column expressions over the batch, Python
only per record found (a few per failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import polars as pl
import pyarrow as pa

from medic.ingest.base import Batch
from medic.parse.apart import PART, parts, read_apart
from medic.parse.prefixes import PrefixStripper
from medic.schema import TIME

FAILED_RANKS = pa.schema(
    [
        pa.field("time", TIME, nullable=False),
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("rank", pa.int32()),
        pa.field("local_rank", pa.int32()),
        pa.field("host", pa.string()),
        pa.field("exit_code", pa.int32()),
        pa.field("signal", pa.string()),
        pa.field("end", pa.string(), nullable=False),
        pa.field("primary", pa.int8(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
    ]
)
ENDS = (
    "exit code",
    "exitcode",
    "code -",
    "exit_code",
    "exit status",
    "exited",
    "exits with",
    "return code",
    "returncode",
    "with code",
    "with status",
    "status failed",
    "signal",
    "killed",
    "segmentation fault",
    "abort",
    "terminated",
    "out of memory",
    "bus error",
    "core dumped",
)
"""Words (any case) one of which every line saying how a process ended holds: the fast path,
one Aho-Corasick scan over every line; only the lines near one (``BEFORE`` lines before it,
``AFTER`` after: a record's fields around its exit code) are read further."""
BEFORE = 8
AFTER = 1
FIELD_LINE = r"^\s*[A-Za-z][\w -]{0,30}(?:\([\w -]{0,20}\)[\w -]{0,10})?:\s+\S"
"""A ``key : value`` line: it continues the record of the line before it. A key's brackets
are closed: a line whose first colon is inside them (torchrun's agent: ``failed (exitcode: -9)
local_rank: 3 (pid: 812917)``) is a report of its own."""
RANKS = r"(\d+(?:\s*-\s*\d+)?(?:,\s*\d+(?:-\d+)?)*)"
WHO = (
    rf"(?i)(?:^|[^\w])(?:global[_ ])?rank\s*[:=]?\s*\[?{RANKS}"
    rf"|\btasks?\s*[:=]?\s*{RANKS}"
    r"|\[\[\d+,\d+\],(\d+)\]"
    r"|\[[\w.-]+@\d+,(\d+)\]"
    r"|\bMPI_Abort\([^()]*\)\s*-\s*process\s+(\d+)"
)
"""A global rank (not a ``local_rank``; a list as Python prints one too: Paddle's launcher's
``rank=[3]``), srun's and runtimes' task numbers (ranges too), an Open MPI process name
``[[job,vpid],rank]`` or PRRTE's ``[nspace@job,rank]``, the process an MPICH-family library
(MPICH, Intel MPI, Cray MPICH, MVAPICH) names after an abort (``application called
MPI_Abort(MPI_COMM_WORLD, 1) - process 3``: its rank in ``MPI_COMM_WORLD``)."""
LOCAL = r"(?i)local_rank\s*[:=]?\s*(\d+)|\bprocess\s+(\d+)\s+terminated\b"
"""A local rank: torchrun's ``local_rank`` field (its agent's ``local_rank: 0``; its warning
about a child that wrote no error file, ``Child process P (local_rank 0) FAILED (exitcode
1)``), or the process index that ``torch.multiprocessing.spawn`` reports ("process 3
terminated with exit code 1", "-- Process 5 terminated with the following error:"), each
process's index on its node."""
WHERE = (
    r"(?i)\bon (?:node|host)\s+([A-Za-z][\w.-]*[\w])"
    r"|\bhost(?:name)?\s*[:=]\s*([A-Za-z][\w.-]*[\w])"
    r"|([A-Za-z][\w.-]*[\w]):\s+tasks?\s+\d"
)
CODE = (
    r"(?i)(?:exit\s*code|exitcode|exit status|return code|returncode"
    r"|(?:exited|terminated|returned|ended|died|failed) with (?:exit )?(?:code|status))"
    r"\s*[:=]?\s*\(?(-?\d+)"
    r"|\bcode\s*[:=]?\s*(-\d+)\b"
    r"|\bMPI_Abort\([^(),]*,\s*(-?\d+)\)"
    r"|\bstatus\s*[:=]?\s*failed\b[^;]*?\bcode\s*[:=]?\s*(\d+)\b"
)
"""An exit code; a bare ``code`` only when negative, the signal that ended a child process as
Python's subprocess reports it (Paddle's launcher: ``Container rank 0 status failed ...
code -6``), or after a status said to be failed (the same line with ``code 1``); the error
code a process gave ``MPI_Abort``, which MPI launchers exit with."""
SIGNAL = r"(?i:\bsignal)\s*:?\s*(\d+)|\b(SIG[A-Z]{3,6})\b"
WORDS = (
    r"(?i)\b(segmentation fault|bus error|aborted|killed|core dumped|out of memory|oom"
    r"|terminated with the following error|terminated)\b"
)
"""Ends named by a word (srun's ``task 3: Killed``, a runtime's ``task 2 terminated``), or by
the error a process ended with (``torch.multiprocessing.spawn``: "Process 5 terminated with the
following error"; ``terminated`` alone is a launcher stopping it, and a thread "terminated with
exception", a process group's watchdog passing on a collective's error, is no process's end)."""
NORMAL = r"(?i)\b(?:normally|successfully|gracefully|cleanly|finished|completed)\b"
FIRST = r"(?i)root cause|first (?:observed )?failure|first process"
STOPPED = ("15", "SIGTERM", "terminated")
"""Ends that a launcher gives the ranks it stops after another failed."""
SIGNALS = {"6": "SIGABRT", "7": "SIGBUS", "9": "SIGKILL", "11": "SIGSEGV", "15": "SIGTERM"}
MAX_EXPANDED = 64
"""Most ranks one range (``tasks 0-63``) is expanded to."""


class FailedRankParser:
    """``logs`` -> ``failed_ranks``: the ranks launchers and runtimes report dead."""

    name: ClassVar[str] = "failed_ranks"
    input_stream: ClassVar[str] = "logs"
    output_stream: ClassVar[str] = "failed_ranks"
    strips_prefixes: ClassVar[bool] = True

    def __init__(self, prefixes: PrefixStripper | None = None) -> None:
        self.prefixes = prefixes or PrefixStripper()

    def parse(self, batch: Batch) -> Batch | None:
        frame = batch.frame
        if frame.is_empty() or "message" not in frame.columns:
            return None
        rows = failed_ranks(self.prefixes.strip(frame))
        return None if rows.is_empty() else Batch.from_frame(self.name, rows, FAILED_RANKS)

    def parse_apart(
        self, batches: Sequence[Batch], joined: pl.DataFrame | None = None
    ) -> list[Batch | None]:
        """What ``parse`` gives for each of ``batches`` (non-empty), read in one call: a record
        never spans two batches, as it does not when each is parsed alone. ``joined``: their
        frames already concatenated."""
        return read_apart(batches, joined, self.parse, self._read, self.name, FAILED_RANKS)

    def _read(self, frame: pl.DataFrame, sizes: list[int]) -> pl.DataFrame | None:
        if "message" not in frame.columns:
            return None
        return failed_ranks(self.prefixes.strip(frame), sizes)


def failed_ranks(stripped: pl.DataFrame, sizes: Sequence[int] | None = None) -> pl.DataFrame:
    """The failed ranks ``stripped`` (a logs frame with bare ``message``) reports, one row per
    rank (see the module docstring); an empty frame of ``FAILED_RANKS`` when none. ``sizes``:
    the frame holds that many batches' rows in turn, each read apart (a record never spans two
    of them), and every row found carries its batch's index as ``_part``."""
    parted = sizes is not None
    sizes = [stripped.height] if sizes is None else list(sizes)
    part = parts(sizes)
    lines = _near_ends(stripped.select("time", "job_id", "node", "message", part), sizes)
    if lines.is_empty():
        return _empty(parted)
    message = pl.col("message")
    fields = lines.with_columns(
        _first(WHO, 5).alias("_who"),
        _first(LOCAL, 2).alias("_local"),
        _first(WHERE, 3).alias("_where"),
        _first(CODE, 4).alias("_code"),
        _first(SIGNAL, 2).alias("_signal"),
        message.str.extract(WORDS, 1).str.to_lowercase().alias("_word"),
        message.str.contains(NORMAL).alias("_normal"),
        message.str.contains(FIRST).alias("_first"),
        message.str.contains(FIELD_LINE).alias("_field"),
    )
    ended = pl.any_horizontal(pl.col("_code", "_signal", "_word").is_not_null())
    # A rank on a line of prose names who failed only when the line says how it ended (an NCCL
    # INFO line's "rank 3" opens no record of a failure).
    said = pl.col("_field") | ended
    fields = fields.with_columns(
        pl.when(said).then(pl.col("_who")).alias("_who"),
        pl.when(said).then(pl.col("_local")).alias("_local"),
    )
    complete = pl.col("_who").is_not_null() & ended
    records = fields.with_columns(
        (~pl.col("_field") | complete | pl.col("_gap"))
        .cum_sum()
        .over(PART, "job_id")
        .alias("_record"),
        pl.col("_first").shift(1).over(PART, "job_id").fill_null(False).alias("_after_first"),
    ).with_columns(
        (pl.col("_first") | pl.col("_after_first"))
        .first()
        .over(PART, "job_id", "_record")
        .alias("_opened")
    )
    ends = pl.col("_code", "_signal", "_word")
    grouped = (
        records.filter(
            pl.any_horizontal(
                pl.col("_who", "_local", "_where", "_code", "_signal", "_word").is_not_null()
            )
            | pl.col("_first")
        )
        .group_by(PART, "job_id", "_record", maintain_order=True)
        .agg(
            pl.col("time").first(),
            pl.col("node").first(),
            pl.col("_who").drop_nulls().first(),
            pl.col("_local").drop_nulls().first(),
            pl.col("_where").drop_nulls().first(),
            *(pl.col(c).drop_nulls().first() for c in ("_code", "_signal", "_word")),
            pl.col("_normal").any(),
            pl.col("_opened").first().alias("primary"),
            pl.col("message").filter(pl.any_horizontal(ends.is_not_null())).first().alias("_said"),
        )
        .filter(
            (pl.col("_who").is_not_null() | pl.col("_local").is_not_null())
            & ~pl.col("_normal")
            & (
                pl.col("_signal").is_not_null()
                | pl.col("_word").is_not_null()
                | (pl.col("_code").cast(pl.Int64, strict=False).fill_null(0) != 0)
            )
        )
    )
    if grouped.is_empty():
        return _empty(parted)
    out = []
    for row in grouped.iter_rows(named=True):
        code = _number(row["_code"])
        signal = row["_signal"]
        if signal is None and code is not None and code < 0:
            signal = str(-code)
        name = SIGNALS.get(signal, signal) if signal is not None else None
        # "terminated" says stopped unless a signal it names says otherwise ("process 3
        # terminated with signal SIGSEGV")
        stopped = (
            signal in STOPPED
            or name == "SIGTERM"
            or ((row["_word"] or "") in STOPPED and name is None)
        ) and code in (None, 0, -15, 143)
        if stopped:
            continue
        end = name or (f"exit code {code}" if code is not None else row["_word"])
        if name is not None and code is not None and code > 0:
            end = f"exit code {code}, {name}"
        for rank in _expanded(row["_who"]) if row["_who"] is not None else [None]:
            out.append(
                {
                    "time": row["time"],
                    "job_id": row["job_id"],
                    "node": row["node"] or "",
                    "rank": rank,
                    "local_rank": _int32(_number(row["_local"])),
                    "host": row["_where"],
                    "exit_code": _int32(code),
                    "signal": name,
                    "end": end,
                    "primary": int(bool(row["primary"])),
                    "message": (row["_said"] or "").strip(),
                    PART: row[PART],
                }
            )
    found = pl.DataFrame(out, schema=_empty(parted=True).schema)
    return found if parted else found.drop(PART)


def _near_ends(lines: pl.DataFrame, sizes: Sequence[int]) -> pl.DataFrame:
    """The lines of a job within ``BEFORE`` lines before and ``AFTER`` after a line holding
    one of ``ENDS`` in the same batch (``sizes``: the batches' rows, in turn), in order,
    ``_gap`` marking a line that does not follow the one before it in its batch."""
    message = lines.get_column("message")
    ends = message.str.contains_any(list(ENDS), ascii_case_insensitive=True)
    marked = (ends & lines.get_column("job_id").is_not_null()).fill_null(False)
    at = marked.arg_true().to_numpy().astype(np.int64)
    if at.size == 0:
        return lines.clear().with_columns(_gap=pl.lit(False))
    stops = np.cumsum(sizes, dtype=np.int64)
    part = np.searchsorted(stops, at, side="right")
    low = np.maximum(at - BEFORE, stops[part] - np.asarray(sizes, dtype=np.int64)[part])
    high = np.minimum(at + AFTER, stops[part] - 1)
    lengths = high - low + 1
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    near = np.unique(np.repeat(low, lengths) + offsets)
    parts = np.searchsorted(stops, near, side="right")
    gap = np.zeros(near.size, dtype=bool)
    gap[1:] = (np.diff(near) != 1) & (parts[1:] == parts[:-1])
    picked = lines[pl.Series(near)].with_columns(pl.Series("_gap", gap))
    return picked.filter(pl.col("job_id").is_not_null())


def _first(pattern: str, groups: int) -> pl.Expr:
    """The first of ``pattern``'s ``groups`` capture groups that matched (alternatives)."""
    message = pl.col("message")
    return pl.coalesce(*(message.str.extract(pattern, g) for g in range(1, groups + 1)))


def _number(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _int32(number: int | None) -> int | None:
    """``number`` where an int32 column holds it, else None: a Windows status as an exit code
    (3221225477, an access violation) is said in ``end`` only."""
    return number if number is not None and -(2**31) <= number < 2**31 else None


def _expanded(ranks: str) -> list[int | None]:
    """``3``, ``10-11``, ``0-2,5`` as rank numbers (a range cut at ``MAX_EXPANDED``)."""
    out: list[int | None] = []
    for part in ranks.replace(" ", "").split(","):
        low, _, high = part.partition("-")
        if not low.isdigit():
            continue
        end = int(high) if high.isdigit() else int(low)
        out.extend(range(int(low), min(end, int(low) + MAX_EXPANDED - 1) + 1))
    return out[:MAX_EXPANDED]


def _empty(parted: bool = False) -> pl.DataFrame:
    empty: pl.DataFrame = pl.from_arrow(FAILED_RANKS.empty_table())  # type: ignore[assignment]
    return empty.with_columns(pl.Series(PART, [], dtype=pl.UInt32)) if parted else empty
