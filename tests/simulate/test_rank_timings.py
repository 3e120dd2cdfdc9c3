"""Jobs that print per-rank timings, and the stragglers that show in them."""

from __future__ import annotations

import polars as pl
import pytest

from medic.ingest.base import Batch
from medic.parse.rank_timings import RankTimingParser
from medic.recording import Recording
from tests.simulate.conftest import SMALL, Simulated, frames


def rank_rows(recording: Recording, job_id: str) -> pl.DataFrame:
    """The job's per-rank timings as medic's parser reads them."""
    parsed = RankTimingParser().parse(Batch("logs", recording.logs))
    assert parsed is not None
    rows = parsed.frame.filter(pl.col("job_id") == job_id)
    return rows.with_columns(pl.col("time").dt.epoch("us"))


def shares(rows: pl.DataFrame) -> pl.DataFrame:
    """Each rank's time over the median of its peers' in the same report, timer and pipeline
    stage (as the job's printed arguments split its ranks)."""
    layout = dict(rows.filter(pl.col("kind") == "layout").select("metric", "value").iter_rows())
    stages = int(layout.get("pipeline_model_parallel_size", 1))
    per_stage = int(layout.get("world_size", rows.get_column("rank").max() + 1)) // stages
    report = ["time", "metric", "stage"]
    return (
        rows.filter(pl.col("kind") == "time")
        .with_columns((pl.col("rank") // per_stage).alias("stage"))
        .with_columns((pl.col("value") / pl.col("value").median().over(report)).alias("share"))
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_a_host_straggler_shows_only_in_its_ranks_own_times(
    simulated: Simulated, seed: int
) -> None:
    recording = simulated("host_straggler", seed, **SMALL)
    rec = frames(recording)
    (label,) = rec["labels"].to_dicts()
    slow = set(label["culprit_ranks"])
    rows = shares(rank_rows(recording, label["job_id"]))
    after = rows.filter(pl.col("time") >= label["onset"] + 60_000_000)
    culprits = after.filter(pl.col("rank").is_in(list(slow)))
    others = after.filter(~pl.col("rank").is_in(list(slow)))
    assert culprits.get_column("share").min() > 1.08
    assert others.get_column("share").max() < 1.08
    # No GPU of the job looks unlike its peers: every one waits alike.
    gpu = rec["gpu"].filter(
        (pl.col("job_id") == label["job_id"]) & (pl.col("time") >= label["onset"])
    )
    clocks = gpu.group_by("node", "gpu").agg(pl.col("sm_clock_mhz").mean(), pl.col("util").mean())
    assert clocks.get_column("sm_clock_mhz").min() >= 0.97 * clocks.get_column("sm_clock_mhz").max()


def test_the_wall_time_timer_is_the_same_on_every_rank(simulated: Simulated) -> None:
    rec = frames(simulated("host_straggler", 1, **SMALL))
    (label,) = rec["labels"].to_dicts()
    logs = rec["logs"].filter(pl.col("job_id") == label["job_id"])
    wall = logs.filter(pl.col("message").str.contains("forward-backward:")).height
    assert wall > 10
    rows = logs.get_column("message").str.extract(r"rank +\d+: ([0-9.]+)$", 1).drop_nulls()
    assert rows.len() > wall


def test_a_healthy_job_prints_its_ranks_within_their_normal_spread(simulated: Simulated) -> None:
    for framework in ("megatron", "lightning"):
        recording = simulated("healthy_rank_timings", 3, framework=framework, **SMALL)
        logs = frames(recording)["logs"]
        printed = logs.filter(pl.col("message").str.contains("performance:|across ranks"))
        rows = rank_rows(recording, printed.get_column("job_id")[0])
        assert rows.height >= 12
        if framework == "megatron":
            assert not rows.filter(pl.col("kind") == "layout").is_empty()
            assert shares(rows).get_column("share").max() < 1.08
        else:
            assert rows.filter(pl.col("kind") == "verdict").is_empty()
            assert rows.get_column("value").min() > 0.85


def test_a_throttled_gpu_in_a_job_printing_nvrx_scores_gets_the_worst_score(
    simulated: Simulated,
) -> None:
    recording = simulated("rank_timing_straggler", 4, framework="lightning", slowdown=1.4, **SMALL)
    (label,) = frames(recording)["labels"].to_dicts()
    (rank,) = label["culprit_ranks"]
    rows = rank_rows(recording, label["job_id"]).filter(
        pl.col("time") >= label["onset"] + 60_000_000
    )
    scores = rows.filter(pl.col("kind") == "score")
    worst = scores.sort("value").group_by("time", maintain_order=True).first()
    assert set(worst.get_column("rank").to_list()) == {rank}
    warned = rows.filter(pl.col("kind") == "verdict")
    assert set(warned.get_column("rank").to_list()) == {rank}
    assert set(warned.get_column("rank_node").to_list()) == set(label["culprit_nodes"])
