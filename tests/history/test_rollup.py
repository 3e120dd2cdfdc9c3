"""Per-minute buffers: which minutes close, what a stream without some columns yields."""

import polars as pl
import pytest

from medic.history.rollup import GPU_ROLLUP, PROGRESS_ROLLUP, MinuteBuffer
from medic.testing.builders import at, batch
from tests.history.rows import gpu, progress


def test_only_minutes_that_ended_are_closed() -> None:
    buffer = MinuteBuffer(GPU_ROLLUP)
    buffer.add(batch("gpu", [gpu(t, "n1", 0, util=1.0) for t in (0, 59, 60, 125)]).frame)

    assert buffer.close(at(59)) is None
    closed = buffer.close(at(120))

    assert closed is not None
    assert closed.get_column("minute").dt.epoch("us").to_list() == [at(0), at(60)]
    assert closed.get_column("samples").to_list() == [2, 1]
    assert buffer.rows == 1
    rest = buffer.close()
    assert rest is not None and rest.get_column("samples").to_list() == [1]
    assert buffer.rows == 0 and buffer.close() is None


def test_entities_are_summarised_separately() -> None:
    buffer = MinuteBuffer(GPU_ROLLUP)
    rows = [gpu(1, "n1", 0, util=10.0), gpu(2, "n1", 1, util=20.0), gpu(3, "n2", 0, util=30.0)]
    buffer.add(batch("gpu", rows).frame)

    closed = buffer.close()

    assert closed is not None
    assert closed.select("node", "gpu", "util_max").rows() == [
        ("n1", 0, 10.0),
        ("n1", 1, 20.0),
        ("n2", 0, 30.0),
    ]


def test_a_stream_without_optional_columns_reads_them_as_null() -> None:
    buffer = MinuteBuffer(PROGRESS_ROLLUP)
    buffer.add(progress([{"time": at(1), "job_id": "7", "step": 3}]).frame)

    closed = buffer.close()

    assert closed is not None
    assert closed.drop("minute").to_dicts() == [
        {
            "job_id": "7",
            "framework": None,
            "first_step": 3,
            "last_step": 3,
            "step_events": 1,
            "median_step_time_s": None,
            "median_throughput": None,
            "ranks": 0,
            "nodes": 0,
            "phases": [],
        }
    ]


def test_rows_without_their_entity_are_left_out() -> None:
    buffer = MinuteBuffer(PROGRESS_ROLLUP)
    buffer.add(progress([{"time": at(1), "job_id": None, "step": 3}]).frame)
    assert buffer.rows == 0 and buffer.close() is None


def test_rows_without_time_are_refused() -> None:
    with pytest.raises(ValueError, match="no 'time' column"):
        MinuteBuffer(PROGRESS_ROLLUP).add(pl.DataFrame({"job_id": ["7"], "step": [1]}))
