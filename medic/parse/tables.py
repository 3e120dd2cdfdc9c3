"""Progress printed as a table: a header naming the columns, then one row of numbers per step.

Some loops print their progress as a table (fastai's epoch table: ``epoch  train_loss
valid_loss  time`` once, then a row per epoch; a learning curve, DeePMD-kit's ``lcurve.out``:
``#  step  rmse_val  rmse_trn ...``, then a row per step shown): the row holds no word saying
what its numbers are, its header does. A header is a line of column names, one of them naming
a counter (an epoch, a step, an iteration, a batch or an update); a row is a line of numbers
only (or clocks, or ``#na#``/``nan``/``None`` for a value not measured) with as many cells as
its header has columns. Each row is read by the columns of the last header its process
printed: its counter is the step, its time column (a column a duration's name or unit labels)
how long it took, a clock as ``mm:ss`` or ``h:mm:ss``. A row that fits no header is left to
the template reader (``medic.parse.learned``); the header makes no step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

import polars as pl

from medic.parse.progress_formats import clock_seconds

COUNTER = r"(?:epoch|step|iter|iteration|batch|update)s?"
"""A column naming the counter: the step of each row."""
NAME = r"[A-Za-z_][A-Za-z0-9_./%()-]*"
COMMENT = r"^\s*#+\s*"
"""A data file's comment sign before its header (``#  step  rmse_val ...``)."""
HEADER = (
    rf"(?i)(?:{COMMENT}|^\s*)(?:(?:{NAME}\s{{2,}})+{COUNTER}(?:\s{{2,}}{NAME})*"
    rf"|{COUNTER}(?:\s{{2,}}{NAME})+|{COUNTER}(?:\s+{NAME}){{2,}})\s*$"
)
"""A line of column names, one of them the counter: two or more apart by two spaces or more,
as a table pads them, or the counter first and two or more after it, apart by any spaces (a
learning curve written with single spaces: ``step rmse_val rmse_trn lr``); after a comment
sign or not (a data file written for plotting, read by a tool that skips its comments)."""
CELL = (
    r"[-+]?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?%?|#na#|nan|None|-"
    r"|(?:[0-9]+:)?[0-9]{1,2}:[0-9]{2}"
)
ROW = rf"^\s*(?:{CELL})(?:\s+(?:{CELL}))+\s*$"
"""A line of cells only: numbers, clocks, or a value not measured."""
_COUNTER = re.compile(rf"(?i)^{COUNTER}$")
_TIME = re.compile(r"(?i)^(?:time|duration|elapsed|took|step_?time|time_?s|sec|seconds)$")
_TIME_MS = re.compile(r"(?i)^(?:time_?ms|ms|step_?time_?ms|ms/(?:step|it|batch))$")


@dataclass(frozen=True)
class Columns:
    """What a header says of its rows: how many cells, which is the counter, which the time
    and its seconds per unit (a clock's cells are read as clocks whatever the scale)."""

    width: int
    counter: int
    time: int | None
    scale: float


@dataclass
class Tables:
    """Per process (job, process), the columns of the last table header it printed."""

    headers: dict[tuple[str, str], Columns] = field(default_factory=dict)
    candidates: ClassVar[str] = f"{HEADER}|{ROW}"
    """The lines a table is made of (a regex over the line)."""

    def read(self, lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
        """``lines`` (``_line``, ``job_id``, ``_who``, ``message``; in order) -> the step rows
        of the table rows among them (``_line``, ``step``, ``step_time_s``), and the
        ``_line`` of every line a table holds (its headers and the rows that fit them)."""
        message = pl.col("message")
        headers = lines.filter(message.str.contains(HEADER))
        rows = lines.filter(message.str.contains(ROW))
        learned = self._learn(headers)
        owners = pl.DataFrame(
            [
                (job, who, line, c.width, c.counter, c.time, c.scale)
                for job, who, line, c in learned
            ],
            schema={
                "job_id": pl.String,
                "_who": pl.String,
                "_owner": pl.Int64,
                "_width": pl.Int64,
                "_counter": pl.Int64,
                "_time": pl.Int64,
                "_scale": pl.Float64,
            },
            orient="row",
        )
        if rows.is_empty() or owners.is_empty():
            return _EMPTY, headers.get_column("_line")
        cells = pl.col("_cells")
        fitted = (
            rows.with_columns(
                pl.col("_line").cast(pl.Int64).alias("_at"),
                message.str.extract_all(r"\S+").alias("_cells"),
            )
            .sort("_at")
            .join_asof(
                owners.sort("_owner"),
                left_on="_at",
                right_on="_owner",
                by=["job_id", "_who"],
                strategy="backward",
                check_sortedness=False,
            )
            .filter(cells.list.len() == pl.col("_width"))
            .with_columns(
                cells.list.get(pl.col("_counter"), null_on_oob=True)
                .cast(pl.Int64, strict=False)
                .alias("step"),
                cells.list.get(pl.col("_time").fill_null(0), null_on_oob=True).alias("_cell"),
            )
            .filter(pl.col("step").is_not_null())
        )
        cell = pl.col("_cell")
        plain = cell.cast(pl.Float64, strict=False) * pl.col("_scale")
        step_time = pl.when(pl.col("_time").is_not_null()).then(
            pl.coalesce(clock_seconds(cell), plain)
        )
        steps = fitted.select(pl.col("_line"), "step", step_time.alias("step_time_s")).sort("_line")
        held = pl.concat([headers.get_column("_line"), steps.get_column("_line")])
        return steps, held

    def _learn(self, headers: pl.DataFrame) -> list[tuple[str, str, int, Columns]]:
        """Each process's headers as (job, process, line, columns): the last one of an earlier
        batch at line -1, then those of ``headers``; the last one of each process is kept."""
        learned = [(job, who, -1, columns) for (job, who), columns in self.headers.items()]
        for line, job, who, text in headers.select(
            "_line", "job_id", "_who", "message"
        ).iter_rows():
            columns = _columns(re.sub(COMMENT, "", text).split())
            if columns is not None:
                learned.append((job, who, line, columns))
                self.headers[(job, who)] = columns
        return learned

    def forget(self, job: str) -> None:
        """Drop the headers of a job (it ended)."""
        self.headers = {key: c for key, c in self.headers.items() if key[0] != job}


def _columns(names: list[str]) -> Columns | None:
    """What a header's column names say: None when none names the counter."""
    counter = next((i for i, name in enumerate(names) if _COUNTER.match(name)), None)
    if counter is None:
        return None
    time = next((i for i, n in enumerate(names) if _TIME.match(n) or _TIME_MS.match(n)), None)
    scale = 0.001 if time is not None and _TIME_MS.match(names[time]) else 1.0
    return Columns(len(names), counter, time, scale)


_EMPTY = pl.DataFrame(schema={"_line": pl.UInt32, "step": pl.Int64, "step_time_s": pl.Float64})
