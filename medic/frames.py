"""Running the small polars queries of the hot path."""

from __future__ import annotations

from typing import Any

import polars as pl

NO_PASSES = pl.QueryOptFlags.none()


def collect(query: pl.LazyFrame) -> pl.DataFrame:
    """Run ``query`` as polars runs an eager DataFrame call: in memory, no optimizer passes.
    On a batch of one second of a cluster the passes and the engine choice cost more than they
    save, and one chained query costs less than the eager calls it replaces."""
    return query.collect(engine="in-memory", optimizations=NO_PASSES)


def newest_by(frame: pl.DataFrame, key: str) -> tuple[list[Any], list[int]]:
    """Each value of column ``key`` (nulls left out) and the newest time of its rows, in
    microseconds. A batch is sorted by time, so that is the time of its last row: found with
    column operations rather than a grouping query, which costs far more on a second of logs."""
    keys, times = frame.get_column(key), frame.get_column("time").to_physical()
    if keys.null_count():
        known = keys.is_not_null()
        keys, times = keys.filter(known), times.filter(known)
    if not times.is_sorted():
        newest = pl.DataFrame([keys, times]).group_by(key).agg(pl.col("time").max())
        return newest.get_column(key).to_list(), newest.get_column("time").to_list()
    last = keys.is_last_distinct()
    return keys.filter(last).to_list(), times.filter(last).to_list()
