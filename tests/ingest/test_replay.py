from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from medic import schema
from medic.config import ConfigError, from_dict
from medic.ingest.base import Batch, Watermark
from medic.ingest.replay import ReplayConfig, ReplaySource
from medic.recording import TableFile, open_recording, read_recording, write_recording
from medic.testing.builders import T0, at, log, recording
from medic.timeutil import US


def times(batch: Batch) -> list[int]:
    return batch.data.column("time").cast(pa.int64()).to_pylist()


def replay(rec, **config):  # type: ignore[no-untyped-def]
    return list(ReplaySource(rec, ReplayConfig(**config)))


def test_streams_are_merged_in_time_order_and_every_row_arrives_once() -> None:
    rec = recording(
        duration_s=10,
        logs=[log(0.5, "a"), log(0.7, "b"), log(3.2, "c")],
        gpu=[{"time": at(t), "node": "n1", "gpu": 0} for t in (0.1, 1.1, 2.1, 3.1)],
        scheduler=[{"time": at(0.6), "kind": "job", "job_id": "100", "state": "RUNNING"}],
    )
    events = replay(rec)
    seen = [t for e in events if isinstance(e, Batch) for t in times(e)]
    assert sorted(seen) == sorted([at(t) for t in (0.5, 0.7, 3.2, 0.1, 1.1, 2.1, 3.1, 0.6)])
    watermark = T0
    for event in events:
        if isinstance(event, Watermark):
            assert event.time > watermark
            watermark = event.time
        else:
            assert min(times(event)) >= watermark, "no row may arrive behind a watermark"


def test_watermark_advances_every_second_through_silence() -> None:
    rec = recording(duration_s=30, logs=[log(1, "start"), log(29, "end")])
    marks = [e.time for e in replay(rec) if isinstance(e, Watermark)]
    assert np.all(np.diff(marks) == US)
    assert marks[0] == T0 + US and marks[-1] >= at(30)


def test_batches_are_bounded_by_rows_and_by_event_time_span() -> None:
    rows = [log(i / 1000, f"line {i}") for i in range(2500)]
    events = replay(recording(duration_s=3, logs=rows), max_rows=1000, span_s=0.5)
    batches = [e for e in events if isinstance(e, Batch)]
    assert max(b.num_rows for b in batches) <= 1000
    assert sum(b.num_rows for b in batches) == 2500
    for b in batches:
        t = times(b)
        assert max(t) - min(t) < 0.5 * US


def test_rows_outside_the_meta_span_are_still_replayed() -> None:
    rec = recording(duration_s=5, logs=[log(-3, "before"), log(8, "after")])
    messages = [
        m for e in replay(rec) if isinstance(e, Batch) for m in e.data.column("message").to_pylist()
    ]
    assert messages == ["before", "after"]


@pytest.mark.parametrize("span", [0, 1.5])
def test_span_must_keep_watermarks_within_a_second(span: float) -> None:
    with pytest.raises(ConfigError, match=r"'replay.span_s' must be in \(0, 1\]"):
        from_dict(ReplayConfig, {"span_s": span}, "replay")


def events(source: ReplaySource) -> list[tuple[str, object]]:
    return [
        ("watermark", e.time) if isinstance(e, Watermark) else (e.stream, e.data.to_pylist())
        for e in source
    ]


def test_a_recording_streamed_from_disk_replays_exactly_as_held_in_memory(tmp_path: Path) -> None:
    gpu_times = [k / 20 for k in range(-10, 120)] + [6.0, 6.0] + [k / 10 for k in range(150, 170)]
    rec = recording(
        duration_s=10,
        logs=[log(0.5, "a"), log(2.05, "b"), log(16.5, "late")],
        gpu=[
            {"time": at(t), "node": f"n{i % 3}", "gpu": i % 8}
            for i, t in enumerate(sorted(gpu_times))
        ],
        scheduler=[{"time": at(1.0), "kind": "job", "job_id": "100", "state": "RUNNING"}],
    )
    path = write_recording(tmp_path / "r", rec)
    pq.write_table(pq.read_table(path / "gpu.parquet"), path / "gpu.parquet", row_group_size=7)
    held = read_recording(path)
    streamed = replace(
        open_recording(path), gpu=TableFile(path / "gpu.parquet", schema.GPU, batch_rows=5)
    )

    config = ReplayConfig(max_rows=4)
    assert (
        ReplaySource(streamed).bounds() == ReplaySource(held).bounds() == (at(-0.5), at(16.9) + 1)
    )
    assert events(ReplaySource(streamed, config)) == events(ReplaySource(held, config))


