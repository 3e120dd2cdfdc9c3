"""Small hot-path queries: the newest time per key and per pair of keys, times as integers."""

from __future__ import annotations

import numpy as np
import polars as pl

from medic.frames import (
    FEW_ROWS,
    _newest_by_columns,
    _newest_by_pair_columns,
    _spans_by_columns,
    holds,
    newest_by,
    newest_by_pair,
    present,
    replaced,
    spans_by,
    times_us,
)
from medic.testing.builders import at


def rows(*pairs: tuple[str | None, float]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node": [node for node, _ in pairs],
            "time": pl.Series([at(t) for _, t in pairs]).cast(pl.Datetime("us", "UTC")),
        }
    )


def test_each_keys_newest_time_leaving_out_rows_without_a_key() -> None:
    newest = newest_by(rows(("a", 1), (None, 9), ("b", 2), ("a", 3), ("b", 3)), "node")
    assert sorted(zip(*newest, strict=True)) == [("a", at(3)), ("b", at(3))]


def test_rows_out_of_time_order_still_give_each_keys_newest_time() -> None:
    newest = newest_by(rows(("a", 5), ("b", 2), ("a", 1)), "node")
    assert sorted(zip(*newest, strict=True)) == [("a", at(5)), ("b", at(2))]


def pairs(*rows_: tuple[str | None, str | None, float]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node": [node for node, _, _ in rows_],
            "job_id": [job for _, job, _ in rows_],
            "time": pl.Series([at(t) for _, _, t in rows_]).cast(pl.Datetime("us", "UTC")),
        }
    )


def test_each_pairs_newest_time_leaving_out_rows_missing_either_key() -> None:
    frame = pairs(("a", "1", 1), ("a", "2", 2), (None, "1", 9), ("a", None, 9), ("a", "1", 3))
    assert sorted(newest_by_pair(frame, "node", "job_id")) == [("a", "1", at(3)), ("a", "2", at(2))]


def test_pairs_are_told_apart_by_both_keys_and_rows_out_of_order_keep_the_newest() -> None:
    frame = pairs(("ab", "c", 5), ("a", "bc", 2), ("ab", "c", 1))
    assert sorted(newest_by_pair(frame, "node", "job_id")) == [
        ("a", "bc", at(2)),
        ("ab", "c", at(5)),
    ]
    assert newest_by_pair(pairs((None, "1", 1)), "node", "job_id") == []


def test_times_are_microseconds_whatever_the_columns_unit() -> None:
    frame = rows(("a", 1.5), ("b", 2.25))
    expected = [at(1.5), at(2.25)]
    assert times_us(frame).tolist() == expected
    in_ns = frame.with_columns(pl.col("time").cast(pl.Datetime("ns", "UTC")))
    assert times_us(in_ns).tolist() == expected


def test_each_keys_earliest_and_newest_time() -> None:
    keys = np.array(["b", "a", "b", "a", "b"], dtype=object)
    times = np.array([5, 2, 1, 9, 3], dtype=np.int64)
    assert sorted(spans_by(keys, times)) == [("a", 2, 9), ("b", 1, 5)]
    assert spans_by(keys[:0], times[:0]) == []


def test_present_marks_the_rows_that_hold_a_value() -> None:
    assert present(pl.Series(["a", None, "b"])).tolist() == [True, False, True]
    assert present(pl.Series(["a", "b"])).tolist() == [True, True]


def test_a_state_keeps_its_other_keys_and_takes_the_new_rows_of_its_keys() -> None:
    state = pl.DataFrame({"job_id": ["1", "1", "2"], "gpu": [0, 1, 0], "seen": [3, 4, 5]})
    rows = pl.DataFrame({"job_id": ["1", "3"], "gpu": [1, 0], "seen": [9, 1]}).lazy()
    assert replaced(state, rows, ["job_id", "gpu"]).rows() == [
        ("1", 0, 3),
        ("2", 0, 5),
        ("1", 1, 9),
        ("3", 0, 1),
    ]


def test_holds_tells_whether_a_column_has_one_of_the_values() -> None:
    kinds = pl.Series("kind", ["none", None, "crash"])
    assert holds(kinds, "crash") and holds(kinds, ("hang", "none"))
    assert not holds(kinds, "hang") and not holds(kinds, ()) and not holds(kinds.head(0), "none")


def test_a_few_rows_give_the_column_paths_newest_times_in_the_same_order() -> None:
    frame = pairs(("a", "1", 1), ("b", None, 2), ("a", "2", 3), (None, "1", 4), ("b", "1", 5))
    frame = frame.vstack(pairs(("a", "1", 6)))
    assert newest_by(frame, "node") == _newest_by_columns(frame, "node")
    assert newest_by(frame, "job_id") == _newest_by_columns(frame, "job_id")
    assert newest_by_pair(frame, "node", "job_id") == _newest_by_pair_columns(
        frame, "node", "job_id"
    )
    assert newest_by_pair(frame, "node", "job_id") == [
        ("a", "2", at(3)),
        ("b", "1", at(5)),
        ("a", "1", at(6)),
    ]


def test_rows_out_of_order_or_many_go_the_column_path() -> None:
    late = rows(("a", 5), ("b", 2), ("a", 1))
    assert sorted(zip(*newest_by(late, "node"), strict=True)) == [("a", at(5)), ("b", at(2))]
    many = rows(*((f"n{i % 7}", i) for i in range(FEW_ROWS + 1)))
    assert newest_by(many, "node") == _newest_by_columns(many, "node")
    many_pairs = many.with_columns(job_id=pl.lit("1"))
    assert newest_by_pair(many_pairs, "node", "job_id") == _newest_by_pair_columns(
        many_pairs, "node", "job_id"
    )


def test_a_few_keys_give_the_same_spans() -> None:
    keys = np.array(["b", "a", "b", "a", "b"], dtype=object)
    ordered = np.array([1, 2, 3, 4, 5], dtype=np.int64)
    assert spans_by(keys, ordered) == _spans_by_columns(keys, ordered) == [("a", 2, 4), ("b", 1, 5)]
    late = np.array([5, 2, 1, 9, 3], dtype=np.int64)
    assert spans_by(keys, late) == _spans_by_columns(keys, late)
    assert spans_by(keys[:0], ordered[:0]) == []
