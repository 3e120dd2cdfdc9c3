"""Log lines as a collector receives them on a real cluster (see ``medic.simulate.variation``
for the sources): each line gets its launcher's prefix, each node's clock is off by up to
2 s, and a log shipper may send a node's lines in batches, stamped when they arrive.

A recording's ``time`` is when the line was written as far as the collector can tell: the
node's (skewed) clock, or, when the shipper sends lines without their own time, the moment the
batch arrived. Label onsets stay at the event's own time, so delivery counts against latency.
Lines a dead node had not shipped yet are lost with it.
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

JITTER_S = 0.3
"""Mean of the exponential jitter of each batch's arrival (network, the receiver's queue)."""


def deliver(frame: pl.DataFrame, world: World, variation: Variation) -> pl.DataFrame:
    """``frame`` (the sink's lines, ``time`` in µs) as delivered, sorted by its new time."""
    frame = frame.with_row_index("row").with_columns(pl.col("time").alias("written"))
    hosts = pl.DataFrame(
        {
            "node": list(world.cluster.names),
            "node_index": np.arange(world.cluster.size, dtype=np.int64),
            "skew": np.round(variation.skew_s * US).astype(np.int64),
        }
    )
    frame = frame.join(hosts, on="node", how="left").with_columns(
        pl.col("node_index").fill_null(world.cluster.size),
        (pl.col("time") + pl.col("skew").fill_null(0)).alias("time"),
    )
    frame = _prefixed(frame, world, variation)
    if variation.flush_s is not None:
        frame = _batched(frame, world, variation)
    t0 = world.clock.t0_us
    keep = (pl.col("time") >= t0) & (pl.col("time") < t0 + world.seconds * US)
    for node, t in world.silent.items():
        keep &= ~((pl.col("node") == world.host(node)) & (pl.col("time") >= world.clock.at(t)))
    return (
        frame.filter(keep)
        .sort(["time", "written", "row"])
        .drop("row", "written", "node_index", "skew")
    )


def _batched(frame: pl.DataFrame, world: World, variation: Variation) -> pl.DataFrame:
    """Each node's shipper sends what it has read every ``flush_s`` (its own phase), the batch
    arriving after the node's delay plus a jitter of its own."""
    assert variation.flush_s is not None
    flush = round(variation.flush_s * US)
    nodes = world.cluster.size + 1
    phase = variation.rng.integers(0, flush, nodes)
    delay = np.append(np.round(variation.delay_s * US), 0).astype(np.int64)
    index = frame["node_index"].to_numpy()
    offset = frame["time"].to_numpy() - phase[index]
    batch = -(-offset // flush)
    keys, inverse = np.unique(index * (1 << 40) + batch, return_inverse=True)
    jitter = np.round(variation.rng.exponential(JITTER_S * US, keys.size)).astype(np.int64)
    arrived = batch * flush + phase[index] + delay[index] + jitter[inverse]
    return frame.with_columns(pl.Series("time", arrived, pl.Int64))


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
