"""The ``gpu_latest`` stream: each GPU's newest state in a telemetry batch."""

from __future__ import annotations

import polars as pl

from medic.ingest.base import Batch
from medic.parse.gpu_latest import GPU_LATEST, GpuLatestParser
from medic.testing.builders import at, batch, gpu_latest, gpu_sample


def test_gpu_latest_keeps_each_gpus_newest_state_and_first_xid() -> None:
    frame = gpu_latest(
        [
            gpu_sample(0, "n1", 0, job_id="7", ecc_dbe=0),
            gpu_sample(0.5, "n1", 0, job_id="7", ecc_dbe=1, xid=48),
            gpu_sample(0.9, "n1", 0, job_id=None, ecc_dbe=None, xid=79),
            gpu_sample(0.2, "n1", 1, job_id="7"),
        ]
    ).sort("gpu")
    assert frame.select("gpu", "job_id", "xid", "ecc_dbe").rows() == [
        (0, None, 48, 1),
        (1, "7", None, None),
    ]
    assert frame["time"].cast(pl.Int64).to_list() == [at(0.9), at(0.2)]
    assert frame["xid_time"].cast(pl.Int64).to_list()[0] == at(0.5)


def test_gpu_latest_accepts_telemetry_without_optional_columns() -> None:
    bare = pl.DataFrame(
        {"time": pl.Series([at(0)]).cast(pl.Datetime("us", "UTC")), "node": ["n1"], "gpu": [3]}
    ).with_columns(pl.col("gpu").cast(pl.Int16))
    parsed = GpuLatestParser().parse(Batch("gpu", bare.to_arrow()))
    assert parsed is not None and parsed.data.schema == GPU_LATEST


def test_gpu_latest_of_a_batch_keyed_like_the_last_one_still_groups_repeated_gpus() -> None:
    parser = GpuLatestParser()
    once = [gpu_sample(1, "a", 0, util=10.0), gpu_sample(1, "a", 1, util=20.0)]
    for rows in (once, once):
        parsed = parser.parse(batch("gpu", rows))
        assert parsed is not None and parsed.frame.height == 2
    twice = parser.parse(batch("gpu", [*once, gpu_sample(1.5, "a", 0, util=30.0)]))
    assert twice is not None
    assert sorted(twice.frame.select("gpu", "util").rows()) == [(0, 20.0), (1, 20.0)]
    assert twice.frame.schema == parsed.frame.schema


def test_gpu_latest_is_the_same_whether_a_batch_is_grouped_or_taken_as_it_is() -> None:
    rows = [
        gpu_sample(1, "b", 1, job_id="7", util=50.0, power_w=300.5, ecc_dbe=2, xid=79),
        gpu_sample(1, "a", 0, job_id=None, util=1.5, power_w=90.25),
        gpu_sample(1, "a", 1, job_id="7", util=99.0, power_w=None, nvlink_errors=3),
    ]
    seasoned = GpuLatestParser()
    seasoned.parse(batch("gpu", [*rows, gpu_sample(1, "c", 0)]))  # more GPUs than the batch below
    taken = seasoned.parse(batch("gpu", rows))
    grouped = GpuLatestParser().parse(batch("gpu", rows))  # first batch: grouped unchecked
    assert taken is not None and grouped is not None
    assert taken.frame.equals(grouped.frame) and taken.data.equals(grouped.data)
    assert taken.frame.get_column("node").to_list() == ["b", "a", "a"]


def test_a_repeated_gpu_is_found_in_a_batch_no_bigger_than_the_cluster() -> None:
    parser = GpuLatestParser()
    parser.parse(batch("gpu", [gpu_sample(0, n, g) for n in ("a", "b") for g in range(4)]))
    repeated = [
        gpu_sample(1, "b", 3, util=10.0),
        gpu_sample(1, "a", 0),
        gpu_sample(1.5, "b", 3, util=30.0),
    ]
    parsed = parser.parse(batch("gpu", repeated))
    assert parsed is not None
    assert sorted(parsed.frame.select("node", "gpu", "util").rows()) == [
        ("a", 0, None),
        ("b", 3, 20.0),
    ]
    assert parsed.data.schema == GPU_LATEST  # no Xid in the batch: its columns come as nulls
    assert parsed.frame.get_column("xid_time").null_count() == 2
    negative = parser.parse(batch("gpu", [gpu_sample(2, "a", -1), gpu_sample(2, "a", -1)]))
    assert negative is not None and negative.frame.height == 1


def test_batches_read_in_one_call_each_get_what_they_give_alone() -> None:
    """``parse_apart`` (a replay's read-ahead): each batch's GPUs reduced within that batch,
    whether the run has a GPU sampled twice in one batch or not."""
    seconds = [
        [
            gpu_sample(0, "n1", 0, job_id="7", ecc_dbe=0),
            gpu_sample(0, "n1", 1, job_id="7", ecc_dbe=0),
        ],
        [gpu_sample(1, "n1", 0, job_id="7", ecc_dbe=2, xid=48), gpu_sample(1, "n1", 1, job_id="7")],
        [
            gpu_sample(2, "n1", 0, job_id="7", ecc_dbe=3),
            gpu_sample(2.5, "n1", 0, job_id=None, ecc_dbe=None, xid=79),
            gpu_sample(2, "n2", 3, power_w=80.0),
        ],
    ]
    for runs in (seconds[:2], seconds):
        batches = [batch("gpu", rows) for rows in runs]
        apart = GpuLatestParser().parse_apart(batches)
        for one, rows in zip(apart, runs, strict=True):
            assert one is not None and one.data.schema == GPU_LATEST
            assert one.frame.equals(gpu_latest(rows))
