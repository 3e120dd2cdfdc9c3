"""Small hot-path queries: the newest time per key."""

from __future__ import annotations

import polars as pl

from medic.frames import newest_by
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
