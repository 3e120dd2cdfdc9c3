"""Which rows a source has delivered over a trailing window of event time, by content hash.

A log store hands the same row out more than once: a reconnected tail re-sends its last
seconds, a re-read window repeats what the tail already sent. ``SeenRows`` remembers, for every
delivered row newer than its horizon, its time, a hash of its stream, a 64-bit hash of the
row's identity (its stream, its time to the nanosecond, its content) and how many identical
rows were delivered; ``admit``
keeps the rows of a new answer that were not delivered before and remembers them.

Identical rows (one stream, one instant, one text) are told apart by count: an answer that
holds k of them delivers those beyond the ones already delivered. An answer always holds every
searchable copy of a row, since copies share their time and every read covers a time range.

The hash is polars' (``Expr.hash``), stable within one polars version only: a saved set made
by another version is not trusted (``load`` returns None and the caller falls back).
"""

from __future__ import annotations

import base64
import io
from typing import Any, ClassVar

import polars as pl

HASH_ID = f"polars-{pl.__version__}"


class SeenRows:
    """Delivered rows with time ``t`` after ``horizon_ns``: columns ``t``, ``s`` (stream hash),
    ``h`` (row hash), ``n`` (copies)."""

    SCHEMA: ClassVar[dict[str, Any]] = {
        "t": pl.Int64,
        "s": pl.UInt64,
        "h": pl.UInt64,
        "n": pl.Int64,
    }

    def __init__(self, horizon_ns: int, seen: pl.DataFrame | None = None) -> None:
        self.horizon_ns = horizon_ns
        self._seen = pl.DataFrame(schema=self.SCHEMA) if seen is None else seen

    def __len__(self) -> int:
        """Entries held (identical rows delivered apart may hold one each)."""
        return self._seen.height

    def admit(self, rows: pl.DataFrame) -> pl.DataFrame:
        """The rows of ``rows`` (with columns ``t``, ``s`` and ``h``) after the horizon and not
        delivered before, in their order; they are remembered as delivered."""
        rows = rows.filter(pl.col("t") > self.horizon_ns)
        if rows.is_empty():
            return rows
        low, high = rows.get_column("t").min(), rows.get_column("t").max()
        near = self._seen.filter(pl.col("t").is_between(low, high))
        if near.is_empty() and rows.get_column("h").n_unique() == rows.height:
            # the common case, a stretch never read before: nothing to count
            added = rows.select("t", "s", "h", pl.lit(1, pl.Int64).alias("n"))
            self._seen = pl.concat([self._seen, added])
            return rows
        delivered = near.group_by("h").agg(pl.col("n").sum().alias("_delivered"))
        fresh = (
            rows.with_columns(pl.int_range(pl.len()).over("h").alias("_copy"))
            .join(delivered, on="h", how="left", maintain_order="left")
            .filter(pl.col("_copy") >= pl.col("_delivered").fill_null(0))
            .drop("_copy", "_delivered")
        )
        if not fresh.is_empty():
            added = fresh.group_by("h").agg(
                pl.col("t").first(), pl.col("s").first(), pl.len().cast(pl.Int64).alias("n")
            )
            self._seen = pl.concat([self._seen, added.select(*self.SCHEMA)])
        return fresh

    def reconcile(
        self, answer: pl.DataFrame, streams: pl.Series, low_ns: int, high_ns: int
    ) -> None:
        """``answer`` holds every row the server has of ``streams`` (hashes) with
        ``low_ns < t <= high_ns``, each already admitted: what was delivered there and is
        missing from it was lost by the server (a crash), so forget it; the counts then match
        the server's again."""
        inside = (
            pl.col("s").is_in(streams.implode()) & (pl.col("t") > low_ns) & (pl.col("t") <= high_ns)
        )
        kept = answer.filter((pl.col("t") > low_ns) & (pl.col("t") <= high_ns))
        present = kept.group_by("h").agg(
            pl.col("t").first(), pl.col("s").first(), pl.len().cast(pl.Int64).alias("n")
        )
        self._seen = pl.concat([self._seen.filter(~inside), present.select(*self.SCHEMA)])

    def delivered_per_bucket(self, low_ns: int, high_ns: int, step_ns: int) -> pl.DataFrame:
        """Rows delivered with ``low_ns < t <= high_ns`` per stream and epoch-aligned bucket
        of ``step_ns``: columns ``s``, ``bucket`` and ``delivered``."""
        return (
            self._seen.filter((pl.col("t") > low_ns) & (pl.col("t") <= high_ns))
            .group_by("s", (pl.col("t") - pl.col("t") % step_ns).alias("bucket"))
            .agg(pl.col("n").sum().alias("delivered"))
        )

    def advance(self, horizon_ns: int) -> None:
        """Rows at or before ``horizon_ns`` are never delivered again: forget them."""
        if horizon_ns > self.horizon_ns:
            self.horizon_ns = horizon_ns
            self._seen = self._seen.filter(pl.col("t") > horizon_ns)

    def dump(self) -> dict[str, Any]:
        """JSON-serialisable: the set as compressed Arrow IPC in base64, and the hash's id."""
        compact = self._seen.group_by("t", "s", "h").agg(pl.col("n").sum()).select(*self.SCHEMA)
        buffer = io.BytesIO()
        compact.write_ipc(buffer, compression="zstd")
        return {
            "horizon_ns": self.horizon_ns,
            "hash": HASH_ID,
            "rows": base64.b64encode(buffer.getvalue()).decode(),
        }

    @classmethod
    def load(cls, saved: dict[str, Any]) -> SeenRows | None:
        """The set ``dump`` wrote; None when another polars version hashed it. Raises
        ValueError, KeyError or a PolarsError on a damaged one."""
        if saved.get("hash") != HASH_ID:
            return None
        frame = pl.read_ipc(io.BytesIO(base64.b64decode(saved["rows"], validate=True)))
        if frame.schema != pl.Schema(cls.SCHEMA):
            raise ValueError(f"unexpected columns {frame.schema}")
        return cls(int(saved["horizon_ns"]), frame)
