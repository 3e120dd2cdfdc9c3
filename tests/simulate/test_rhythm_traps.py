"""The rhythm traps: healthy jobs whose silences recur or run long, unlabelled."""

import polars as pl

from medic.timeutil import US
from tests.simulate.conftest import Simulated, frames

PARAMS = {"job_nodes": 2, "jobs": 0, "duration_min": 30.0}


def _spells(gpu: pl.DataFrame, apart: pl.Expr) -> pl.DataFrame:
    """Spells (start, end) of samples where one GPU of a node matches ``apart`` while the
    node's other GPUs spin in a wait (pegged); a node's GPUs are sampled together."""
    marked = gpu.with_columns(apart.alias("apart"), (pl.col("util") >= 99).alias("pegged"))
    per = marked.group_by("node", "time").agg(
        pl.col("apart").sum().alias("apart"), pl.col("pegged").sum().alias("pegged")
    )
    hits = per.filter((pl.col("apart") == 1) & (pl.col("pegged") == 7)).sort("time")
    spell = (pl.col("time").diff() > 5 * US).fill_null(True).cum_sum()
    return hits.group_by(spell.alias("spell")).agg(
        pl.col("time").min().alias("start"), pl.col("time").max().alias("end")
    )


def test_silent_pauses_recur_with_rank0_at_work_and_nothing_printed(simulated: Simulated) -> None:
    data = frames(simulated("healthy_silent_pauses", 1, **PARAMS))
    assert data["labels"].is_empty()
    gpu = data["gpu"].filter(pl.col("job_id").is_not_null())
    evaluating = pl.col("util").is_between(60, 97) & (pl.col("util") < 99)
    spells = _spells(gpu, evaluating).filter((pl.col("end") - pl.col("start")) / US >= 15)
    assert spells.height >= 2  # recurring
    app = data["logs"].filter(pl.col("source") == "app").get_column("time")
    for start, end in spells.select("start", "end").iter_rows():
        inside = app.filter((app > start + 2 * US) & (app < end)).len()
        assert inside == 0  # the pause is announced by nothing


def test_sparse_printing_prints_every_four_to_seven_minutes(simulated: Simulated) -> None:
    data = frames(simulated("healthy_sparse_printing", 1, **PARAMS))
    assert data["labels"].is_empty()
    steps = (
        data["logs"]
        .filter(pl.col("message").str.contains(r"^ \[.*iteration\s+\d+/"))
        .group_by("job_id")
        .agg((pl.col("time").unique().sort().diff() / US).median().alias("gap"))
    )
    assert steps.get_column("gap").max() >= 233 * 0.9


def test_loader_stalls_leave_one_gpu_idle_for_half_a_minute_or_more(
    simulated: Simulated,
) -> None:
    data = frames(simulated("healthy_loader_stalls", 1, **PARAMS))
    assert data["labels"].is_empty()
    gpu = data["gpu"].filter(pl.col("job_id").is_not_null())
    spells = _spells(gpu, pl.col("util") == 0)
    long = spells.filter((pl.col("end") - pl.col("start")) / US >= 25)
    assert long.height >= 2
