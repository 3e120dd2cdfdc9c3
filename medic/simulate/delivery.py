"""Log lines as a collector receives them on a real cluster (see ``medic.simulate.variation``
for the sources): each line gets its launcher's prefix and its node's clock, off by up to 2 s.

A recording's ``time`` is when the line was written, by the clock of the node that wrote it.
Delivery delays (shippers batching a node's lines, retrying, arriving out of order between
nodes) happen between the node and the collector, so a recording does not hold them: a
backtest replays them (``[[replay.delays]]``, ``medic backtest --delay logs=MIN:MAX``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from medic.simulate.cluster import GPUS_PER_NODE
from medic.timeutil import US

if TYPE_CHECKING:
    from medic.simulate.variation import Variation
    from medic.simulate.world import World


def deliver(frame: pl.DataFrame, world: World, variation: Variation) -> pl.DataFrame:
    """``frame`` (the sink's lines, ``time`` in µs) stamped by each node's skewed clock and
    prefixed by its launcher, sorted by its new time; lines pushed out of the recording's span
    by the skew are left out."""
    hosts = pl.DataFrame(
        {
            "node": list(world.cluster.names),
            "skew": np.round(variation.skew_s * US).astype(np.int64),
        }
    )
    frame = (
        frame.with_row_index("row")
        .join(hosts, on="node", how="left")
        .with_columns((pl.col("time") + pl.col("skew").fill_null(0)).alias("time"))
    )
    t0 = world.clock.t0_us
    return (
        _prefixed(frame, world, variation)
        .filter((pl.col("time") >= t0) & (pl.col("time") < t0 + world.seconds * US))
        .sort(["time", "row"])
        .drop("row", "skew")
    )


def _prefixed(frame: pl.DataFrame, world: World, variation: Variation) -> pl.DataFrame:
    """The job's launcher prefixes every line of its step's output: ``srun --label`` the task
    (one torchrun per node, so the node's index in the job), torchrun ``--tee`` the worker's
    role and local rank (``[default3]:``), ``kubectl logs --timestamps`` an RFC 3339 time,
    pdsh the host."""
    tasks = pl.DataFrame(
        [
            (job.job_id, world.host(node), i, variation.launchers.get(job.job_id, "plain"))
            for job in world.jobs
            for run in job.runs
            for i, node in enumerate(run.nodes)
        ],
        schema={"job_id": pl.String, "node": pl.String, "task": pl.Int64, "launcher": pl.String},
        orient="row",
    ).unique(["job_id", "node"], keep="first", maintain_order=True)
    launcher = pl.col("launcher")
    app = (pl.col("source") == "app") & launcher.is_not_null()
    stamp = pl.col("time").cast(pl.Datetime("us", "UTC")).dt.strftime("%Y-%m-%dT%H:%M:%S%.9fZ")
    parts = [
        pl.when(launcher.is_in(["srun_label", "srun_tee"])).then(
            pl.col("task").cast(pl.String) + pl.lit(": ")
        ),
        pl.when(launcher == "pdsh").then(pl.col("node") + pl.lit(": ")),
        pl.when(launcher == "kubectl_timestamps").then(stamp + pl.lit(" ")),
        pl.when(launcher.is_in(["torchrun_tee", "srun_tee"]) & pl.col("origin").is_not_null()).then(
            pl.lit("[default") + (pl.col("origin") % GPUS_PER_NODE).cast(pl.String) + pl.lit("]:")
        ),
    ]
    prefix = pl.concat_str([p.otherwise(pl.lit("")) for p in parts])
    return (
        frame.join(tasks, on=["job_id", "node"], how="left")
        .with_columns(
            pl.when(app)
            .then(prefix + pl.col("message"))
            .otherwise(pl.col("message"))
            .alias("message")
        )
        .drop("task", "launcher")
    )
