"""Nodes in the history: lemon scores and each node's lifecycle, for the rules, ``medic nodes``
and ``medic report``.

A node's lemon score adds up the incidents that blamed it (as a culprit of a detection) and its
failed health checks, each weighted by kind (``[rules.lifecycle.lemon.weights]``) and halved
with every ``half_life_s`` of age. A node is a lemon when its score reaches the threshold and
the incidents span at least ``min_jobs`` jobs (one bad job blaming a node many times is not a
bad node). Lemon nodes are kept out by the lifecycle and listed by the report.
"""

from __future__ import annotations

import dataclasses

import polars as pl
from rich.console import Console

from medic.actions.recovery_config import LemonConfig
from medic.history.store import HistoryStore
from medic.history.tables import frame_table
from medic.timeutil import US

LEMON_SCORES = """
WITH weights(kind, weight) AS (SELECT * FROM (VALUES {weights})),
blamed AS (
    SELECT unnest(culprits) AS node, job_id, kind, epoch_us(detected_at) AS t FROM detections
    UNION ALL
    SELECT node, NULL, 'check_failed', epoch_us(time) FROM node_events WHERE event = 'check_failed'
)
SELECT
    b.node,
    sum(w.weight * pow(0.5, (? - b.t) / ?)) AS score,
    count(*) AS incidents,
    count(DISTINCT b.job_id) AS jobs,
    max(b.t) AS last_us
FROM blamed b JOIN weights w USING (kind)
WHERE b.t <= ?
GROUP BY b.node
"""

NODE_LIFECYCLE = """
SELECT
    node,
    arg_max(event, rowid) AS last_event,
    arg_max(detail, rowid) AS last_detail,
    max(time) AS last_at,
    count(*) FILTER (WHERE event = 'check_started') AS checks,
    count(*) FILTER (WHERE event = 'check_failed') AS checks_failed,
    count(*) FILTER (WHERE event = 'resumed') AS resumed,
    count(*) FILTER (WHERE event = 'drained_by_other') AS drains_by_others
FROM node_events
GROUP BY node
"""


def lemon_scores(store: HistoryStore, config: LemonConfig, now: int) -> pl.DataFrame:
    """Per node: score, incidents, jobs, the newest incident, and whether it is a lemon."""
    weights = dataclasses.asdict(config.weights)
    values = ", ".join("(?, ?)" for _ in weights)
    params: list[object] = [v for item in weights.items() for v in item]
    params += [now, config.half_life_s * US, now]
    table = store.sql(LEMON_SCORES.format(weights=values), params)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame.with_columns(
        ((pl.col("score") >= config.threshold) & (pl.col("jobs") >= config.min_jobs)).alias("lemon")
    ).sort(["score", "node"], descending=[True, False])


class LemonScorer:
    """A node's lemon score for the lifecycle: 0 unless its incidents span ``min_jobs`` jobs."""

    def __init__(self, store: HistoryStore, config: LemonConfig) -> None:
        self.store = store
        self.config = config

    def __call__(self, node: str, now: int) -> float:
        scores = lemon_scores(self.store, self.config, now).filter(pl.col("node") == node)
        if scores.is_empty() or scores["jobs"][0] < self.config.min_jobs:
            return 0.0
        return float(scores["score"][0])


def node_table(store: HistoryStore, config: LemonConfig, now: int) -> pl.DataFrame:
    """Every node the history knows: lifecycle counts, its last event, incidents and lemon
    score, lemons and nodes with incidents first."""
    lifecycle = pl.from_arrow(store.sql(NODE_LIFECYCLE))
    assert isinstance(lifecycle, pl.DataFrame)
    lemons = lemon_scores(store, config, now).drop("last_us")
    joined = lifecycle.join(lemons, on="node", how="full", coalesce=True)
    return joined.with_columns(
        pl.col("lemon").fill_null(False),
        pl.col("score").fill_null(0.0),
        pl.col("incidents").fill_null(0),
    ).sort(["lemon", "score", "node"], descending=[True, True, False])


def with_slurm(table: pl.DataFrame, slurm: list[tuple[str, str, str]] | None) -> pl.DataFrame:
    """The node table with Slurm's current state and reason (nodes Slurm knows and the history
    does not get a row too), ordered by state, then lemons and scores first."""
    if slurm is None:
        return table.with_columns(
            pl.lit("Slurm not asked").alias("state"), pl.lit("").alias("reason")
        )
    now = pl.DataFrame(slurm, schema=["node", "state", "reason"], orient="row")
    joined = now.join(table, on="node", how="full", coalesce=True)
    return joined.with_columns(
        pl.col("state").fill_null("not in Slurm"),
        pl.col("lemon").fill_null(False),
        pl.col("score").fill_null(0.0),
        pl.col("incidents").fill_null(0),
    ).sort(["state", "lemon", "score", "node"], descending=[False, True, True, False])


NODE_COLUMNS = (
    "node",
    "state",
    "reason",
    "last_event",
    "checks",
    "checks_failed",
    "resumed",
    "drains_by_others",
    "incidents",
    "jobs",
    "score",
    "lemon",
)


def print_nodes(frame: pl.DataFrame, console: Console) -> None:
    shown = frame.select([c for c in NODE_COLUMNS if c in frame.columns])
    for state, rows in shown.group_by("state", maintain_order=True):
        console.print(frame_table(f"{state[0]} ({rows.height})", rows.drop("state")))


def history_nodes(store: HistoryStore, config: LemonConfig) -> pl.DataFrame:
    """``node_table`` scored now (the database's clock)."""
    now = int(store.sql("SELECT epoch_us(now())").column(0)[0].as_py())
    return node_table(store, config, now)


def report_lemons(store: HistoryStore, config: LemonConfig, top: int) -> pl.DataFrame:
    """The ``top`` nodes by lemon score for ``medic report``, scored at the history's newest
    detection (so that an old history reads as it did then)."""
    newest = store.sql("SELECT epoch_us(max(detected_at)) FROM detections").column(0)[0].as_py()
    if newest is None:
        return lemon_scores(store, config, 0).drop("last_us")
    scores = lemon_scores(store, config, int(newest)).filter(pl.col("score") > 0)
    return scores.drop("last_us").head(top)
