"""The straggler detector's per-rank vote: each rank's printed share of a step against its peers'.

Reads the ``rank_timing`` stream (``medic.parse.rank_timings``), one figure per rank per report:

* ``time`` (a rank's own work: Megatron's ``forward-compute``, ``backward-compute``,
  ``batch-generator`` per rank, a site's own per-rank compute time): the reports of a job's
  metric are grouped per ``window_s``; each rank's share is its time over the median of its
  peers' in the same report, and its robust z-score (median / MAD of the shares, at least
  ``share_floor`` of spread) against them. A rank ``share_ratio`` times slower than the median
  *and* ``z_threshold`` above its peers' spread is flagged; a report of fewer than ``min_ranks``
  ranks flags nobody. A Megatron-LM rank is compared only with the ranks of its own pipeline
  stage: the stages do different work by design (the last one also computes the output layer
  and the loss, only the first and the last load batches), so across stages a healthy last
  stage reads as a node of stragglers. Megatron numbers ranks with the pipeline outermost
  (``order="tp-cp-ep-dp-pp"`` in ``megatron/core/parallel_state.py``): stage = rank // (world
  size / pipeline size), the pipeline size as the job's arguments print it at start-up. A job
  whose arguments were not seen (it started before medic, or its start-up lines were not
  shipped) has its ranks compared with the others of their node instead, the node as Slurm's
  placement fills them (ranks node by node; its reports wait, ``stale_s`` at most, until the
  job's GPU samples or Slurm tell its nodes): a stage spans whole nodes in the usual layout,
  tensor parallelism within a node and each stage's data-parallel replicas across nodes, so a
  node's ranks are one stage's. A job on one node is not compared before its layout is known
  (a pipeline within one node splits it).
  Wall-clock step times are never compared: in synchronous data-parallel
  training every step ends in an all-reduce that waits for the slowest rank, so the wall time
  per step is the same on every rank (Megatron-LM's ``forward-backward`` timer, which holds
  the gradient all-reduce, likewise); only a rank's own compute or data time singles it out;
* ``score`` (NVRx's relative GPU performance score, 1.0 the best rank): flagged at or below
  ``score_threshold`` (NVRx's own default, ``gpu_rel_threshold = 0.75`` in
  ``Report.identify_stragglers``, nvidia-resiliency-ext ``attribution/straggler/reporting.py``);
* ``ratio`` (Megatron's StragglerDetector: the slowest rank's time over the fastest's): flagged
  at ``share_ratio`` or more;
* ``verdict`` (NVRx's ``STRAGGLER DETECTION WARNING`` naming the rank): always flagged.

Every figure is one sample of its rank, per source, metric and kind: a rank flagged in
``peer_k`` of its last ``peer_n`` samples (the latest within ``stale_s``) is a
suspect (no single report flags anyone: healthy ranks' compute times jitter by a few percent
from one report to the next). Suspects are a minority of the job or nobody (at most
``max_culprit_fraction`` of its ranks and of its nodes, at least one). Each suspect rank is
attributed to the node its line names (NVRx prints it), else the node its own progress lines
come from, else the node Slurm's placement puts it on (ranks filled node by node in the job's
node list, as ``srun`` numbers tasks and torchrun's static ``--node_rank=$SLURM_NODEID`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from medic.detectors.online import flag_count, peer_z
from medic.frames import replaced
from medic.parse.rank_timings import MEGATRON_TIMERS
from medic.timeutil import US

if TYPE_CHECKING:
    from medic.detectors.straggler import StragglerConfig

KEYS = ["job_id", "source", "metric", "kind", "rank"]
_RANKS = pl.Schema(
    [
        ("job_id", pl.String()),
        ("source", pl.String()),
        ("metric", pl.String()),
        ("kind", pl.String()),
        ("rank", pl.Int32()),
        ("node", pl.String()),
        ("history", pl.Int64()),
        ("samples", pl.Int64()),
        ("last", pl.Int64()),
        ("share", pl.Float64()),
        ("strength", pl.Float64()),
    ]
)
"""Per job, source, metric, kind and rank: its node (as last named), the bit history of its
flags (newest in bit 0), its samples, the time of its latest one, and that sample's share of
a step against its peers and its strength (1.0 at the flagging threshold)."""
_SAMPLES = pl.Schema(
    [
        *((k, _RANKS[k]) for k in KEYS),
        ("rank_node", pl.String()),
        ("time", pl.Int64()),
        ("flagged", pl.Boolean()),
        ("share", pl.Float64()),
        ("strength", pl.Float64()),
    ]
)


@dataclass(frozen=True)
class RankSuspect:
    """A rank whose share of a step exceeded its peers' persistently."""

    job_id: str
    rank: int
    node: str | None
    source: str
    metric: str
    share: float
    """Its latest share: its time over its peers' median (or the fastest's), or 1/score."""
    strength: float
    flags: int
    samples: int


