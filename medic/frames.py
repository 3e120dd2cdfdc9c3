"""Running the small polars queries of the hot path."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
import polars as pl

NO_PASSES = pl.QueryOptFlags.none()


def collect(query: pl.LazyFrame) -> pl.DataFrame:
    """Run ``query`` as polars runs an eager DataFrame call: in memory, no optimizer passes.
    On a batch of one second of a cluster the passes and the engine choice cost more than they
    save, and one chained query costs less than the eager calls it replaces."""
    return query.collect(engine="in-memory", optimizations=NO_PASSES)


def replaced(state: pl.DataFrame, rows: pl.LazyFrame, keys: list[str]) -> pl.DataFrame:
    """``state`` with its rows of the ``keys`` that ``rows`` holds replaced by those rows (new
    keys added after the kept ones): a detector's per-key state updated. No join runs when
    either side is empty (the first rows of a state, a batch that changed nothing): the join
    costs more than the rows it would keep."""
    new = collect(rows)
    if new.is_empty():
        return state
    if state.is_empty():
        return new
    return collect(pl.concat([state.lazy().join(new.lazy(), on=keys, how="anti"), new.lazy()]))


def holds(column: pl.Series, values: str | Collection[str]) -> bool:
    """Whether some value of ``column`` is ``values`` (or one of them): a few microseconds of a
    column compared, where a filter is a query of ~100 us even when it keeps no row, so that a
    handler passes over a batch that holds nothing for it before its first query. A comparison
    per value: ``Series.is_in`` is a query itself."""
    if isinstance(values, str):
        values = (values,)
    return any(bool((column == value).any()) for value in values)


def times_us(frame: pl.DataFrame, column: str = "time") -> np.ndarray:
    """A (non-null) time column as its integers (microseconds), without a query: polars runs a
    query for ``to_physical``, which costs more than a second of rows."""
    series = frame.get_column(column)
    if getattr(series.dtype, "time_unit", None) != "us":
        series = series.dt.epoch("us")
    times: np.ndarray = series.to_numpy().view(np.int64)
    return times


def present(column: pl.Series) -> np.ndarray:
    """Where ``column`` holds a value, as a boolean array; without a query (which costs more
    than a second's few rows) when it has no null, the usual case."""
    if not column.null_count():
        return np.ones(len(column), bool)
    known: np.ndarray = column.is_not_null().to_numpy()
    return known


FEW_ROWS = 256
"""Rows up to which a batch is read in plain Python (its columns as lists, a dict over them)
rather than with column operations, each of which costs tens of microseconds whatever the
rows: a second of logs holds a handful of lines."""


def spans_by(keys: np.ndarray, times: np.ndarray) -> list[tuple[Any, int, int]]:
    """Each distinct value of ``keys`` (an array without nulls) with the earliest and the newest
    of its ``times``, in the keys' order, rather than with a grouping query (which costs far
    more on a second of rows): up to ``FEW_ROWS`` keys whose times never go back with dicts
    (sorting an array of strings compares them in Python anyway), more with array
    operations."""
    if keys.size > FEW_ROWS or not _ascending(times):
        return _spans_by_columns(keys, times)
    listed, stamps = keys.tolist(), times.tolist()
    first = dict(zip(reversed(listed), reversed(stamps), strict=True))  # a key's first row last
    newest = dict(zip(listed, stamps, strict=True))
    return [(key, first[key], newest[key]) for key in sorted(newest)]


def _spans_by_columns(keys: np.ndarray, times: np.ndarray) -> list[tuple[Any, int, int]]:
    if not keys.size:
        return []
    distinct, inverse = np.unique(keys, return_inverse=True)
    first = np.full(len(distinct), np.iinfo(np.int64).max, np.int64)
    newest = np.full(len(distinct), np.iinfo(np.int64).min, np.int64)
    np.minimum.at(first, inverse, times)
    np.maximum.at(newest, inverse, times)
    return list(zip(distinct.tolist(), first.tolist(), newest.tolist(), strict=True))


def newest_by(frame: pl.DataFrame, key: str) -> tuple[list[Any], list[int]]:
    """Each value of column ``key`` (nulls left out) and the newest time of its rows, in
    microseconds, in the order of those rows. A batch is sorted by time, so that is the time of
    its last row: found over the rows in plain Python for a few rows (``_newest_of_few``), with
    column operations for more, rather than a grouping query, which costs far more on a second
    of logs."""
    newest = _newest_of_few(frame, (key,))
    if newest is None:
        return _newest_by_columns(frame, key)
    return [k for (k,) in newest], list(newest.values())


def _newest_by_columns(frame: pl.DataFrame, key: str) -> tuple[list[Any], list[int]]:
    keys, times = frame.get_column(key), times_us(frame)
    if keys.null_count():
        known = keys.is_not_null()
        keys, times = keys.filter(known), times[known.to_numpy()]
    if not _ascending(times):
        newest = (
            pl.DataFrame([keys, pl.Series("time", times)]).group_by(key).agg(pl.col("time").max())
        )
        return newest.get_column(key).to_list(), newest.get_column("time").to_list()
    last = _last_distinct(keys)
    return keys.filter(last).to_list(), times[last.to_numpy()].tolist()


PAIR_SEPARATOR = "\x1f"
"""Joins a pair's two values into one key: a control character that no host name, job id or
other identifier in a pair holds."""


def newest_by_pair(frame: pl.DataFrame, first: str, second: str) -> list[tuple[Any, Any, int]]:
    """Each pair of values of the string columns ``first`` and ``second`` (rows with a null in
    either left out) and the newest time of its rows, in microseconds. As ``newest_by``: the
    last row of each pair in a batch sorted by time, in plain Python for a few rows, else with
    column operations on one joined key (a grouping query costs several times more on a second
    of logs)."""
    newest = _newest_of_few(frame, (first, second))
    if newest is None:
        return _newest_by_pair_columns(frame, first, second)
    return [(x, y, time) for (x, y), time in newest.items()]


def _newest_by_pair_columns(
    frame: pl.DataFrame, first: str, second: str
) -> list[tuple[Any, Any, int]]:
    a, b, times = frame.get_column(first), frame.get_column(second), times_us(frame)
    if a.null_count() or b.null_count():
        known = a.is_not_null() & b.is_not_null()
        a, b, times = a.filter(known), b.filter(known), times[known.to_numpy()]
    if not _ascending(times):
        rows = [a, b, pl.Series("time", times)]
        newest = pl.DataFrame(rows).group_by(first, second).agg(pl.col("time").max()).rows()
        return [(x, y, int(t)) for x, y, t in newest]
    last = _last_distinct(a + PAIR_SEPARATOR + b)
    kept = (a.filter(last).to_list(), b.filter(last).to_list(), times[last.to_numpy()].tolist())
    return list(zip(*kept, strict=True))


def _ascending(times: np.ndarray) -> bool:
    """Whether ``times`` never go back (as ``Series.is_sorted``), without a Series."""
    return bool(times.size < 2 or (times[1:] >= times[:-1]).all())


def _last_distinct(keys: pl.Series) -> pl.Series:
    """Where each value of ``keys`` comes for the last time; a lone row without a query."""
    return pl.Series([True]) if len(keys) == 1 else keys.is_last_distinct()


def _newest_of_few(frame: pl.DataFrame, keys: tuple[str, ...]) -> dict[tuple[Any, ...], int] | None:
    """Each distinct tuple of the ``keys`` columns (tuples with a null left out) -> the time of
    its last row, in the order of those rows; None unless the batch is few rows sorted by
    time. Built by dicts over the rows (no Python step per row): the last row of a tuple sets
    its time, and the distinct tuples of the rows reversed give the order."""
    if frame.height > FEW_ROWS:
        return None
    times = times_us(frame)
    if not _ascending(times):
        return None
    rows = list(zip(*(frame.get_column(key).to_list() for key in keys), strict=True))
    newest = dict(zip(rows, times.tolist(), strict=True))
    return {row: newest[row] for row in reversed(dict.fromkeys(reversed(rows))) if None not in row}
