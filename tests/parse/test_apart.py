"""A run of batches read in one call hands each batch its own rows back."""

from __future__ import annotations

import polars as pl

from medic.ingest.base import Batch
from medic.parse.apart import PART, hand_out, joined, parts, read_apart
from medic.schema import LOGS
from medic.testing.builders import batch, log


def test_parts_number_each_row_by_its_batch() -> None:
    assert parts([2, 0, 3]).to_list() == [0, 0, 2, 2, 2]


def test_each_batch_gets_its_share_and_none_without_rows() -> None:
    batches = [batch("logs", [log(t, f"line {t}")]) for t in (1.0, 2.0, 3.0)]
    whole = joined(batches)
    assert whole is not None and whole.height == 3
    rows = whole.with_columns(parts([1, 1, 1])).filter(pl.col(PART) != 1)
    out = hand_out(rows, 3, "logs", LOGS)
    assert out[1] is None
    assert [b.frame.get_column("message").to_list() for b in out if b is not None] == [
        ["line 1.0"],
        ["line 3.0"],
    ]
    assert all(PART not in b.frame.columns for b in out if b is not None)


def test_batches_of_other_schemas_are_parsed_alone() -> None:
    plain = batch("logs", [log(1.0, "a")])
    wider = Batch.with_frame("logs", plain.data, plain.frame.with_columns(extra=pl.lit(1)))
    seen: list[Batch] = []

    def parse(one: Batch) -> Batch | None:
        seen.append(one)
        return one

    def read(frame: pl.DataFrame, sizes: list[int]) -> pl.DataFrame:
        raise AssertionError("not read in one call")

    assert read_apart([plain, wider], None, parse, read, "logs", LOGS) == [plain, wider]
    assert seen == [plain, wider]


def test_rows_out_of_batch_order_are_handed_out_as_rows_in_order() -> None:
    """A reader keeps its rows in batch order (each share is then a slice of the run); rows in
    another order still reach their own batch, in the order they came."""
    batches = [batch("logs", [log(t, f"line {t}"), log(t, f"more {t}")]) for t in (1.0, 2.0)]
    whole = joined(batches)
    assert whole is not None
    rows = whole.with_columns(parts([2, 2]))
    shuffled = rows[[2, 0, 3, 1]]

    def messages(out: list[Batch | None]) -> list[list[str] | None]:
        return [None if b is None else b.frame.get_column("message").to_list() for b in out]

    in_order = messages(hand_out(rows, 3, "logs", LOGS))
    assert in_order == [["line 1.0", "more 1.0"], ["line 2.0", "more 2.0"], None]
    assert messages(hand_out(shuffled, 3, "logs", LOGS)) == [
        ["line 1.0", "more 1.0"],
        ["line 2.0", "more 2.0"],
        None,
    ]