class RankShares:
    """Per-rank state of the straggler detector's rank-share vote (its own, no one else's)."""

    def __init__(self, config: StragglerConfig) -> None:
        self.config = config
        self._pending = pl.DataFrame(schema=_PENDING)
        """Per-rank times of reports not yet compared (their window has not closed)."""
        self._ranks = pl.DataFrame(schema=_RANKS)
        self.world: dict[str, int] = {}
        """job -> ranks its reports of every rank covered (the highest rank named, plus
        one)."""
        self.layout: dict[str, dict[str, int]] = {}
        """job -> the layout figures its arguments printed (pipeline size, world size)."""

    def state_size(self) -> int:
        return self._ranks.height + self._pending.height + len(self.world) + len(self.layout)

    def observe(self, frame: pl.DataFrame) -> None:
        """Fold ``rank_timing`` rows in: times wait for their report's window to close; the
        other kinds are judged alone."""
        if frame.is_empty():
            return
        rows = frame.with_columns(pl.col("time").dt.epoch("us"))
        # only reports of every rank's figure tell how many ranks a job has: a verdict or a
        # ratio names the slow ones alone
        every = rows.filter(pl.col("kind").is_in(["time", "score"]))
        for job_id, top in every.group_by("job_id").agg(pl.col("rank").max()).iter_rows():
            self.world[job_id] = max(self.world.get(job_id, 0), int(top) + 1)
        layout = rows.filter((pl.col("kind") == "layout") & (pl.col("value") >= 1))
        for job_id, metric, value in layout.select("job_id", "metric", "value").iter_rows():
            self.layout.setdefault(job_id, {})[metric] = int(value)
        times = rows.filter(pl.col("kind") == "time")
        if not times.is_empty():
            self._pending = pl.concat([self._pending, times.select(_PENDING.names())])
        alone = rows.filter(~pl.col("kind").is_in(["time", "layout"]))
        if not alone.is_empty():
            self._push(self._judged_alone(alone))

    def advance(self, watermark: int, nodes: Callable[[], Mapping[str, int]]) -> None:
        """Compare the per-rank times of the reports whose window closed by ``watermark``;
        ``nodes`` gives each job's node count (asked only when reports are compared)."""
        if self._pending.is_empty():
            return
        window = round(self.config.window_s * US)
        closed = (pl.col("time") // window + 1) * window <= watermark
        if self._pending.filter(closed).is_empty():
            return
        placed = nodes()
        # A job's first report often comes with its first step line, before its GPUs' samples
        # or Slurm's row tell its nodes: kept until they do (``stale_s`` at most), as a
        # Megatron rank's peers are the ranks of its node until the job's layout is known.
        unplaced = (
            (pl.col("source") == MEGATRON_TIMERS)
            & ~pl.col("job_id").is_in(list(placed))
            & ~pl.col("job_id").is_in(list(self.layout))
        )
        fresh = pl.col("time") >= watermark - round(self.config.stale_s * US)
        ready = self._pending.filter(closed & ~unplaced)
        self._pending = self._pending.filter(~closed | (unplaced & fresh))
        if ready.is_empty():
            return
        ready = ready.with_columns((pl.col("time") // window).alias("_report"))
        self._push(self._compared(self._staged(ready, placed)))

    def _staged(self, ready: pl.DataFrame, nodes: Mapping[str, int]) -> pl.DataFrame:
        """Each time its pipeline stage (``_stage``): Megatron's ranks by the job's layout, or
        by their node while the job has not printed it (dropped for a job on one node); a
        site's own figures all one stage."""
        rows = []
        for job_id in ready.get_column("job_id").unique():
            layout = self.layout.get(job_id, {})
            world = layout.get("world_size", self.world.get(job_id, 0))
            spread = nodes.get(job_id, 0)
            per_node = ranks_per_node(world, spread) if spread >= 2 else None
            rows.append((job_id, layout.get("pipeline_model_parallel_size"), world, per_node))
        sizes = pl.DataFrame(
            rows,
            schema={
                "job_id": pl.String,
                "_pp": pl.Int64,
                "_world": pl.Int64,
                "_per_node": pl.Int64,
            },
            orient="row",
        )
        per_stage = pl.col("_world") // pl.col("_pp")
        rank = pl.col("rank").cast(pl.Int64)
        stage = (
            pl.when(pl.col("source") != MEGATRON_TIMERS)
            .then(pl.lit(0, pl.Int64))
            .when(per_stage >= 1)
            .then(rank // per_stage)
            .when(pl.col("_pp").is_null())
            .then(rank // pl.col("_per_node"))
        )
        return (
            ready.join(sizes, on="job_id", how="left")
            .with_columns(stage.alias("_stage"))
            .filter(pl.col("_stage").is_not_null())
            .drop("_pp", "_world", "_per_node")
        )

    def _judged_alone(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Scores, ratios and verdicts: each row already compares its rank with the others."""
        c = self.config
        worst_share = 1.0 / c.score_threshold
        share = (
            pl.when(pl.col("kind") == "score")
            .then(1.0 / pl.col("value"))
            .when(pl.col("kind") == "ratio")
            .then(pl.col("value"))
            .otherwise(pl.lit(worst_share))
        )
        bar = pl.when(pl.col("kind") == "score").then(worst_share).otherwise(c.share_ratio)
        return rows.with_columns(share.alias("share")).select(
            *KEYS,
            "rank_node",
            "time",
            (pl.col("share") >= bar).fill_null(False).alias("flagged"),
            ((pl.col("share") - 1.0) / (bar - 1.0)).alias("strength"),
            "share",
        )

    def _compared(self, ready: pl.DataFrame) -> pl.DataFrame:
        """Each rank's median time per report against its peers': share and robust z."""
        c = self.config
        report = ["job_id", "source", "metric", "_report", "_stage"]
        per_rank = ready.group_by(*report, "kind", "rank").agg(
            pl.col("value").median(),
            pl.col("rank_node").drop_nulls().last(),
            pl.col("time").max(),
        )
        per_rank = per_rank.filter(pl.len().over(report) >= c.min_ranks).with_columns(
            (pl.col("value") / pl.col("value").median().over(report)).alias("share")
        )
        scored = peer_z(per_rank, report, {"share": c.share_floor})
        return scored.select(
            *KEYS,
            "rank_node",
            "time",
            ((pl.col("share") >= c.share_ratio) & (pl.col("z_share") >= c.z_threshold)).alias(
                "flagged"
            ),
            (pl.col("z_share") / c.z_threshold).alias("strength"),
            "share",
        )

    def _push(self, samples: pl.DataFrame) -> None:
        """The samples (several per rank when reports closed together) into each rank's
        history, oldest first; its node as last named."""
        samples = samples.filter(pl.col("share").is_finite()).cast(_SAMPLES)
        if samples.is_empty():
            return
        n = self.config.peer_n
        latest = (
            samples.sort("time")
            .group_by(KEYS, maintain_order=True)
            .agg(
                pl.col("flagged").tail(n).alias("_flags"),
                pl.len().alias("_count"),
                pl.col("rank_node").drop_nulls().last(),
                pl.col("time").last().alias("last"),
                pl.col("share").last(),
                pl.col("strength").last(),
            )
            .with_columns(pl.col("_flags").list.len().alias("_m"))
        )
        place = pl.int_range(pl.len(), dtype=pl.Int64)
        bits = pl.col("_flags").list.eval(
            (pl.element().cast(pl.Int64) * pl.lit(2, pl.Int64).pow(pl.len() - 1 - place)).sum()
        )
        shift = pl.lit(2, pl.Int64).pow(pl.col("_m"))
        kept = pl.lit(2, pl.Int64).pow(n - pl.col("_m"))
        old = self._ranks.select(*KEYS, "node", "history", "samples")
        updated = latest.join(old, on=KEYS, how="left").select(
            *KEYS,
            pl.coalesce("rank_node", "node").alias("node"),
            ((pl.col("history").fill_null(0) % kept) * shift + bits.list.first()).alias("history"),
            (pl.col("samples").fill_null(0) + pl.col("_count")).alias("samples"),
            "last",
            "share",
            "strength",
        )
        self._ranks = replaced(self._ranks, updated.lazy().cast(_RANKS), KEYS)

    def suspects(
        self,
        now: int,
        nodes: Mapping[str, tuple[str, ...]],
        rank_nodes: Mapping[str, Mapping[int, str]],
    ) -> dict[str, list[RankSuspect]]:
        """Per job, its ranks flagged in ``peer_k`` of their last ``peer_n`` samples, the latest
        within ``stale_s``, each by its strongest figure, when they are a
        minority of the job. ``nodes``: each job's nodes as Slurm lists them; ``rank_nodes``:
        the node each rank's own lines come from, where known."""
        c = self.config
        if self._ranks.is_empty():
            return {}
        recent = now - round(c.stale_s * US)
        flagged = self._ranks.with_columns(flag_count(pl.col("history")).alias("flags")).filter(
            (pl.col("flags") >= c.peer_k) & (pl.col("last") >= recent)
        )
        if flagged.is_empty():
            return {}
        strongest = flagged.sort("strength", descending=True).unique(
            ["job_id", "rank"], keep="first", maintain_order=True
        )
        found: dict[str, list[RankSuspect]] = {}
        for row in strongest.sort("job_id", "rank").iter_rows(named=True):
            job_id, rank = row["job_id"], row["rank"]
            node = row["node"] or rank_nodes.get(job_id, {}).get(rank)
            if node is None:
                node = placement_node(rank, nodes.get(job_id, ()), self.world.get(job_id, 0))
            found.setdefault(job_id, []).append(
                RankSuspect(
                    job_id,
                    rank,
                    node,
                    row["source"],
                    row["metric"],
                    row["share"],
                    row["strength"],
                    row["flags"],
                    row["samples"],
                )
            )
        return {j: s for j, s in found.items() if self._minority(j, s, nodes.get(j, ()))}

    def _minority(self, job_id: str, suspects: list[RankSuspect], nodes: tuple[str, ...]) -> bool:
        share = self.config.max_culprit_fraction
        ranks = max(self.world.get(job_id, 0), len(suspects))
        named = {s.node for s in suspects}
        return len(suspects) <= max(1.0, share * ranks) and len(named) <= max(
            1.0, share * len(nodes)
        )

    def forget(self, job_ids: list[str]) -> None:
        if not job_ids:
            return
        self._ranks = self._ranks.filter(~pl.col("job_id").is_in(job_ids))
        self._pending = self._pending.filter(~pl.col("job_id").is_in(job_ids))
        for job_id in job_ids:
            self.world.pop(job_id, None)
            self.layout.pop(job_id, None)


_PENDING = pl.Schema(
    [
        ("time", pl.Int64()),
        ("job_id", pl.String()),
        ("rank", pl.Int32()),
        ("rank_node", pl.String()),
        ("source", pl.String()),
        ("metric", pl.String()),
        ("kind", pl.String()),
        ("value", pl.Float64()),
    ]
)


def ranks_per_node(world: int, nodes: int) -> int | None:
    """Ranks on each node as Slurm's placement fills them (node by node, in order); None when
    the ranks are fewer than the nodes."""
    return None if nodes < 1 or world < nodes else math.ceil(world / nodes)


def placement_node(rank: int, nodes: tuple[str, ...], world: int) -> str | None:
    """The node Slurm's placement puts ``rank`` on."""
    per_node = ranks_per_node(world, len(nodes))
    if per_node is None:
        return None
    index = rank // per_node
    return nodes[index] if index < len(nodes) else None