def test_each_batch_comes_with_its_polars_frame_already_converted(tmp_path: Path) -> None:
    rec = recording(
        duration_s=5,
        logs=[log(0.5, "a"), log(2.05, "b")],
        gpu=[{"time": at(k / 4), "node": "n1", "gpu": k % 8} for k in range(20)],
    )
    path = write_recording(tmp_path / "r", rec)
    streamed = replace(
        open_recording(path), gpu=TableFile(path / "gpu.parquet", schema.GPU, batch_rows=3)
    )
    batches = [e for e in ReplaySource(streamed, ReplayConfig(max_rows=2)) if isinstance(e, Batch)]
    assert {b.stream for b in batches} == {"logs", "gpu"}
    for batch in batches:
        assert "frame" in batch.__dict__
        assert batch.frame.equals(pl.DataFrame(pl.from_arrow(batch.data)))


def delivered(events: list) -> list[tuple[int, int, str]]:  # type: ignore[type-arg]
    """(watermark before arrival, row time, node) of every log row, in arrival order."""
    out, watermark = [], T0
    for event in events:
        if isinstance(event, Watermark):
            watermark = event.time
        elif event.stream == "logs":
            nodes = event.data.column("node").to_pylist()
            out += [(watermark, t, n) for t, n in zip(times(event), nodes, strict=True)]
    return out


def test_a_delayed_stream_arrives_late_by_node_within_the_delay_and_whole() -> None:
    lines = [log(s + 0.1 * i, f"l{i}", node=f"n{i}") for s in range(20) for i in range(4)]
    rec = recording(duration_s=20, logs=lines)
    config = {"delays": [{"stream": "logs", "min_s": 2, "max_s": 10}], "seed": 7}
    events = list(ReplaySource(rec, from_dict(ReplayConfig, config, "replay")))
    rows = delivered(events)
    assert sorted(t for _, t, _ in rows) == sorted(line["time"] for line in lines)
    lateness = [(watermark - t) / US for watermark, t, _ in rows]
    assert min(lateness) >= 1 and max(lateness) <= 10, "shipped 2-10 s after, in 1 s windows"
    assert len({round(x) for x in lateness}) > 3, "jittered"
    by_node_second: dict[tuple[str, int], set[int]] = {}
    for watermark, t, node in rows:
        by_node_second.setdefault((node, (t - T0) // US), set()).add(watermark)
    assert all(len(arrivals) == 1 for arrivals in by_node_second.values()), "one shipment"
    arrival_order = [t for _, t, _ in rows]
    assert arrival_order != sorted(arrival_order), "out of order across nodes"
    again = delivered(list(ReplaySource(rec, from_dict(ReplayConfig, config, "replay"))))
    assert again == rows, "the same seed gives the same delays"


def test_delays_are_checked_and_parsed() -> None:
    from medic.ingest.replay import Delay

    assert Delay.parse("logs=0:30") == Delay("logs", 0.0, 30.0)
    assert Delay.parse("gpu=5") == Delay("gpu", 5.0, 5.0)
    with pytest.raises(ValueError, match="expected STREAM=MIN:MAX"):
        Delay.parse("logs=soon")
    with pytest.raises(ValueError, match="stream must be one of"):
        Delay.parse("tweets=1:2")
    with pytest.raises(ConfigError, match="max_s must be at least min_s"):
        from_dict(ReplayConfig, {"delays": [{"stream": "logs", "min_s": 5, "max_s": 1}]})
