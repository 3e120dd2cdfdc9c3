"""Rows that reached a log store too late to be delivered, counted.

A source that delivers late rows over a trailing window forgets the rows behind its horizon:
a row that reaches the store after the horizon has passed its time is never delivered. To
count those rows, ``LateAudit`` keeps, for a bounded band of event time behind the horizon,
how many rows were delivered per stream and step (what ``SeenRows`` knew as the horizon moved
past them). The store's own counts over that band, compared with these, give the rows it
holds beyond what was delivered: each is counted once, and the band then remembers the
store's count so that the next comparison does not count it again.

Only whole steps are compared: the step that holds the horizon, and the step that holds the
time the audit began (nothing before it was in scope), are left out. Memory is one entry per
stream and step of the band that delivered or lost a row.
"""

from __future__ import annotations

from typing import Any, ClassVar

import polars as pl

from medic.ingest.seen import SeenRows


class LateAudit:
    """Delivered rows per stream (``s``, a hash) and epoch-aligned step (``bucket``) over the
    ``band_ns`` behind the horizon, since ``since_ns``."""

    SCHEMA: ClassVar[dict[str, Any]] = {"s": pl.UInt64, "bucket": pl.Int64, "delivered": pl.Int64}

    def __init__(self, since_ns: int, step_ns: int, band_ns: int) -> None:
        self.since_ns = since_ns
        self.horizon_ns = since_ns
        self.step_ns = step_ns
        self.band_ns = band_ns
        self._counts = pl.DataFrame(schema=self.SCHEMA)

    def __len__(self) -> int:
        return self._counts.height

    def forget(self, seen: SeenRows, horizon_ns: int) -> None:
        """Call before ``seen`` forgets the rows up to ``horizon_ns``: their counts move here."""
        if horizon_ns <= self.horizon_ns:
            return
        if self.band_ns:
            passed = seen.delivered_per_bucket(self.horizon_ns, horizon_ns, self.step_ns)
            self._counts = (
                pl.concat([self._counts, passed.select(*self.SCHEMA)])
                .group_by("s", "bucket")
                .agg(pl.col("delivered").sum())
                .filter(pl.col("bucket") + self.step_ns > horizon_ns - self.band_ns)
            )
        self.horizon_ns = horizon_ns

    def window(self) -> tuple[int, int] | None:
        """``(low, high)``: the whole steps of the band are those with ``low < t <= high``;
        None when there are none yet (or the band is 0)."""
        if not self.band_ns:
            return None
        step = self.step_ns
        first = max(self.since_ns + 1, self.horizon_ns - self.band_ns)
        first += -first % step  # the first step that starts inside the band
        end = (self.horizon_ns + 1) - (self.horizon_ns + 1) % step  # the horizon's step
        return (first - 1, end - 1) if end > first else None

    def settle(self, stored: pl.DataFrame) -> pl.DataFrame:
        """``stored``: the store's rows per ``s`` and ``bucket`` over ``window()``. The steps
        holding more than was delivered or counted before, with how many more (``lost``);
        those rows are counted from now on."""
        low, high = self.window() or (0, 0)
        lost = (
            stored.filter(pl.col("bucket").is_between(low + 1, high))
            .join(self._counts, on=["s", "bucket"], how="left")
            .with_columns((pl.col("stored") - pl.col("delivered").fill_null(0)).alias("lost"))
            .filter(pl.col("lost") > 0)
        )
        if not lost.is_empty():
            self._counts = (
                pl.concat(
                    [
                        self._counts,
                        lost.select("s", "bucket", pl.col("stored").alias("delivered")),
                    ]
                )
                .group_by("s", "bucket")
                .agg(pl.col("delivered").max())
            )
        return lost.select("bucket", "lost")
