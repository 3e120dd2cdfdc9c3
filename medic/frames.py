"""Running the small polars queries of the hot path."""

from __future__ import annotations

import polars as pl

NO_PASSES = pl.QueryOptFlags.none()


def collect(query: pl.LazyFrame) -> pl.DataFrame:
    """Run ``query`` as polars runs an eager DataFrame call: in memory, no optimizer passes.
    On a batch of one second of a cluster the passes and the engine choice cost more than they
    save, and one chained query costs less than the eager calls it replaces."""
    return query.collect(engine="in-memory", optimizations=NO_PASSES)
