"""LateAudit: rows a store holds behind the horizon beyond what was delivered, counted once."""

from __future__ import annotations

import polars as pl

from medic.ingest.late_audit import LateAudit
from medic.ingest.seen import SeenRows

STEP = 10


def delivered(seen: SeenRows, times: list[int], stream: int = 1) -> None:
    seen.admit(
        pl.DataFrame(
            {"t": times, "s": [stream] * len(times), "h": [stream * 1000 + t for t in times]},
            schema={"t": pl.Int64, "s": pl.UInt64, "h": pl.UInt64},
        )
    )


def stored(*counts: tuple[int, int, int]) -> pl.DataFrame:
    """(stream, bucket, rows) as /hits answers them."""
    return pl.DataFrame(
        [list(c) for c in counts],
        schema={"s": pl.UInt64, "bucket": pl.Int64, "stored": pl.Int64},
        orient="row",
    )


def test_only_whole_steps_since_the_start_and_before_the_horizon_are_compared() -> None:
    audit = LateAudit(since_ns=5, step_ns=STEP, band_ns=1000)
    assert audit.window() is None
    audit.forget(SeenRows(5), 38)
    # the step [0, 10) began before the audit, the step [30, 40) holds the horizon
    assert audit.window() == (9, 29)
    audit.forget(SeenRows(38), 39)
    assert audit.window() == (9, 39)


def test_rows_beyond_those_delivered_are_counted_once() -> None:
    seen = SeenRows(0)
    delivered(seen, [11, 12, 25])
    audit = LateAudit(since_ns=0, step_ns=STEP, band_ns=1000)
    audit.forget(seen, 40)
    answer = stored((1, 10, 3), (1, 20, 1), (2, 30, 4))
    lost = audit.settle(answer)
    assert lost.sort("bucket").rows() == [(10, 1), (30, 4)]
    assert audit.settle(answer).is_empty()  # the same rows are not counted again
    assert audit.settle(stored((1, 10, 4))).rows() == [(10, 1)]  # one more came since


def test_rows_a_crash_lost_are_not_counted_and_the_band_is_bounded() -> None:
    seen = SeenRows(0)
    delivered(seen, [11, 12, 13])
    audit = LateAudit(since_ns=0, step_ns=STEP, band_ns=30)
    audit.forget(seen, 40)
    assert audit.settle(stored((1, 10, 1))).is_empty()
    assert len(audit) == 1
    audit.forget(seen, 60)  # the step [10, 20) has left the band
    assert len(audit) == 0
    assert audit.window() == (29, 59)
