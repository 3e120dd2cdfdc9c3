"""Batches: Arrow rows of a stream, and a parser's polars output whose Arrow form is built only
when read."""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from medic.ingest.base import Batch, polars_schema
from medic.testing.builders import at

SCHEMA = pa.schema(
    [
        pa.field("time", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("rank", pa.int32()),
    ]
)


def rows(**dtypes: pl.DataType) -> pl.DataFrame:
    frame = pl.DataFrame(
        {"time": [at(1), at(2), at(3)], "node": ["a", "b", "c"], "rank": [0, None, 2]}
    ).with_columns(pl.col("time").cast(pl.Datetime("us", "UTC")), pl.col("rank").cast(pl.Int32))
    return frame.with_columns(pl.col(name).cast(dtype) for name, dtype in dtypes.items())


def test_a_frame_in_the_schema_s_dtypes_is_kept_and_its_arrow_form_made_when_read() -> None:
    frame = rows()
    assert frame.schema == polars_schema(SCHEMA)
    batch = Batch.from_frame("progress", frame, SCHEMA)
    assert batch.frame is frame and batch.num_rows == 3 and batch.max_time == at(3)
    assert "data" not in batch.__dict__  # nothing has asked for the Arrow form yet
    assert batch.data.schema == SCHEMA
    assert batch.data.to_pylist() == frame.to_arrow().to_pylist()


def test_a_frame_of_other_dtypes_is_converted_through_the_schema_at_once() -> None:
    batch = Batch.from_frame("progress", rows(rank=pl.Int64), SCHEMA)
    assert batch.data.schema == SCHEMA
    assert batch.frame.schema == polars_schema(SCHEMA)
    assert batch.frame.get_column("rank").to_list() == [0, None, 2]


def test_slices_keep_their_kind_and_their_rows() -> None:
    made = Batch.from_frame("progress", rows(), SCHEMA).sliced(1, 2)
    assert "data" not in made.__dict__
    assert made.frame.get_column("node").to_list() == ["b", "c"] and made.num_rows == 2
    assert made.data.schema == SCHEMA
    read = Batch("progress", made.data).sliced(1, 1)
    assert read.data.column("node").to_pylist() == ["c"]
    assert read.frame.get_column("node").to_list() == ["c"]


def test_retimed_batches_keep_their_kind_their_rows_and_their_schema() -> None:
    later = pl.Series("time", [at(11), at(12), at(13)]).cast(pl.Datetime("us", "UTC"))
    made = Batch.from_frame("progress", rows(), SCHEMA).retimed(later)
    assert "data" not in made.__dict__ and made.max_time == at(13)
    assert made.frame.get_column("node").to_list() == ["a", "b", "c"]
    assert made.data.schema == SCHEMA
    read = Batch("progress", Batch.from_frame("progress", rows(), SCHEMA).data).retimed(later)
    assert read.data.schema == SCHEMA and read.max_time == at(13)
    assert read.data.column("time").to_pylist() == later.to_list()
    assert read.frame.get_column("time").to_list() == later.to_list()
