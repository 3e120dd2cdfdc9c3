"""SeenRows: each delivered row once, identical copies counted, forgotten past the horizon."""

from __future__ import annotations

import json

import polars as pl
import pytest

from medic.ingest.live import SourceError
from medic.ingest.seen import SeenRows
from medic.ingest.victorialogs import TailCursor


def rows(*items: tuple[str, int, str]) -> pl.DataFrame:
    frame = pl.DataFrame(
        [{"sid": s, "t": t, "msg": m} for s, t, m in items],
        schema={"sid": pl.String, "t": pl.Int64, "msg": pl.String},
    )
    return frame.with_columns(
        pl.col("sid").hash().alias("s"), pl.struct("sid", "t", "msg").hash().alias("h")
    )


def admitted(seen: SeenRows, *items: tuple[str, int, str]) -> list[tuple[str, int, str]]:
    return sorted(seen.admit(rows(*items)).select("sid", "t", "msg").rows())


def test_rows_already_delivered_are_dropped_whichever_read_brings_them() -> None:
    seen = SeenRows(horizon_ns=0)
    first = [("a", 10, "x"), ("a", 20, "p"), ("a", 20, "p"), ("b", 20, "q")]
    assert len(admitted(seen, *first)) == 4
    # a reconnected tail re-sends it all, with a third copy of p and two rows it never sent
    again = [*first, ("a", 20, "p"), ("a", 15, "late"), ("b", 21, "s")]
    assert admitted(seen, *again) == [("a", 15, "late"), ("a", 20, "p"), ("b", 21, "s")]
    assert admitted(seen, *again) == []


def test_rows_at_or_behind_the_horizon_are_forgotten_and_never_delivered() -> None:
    seen = SeenRows(horizon_ns=0)
    admitted(seen, *[(f"s{i}", 100 + i, "m") for i in range(100)])
    seen.advance(150)
    assert len(seen) == 49  # times 151..199
    assert admitted(seen, ("s1", 101, "m"), ("s1", 151, "new")) == [("s1", 151, "new")]


def test_delivered_rows_are_counted_per_stream_and_epoch_aligned_step() -> None:
    seen = SeenRows(horizon_ns=0)
    admitted(seen, ("a", 5, "x"), ("a", 12, "y"), ("a", 19, "z"), ("b", 12, "q"))
    counts = seen.delivered_per_bucket(5, 30, 10).sort("bucket", "delivered")
    assert counts.select("bucket", "delivered").rows() == [(10, 1), (10, 2)]


def test_the_set_survives_a_restart_and_a_damaged_one_is_a_clear_error() -> None:
    seen = SeenRows(horizon_ns=0)
    admitted(seen, ("a", 10, "x"), ("a", 10, "x"))
    cursor = TailCursor(30, seen, reach_ns=100)
    back = TailCursor.from_json(json.loads(json.dumps(cursor.to_json())), reach_ns=100)
    assert back.watermark_ns == 30
    assert admitted(back.seen, ("a", 10, "x"), ("a", 10, "x"), ("a", 10, "x")) == [("a", 10, "x")]
    with pytest.raises(SourceError, match="cannot resume from cursor"):
        TailCursor.from_json({"watermark_ns": 5, "seen": {"hash": seen.dump()["hash"]}}, 100)


def test_a_cursor_of_an_older_medic_or_polars_resumes_at_its_watermark() -> None:
    old = {"watermark_ns": 1000, "horizon_ns": 995, "streams": [], "ties": []}
    cursor = TailCursor.from_json(old, reach_ns=100)
    assert (cursor.watermark_ns, cursor.seen.horizon_ns, cursor.tail_from) == (1000, 1000, 1000)
    other = {"watermark_ns": 1000, "seen": {**SeenRows(0).dump(), "hash": "polars-0.0"}}
    assert TailCursor.from_json(other, reach_ns=100).seen.horizon_ns == 1000
