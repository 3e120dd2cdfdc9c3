"""Columnar accumulation of simulated log lines, and the per-rank template renderer.

Lines are collected as small polars frames (never one Python object per line on the bulk
paths) and turned into the spec's ``logs`` table once, sorted by time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from medic import schema

_COLUMNS = {
    "time": pl.Int64,
    "job_id": pl.String,
    "node": pl.String,
    "rank": pl.Int32,
    "source": pl.String,
    "message": pl.String,
    "origin": pl.Int32,
}

# Columns that are never template placeholders.
RESERVED = frozenset({"time", "template", "gap_us", "job_id", "node", "source", "node_idx"})


class LogSink:
    """Collects log lines from every generator of a recording."""

    def __init__(self) -> None:
        self._parts: list[pl.DataFrame] = []

    def add(
        self,
        times_us: Sequence[int] | np.ndarray,
        messages: Sequence[str],
        node: str,
        job_id: str | None = None,
        rank: int | None = None,
        source: str = "app",
        origin: int | None = None,
    ) -> None:
        """Append lines of one node (and one rank, when known); ``origin`` is the rank that
        printed them even when the collector cannot tell (it never reaches the recording)."""
        n = len(messages)
        if n == 0:
            return
        self._parts.append(
            pl.DataFrame(
                {
                    "time": np.asarray(times_us, dtype=np.int64),
                    "job_id": [job_id] * n,
                    "node": [node] * n,
                    "rank": [rank] * n,
                    "source": [source] * n,
                    "message": list(messages),
                    "origin": [origin] * n,
                },
                schema=_COLUMNS,
            )
        )

    def add_frame(self, frame: pl.DataFrame) -> None:
        """Append a frame that already has the sink's columns (extra columns are dropped, a
        missing ``origin`` is null)."""
        if frame.height:
            self._parts.append(
                frame.select(
                    [
                        (pl.col(c) if c in frame.columns else pl.lit(None)).cast(t).alias(c)
                        for c, t in _COLUMNS.items()
                    ]
                )
            )

    def frame(self) -> pl.DataFrame:
        if not self._parts:
            return pl.DataFrame(schema=_COLUMNS)
        return pl.concat(self._parts, how="vertical")

    def table(
        self,
        drop: pl.Expr | None = None,
        deliver: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
    ) -> pa.Table:
        """Every line as the spec's logs table, sorted by time; ``drop`` removes matching rows,
        ``deliver`` rewrites the lines as the collector receives them (prefixes, times)."""
        frame = self.frame()
        if drop is not None:
            frame = frame.filter(~drop)
        if deliver is not None:
            frame = deliver(frame)
        frame = frame.sort("time", maintain_order=True).with_columns(
            pl.col("time").cast(pl.Datetime("us", "UTC"))
        )
        return schema.conform(frame.to_arrow(), schema.LOGS)


def fill_templates(frame: pl.DataFrame, templates: Sequence[str]) -> pl.DataFrame:
    """One row per (row of ``frame``, template), the template's placeholders filled from columns.

    ``frame`` carries ``time`` (µs) and the placeholder columns; line ``i`` of the
    templates is stamped ``i * gap_us`` after the row's time when ``frame`` has ``gap_us``.
    """
    lines = pl.DataFrame({"template": list(templates), "line": np.arange(len(templates))})
    out = frame.join(lines, how="cross")
    gap = pl.col("gap_us") if "gap_us" in out.columns else pl.lit(0)
    out = out.with_columns((pl.col("time") + pl.col("line") * gap).alias("time"))
    return render(out.drop("line"))


def render(frame: pl.DataFrame) -> pl.DataFrame:
    """Replace ``template`` by ``message``: ``{column}`` placeholders filled from the frame's
    columns, ``{glog}`` (glog) and ``{pylog}`` (PyTorch's Python logging) timestamps from each
    row's ``time``."""
    stamp = (pl.col("time") * 1000 + (pl.col("time") * 7919 % 997)).cast(pl.Datetime("ns", "UTC"))
    message = pl.col("template")
    values = {
        "glog": stamp.dt.strftime("%m%d %H:%M:%S%.9f"),
        "pylog": stamp.dt.strftime("%m%d %H:%M:%S%.3f") + pl.lit("000"),
    }
    values.update({c: pl.col(c).cast(pl.String) for c in frame.columns if c not in RESERVED})
    for name, value in values.items():
        message = message.str.replace_all("{" + name + "}", value, literal=True)
    return frame.with_columns(message.alias("message")).drop("template")
