"""``straggler``: a job runs markedly slower because of one or a few of its GPUs or nodes.

Two signals must agree:

1. **The job slowed against its own baseline** (``medic.detectors.pace``): once per window the
   job's current pace (seconds per step) is compared with a river rolling median of its
   healthy paces; ``slow_k`` of the last ``slow_n`` votes at ``slowdown_ratio`` or more make
   the job slowed.
2. **Some GPU looks unlike its peers.** Every ``window_s`` the job's GPUs are compared with each
   other, vectorised over all jobs at once: robust z-scores (median / MAD) of SM clock (low),
   power (either way), temperature (high), share of time with slowdown throttle reasons set,
   PCIe replay and NVLink error rises. Each GPU's usual offset from its peers (a hot slot, a
   chronically different clock) is learned while the job is healthy and subtracted, so only a
   *change* counts. A node whose worst GPU deviates by ``z_threshold`` or more in ``peer_k`` of
   the last ``peer_n`` windows is a suspect.

The detector fires once both hold and the suspects are a minority of the job; the culprits are
the suspect nodes. A job that is uniformly slow everywhere has no suspect and is not a
straggler; a job that prints no parsable progress is not judged. After firing, the job is not
judged again until it is neither slowed nor suspect (no flapping).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

import polars as pl

from medic.config import Count, Fraction, NonNegative, Percent, Positive, PositiveCount, Range
from medic.detectors.base import Detection, register
from medic.detectors.online import flag_count, peer_z, push_flags
from medic.detectors.pace import PaceModel
from medic.detectors.progress_state import WatchedJobs, WatchesJobs
from medic.detectors.telemetry import DEFAULT_THROTTLE_MASK, GpuWindows, Window
from medic.ingest.base import Batch

FEATURES = (
    "sm_clock_mhz",
    "power_w",
    "temp_c",
    "throttled",
    "pcie_replay_delta",
    "nvlink_errors_delta",
)
FEATURE_NAMES = {
    "sm_clock_mhz": "SM clock low",
    "power_w": "power off",
    "temp_c": "temperature high",
    "throttled": "clocks throttled",
    "pcie_replay_delta": "PCIe replays",
    "nvlink_errors_delta": "NVLink errors",
}
_NODES = {"job_id": pl.String, "node": pl.String, "history": pl.Int64}


@dataclass(frozen=True)
class StragglerConfig:
    """Parameters of the straggler detector; every one can be swept by backtests."""

    slowdown_ratio: Annotated[float, Range(gt=1)] = 1.07
    """A current pace this many times the job's baseline is a slow vote."""
    pace_window: PositiveCount = 256
    """Healthy paces the per-job baseline keeps."""
    grace_steps: PositiveCount = 20
    """Training steps the learned paces must cover before the baseline votes."""
    pace_span_s: Positive = 120.0
    """The current pace is the median of the paces seen this long before a vote."""
    slow_k: PositiveCount = 2
    slow_n: PositiveCount = 3
    """Slow votes (one per window) out of the last ones that make the job slowed."""
    stale_s: Positive = 420.0
    """No vote without a pace this recent, or within three of the job's usual print intervals
    if longer (a silent job is the hang detector's business)."""
    window_s: Positive = 30.0
    """Peer-comparison window."""
    sample_s: Positive = 10.0
    """Telemetry used per window (its first seconds): the comparison needs means, not every
    sample, and reading a third of them keeps the detector cheap at scale."""
    z_threshold: Positive = 4.0
    """Robust z-score of a GPU against its peers (per feature) that makes a deviation."""
    busy_util: Percent = 50.0
    """A job whose median GPU utilisation is below this in a window is not compared then."""
    peer_k: PositiveCount = 3
    peer_n: Annotated[int, Range(ge=1, le=62)] = 4
    """Deviating windows out of the last ones that make a node a straggler."""
    min_gpus: Annotated[int, Range(ge=2)] = 4
    """Fewer GPUs in a window make no peer group."""
    max_culprit_fraction: Fraction = 0.25
    """Suspects covering more of the job's nodes (or GPUs) than this blame nobody."""
    grace_windows: Count = 10
    """Windows a GPU is watched before it can be flagged; its offset from its peers over them
    is what it always looked like (a hot slot, a slower part), not a change."""
    offset_weight: Fraction = 0.1
    """Weight of one healthy window in a GPU's learned offset after the grace windows."""
    clock_floor_mhz: NonNegative = 30.0
    power_floor_w: NonNegative = 15.0
    temp_floor_c: NonNegative = 3.0
    throttle_floor: NonNegative = 0.1
    counter_floor: NonNegative = 2.0
    """Least spread assumed among peers, per feature, so identical peers do not make tiny
    differences look huge."""
    throttle_mask: Count = DEFAULT_THROTTLE_MASK
    """NVML clocks-event reason bits that count as throttling (SW power cap, HW slowdown, SW
    thermal, HW thermal, HW power brake by default)."""
    forget_after_s: Positive = 7200.0
    """Drop a job not heard of for this long (no scheduler end seen)."""

    def __post_init__(self) -> None:
        if not 1 <= self.slow_k <= self.slow_n or not 1 <= self.peer_k <= self.peer_n:
            raise ValueError("persistence needs 1 <= k <= n")
        if self.sample_s > self.window_s:
            raise ValueError("sample_s must not exceed window_s")

    def floors(self) -> dict[str, float]:
        return {
            "sm_clock_mhz": self.clock_floor_mhz,
            "power_w": self.power_floor_w,
            "temp_c": self.temp_floor_c,
            "throttled": self.throttle_floor,
            "pcie_replay_delta": self.counter_floor,
            "nvlink_errors_delta": self.counter_floor,
        }


@dataclass(frozen=True)
class Suspect:
    """A node whose GPU has looked unlike its peers persistently."""

    node: str
    gpu: int
    z: float
    feature: str
    job_gpus: int
    job_nodes: int
    flagged_gpus: int


@register
class StragglerDetector(WatchesJobs):
    """Fires when a job slowed against itself *and* a minority of its GPUs stands out."""

    name: ClassVar[str] = "straggler"
    streams: ClassVar[frozenset[str]] = frozenset({"progress", "gpu", "scheduler"})
    Config: ClassVar[type] = StragglerConfig

    def __init__(self, config: StragglerConfig | None = None) -> None:
        self.config = config or StragglerConfig()
        self.jobs = WatchedJobs(self.config.forget_after_s)
        self.telemetry = GpuWindows(
            self.config.window_s,
            means=("util", "sm_clock_mhz", "power_w", "temp_c"),
            counters=("pcie_replay", "nvlink_errors"),
            throttle_mask=self.config.throttle_mask,
            sample_s=self.config.sample_s,
        )
        self.paces: dict[str, PaceModel] = {}
        self.alarmed: set[str] = set()
        self.suspects: dict[str, list[Suspect]] = {}
        self._offsets = pl.DataFrame(
            schema={"job_id": pl.String, "node": pl.String, "gpu": pl.Int16, "seen": pl.Int64}
            | {f"offset_{f}": pl.Float64 for f in FEATURES}
        )
        self._nodes = pl.DataFrame(schema=_NODES)

    def state_size(self) -> int:
        return len(self.jobs) + len(self.paces) + self._offsets.height + self.telemetry.state_size()

    def update(self, batch: Batch) -> list[Detection]:
        if batch.stream == "scheduler":
            self._forget(self.jobs.observe_scheduler(batch))
        elif batch.stream == "progress":
            for step in self.jobs.observe_progress(batch.frame):
                pace = self.paces.get(step.job_id)
                if pace is None:
                    pace = self.paces[step.job_id] = PaceModel(self.config)
                pace.observe(step, suspect=step.job_id in self.suspects)
        elif batch.stream == "gpu":
            self.telemetry.add(batch.frame, self.jobs.placement, self.paces.keys())
        return []

    def advance(self, watermark: int) -> list[Detection]:
        found = []
        for window in self.telemetry.close(watermark):
            self._compare_peers(window)
            found.extend(self._judge(window.end))
        self._forget(self.jobs.release(watermark))
        self._forget([job_id for job_id in self.paces if self.jobs.done(job_id)])
        return found

    def _judge(self, now: int) -> list[Detection]:
        """Once per window: every job's pace votes; a slowed job with suspects is a straggler.
        An alarmed job is judged afresh only once it is neither slowed nor suspect."""
        found = []
        for job_id, pace in self.paces.items():
            pace.vote(now)
            suspects = self.suspects.get(job_id)
            if job_id in self.alarmed:
                if not pace.slowed and not suspects:
                    self.alarmed.discard(job_id)
                continue
            if pace.slowed and suspects:
                found.append(self._detection(job_id, pace, suspects))
                self.alarmed.add(job_id)
        return found

    def _detection(self, job_id: str, pace: PaceModel, suspects: list[Suspect]) -> Detection:
        culprits = sorted({s.node for s in suspects})
        top = max(suspects, key=lambda s: s.z)
        progress = self.jobs.progress.jobs.get(job_id)
        ranks = sorted(
            rank
            for rank, (_, node) in (progress.rank_steps.items() if progress else ())
            if node in culprits
        )
        ratio = pace.ratio or 0.0
        summary = (
            f"job {job_id} runs {ratio:.2f}x slower than its own baseline "
            f"({pace.source} pace); {', '.join(culprits)} stand out from the job's "
            f"{top.job_gpus} GPUs: {top.node} GPU {top.gpu} {FEATURE_NAMES[top.feature]} "
            f"(robust z {top.z:.1f})"
        )
        return Detection(
            job_id=job_id,
            kind="straggler",
            culprits=tuple(culprits),
            ranks=tuple(ranks),
            score=float(top.z),
            detector=self.name,
            summary=summary,
            evidence={"slowdown": ratio, "z": top.z, "feature": top.feature},
        )

    def _compare_peers(self, window: Window) -> None:
        """Score every GPU of every job against its peers; update suspects and offsets. Only
        jobs training in the window take part: none in a checkpoint or evaluation, and most
        of their GPUs busy (a pause printing nothing makes every GPU odd in its own way)."""
        c = self.config
        pausing = [j for j, p in self.jobs.progress.jobs.items() if p.phase is not None]
        gpus = window.gpus.filter(
            (pl.len().over("job_id") >= c.min_gpus)
            & (pl.col("util").median().over("job_id") >= c.busy_util)
            & ~pl.col("job_id").is_in(pausing)
        )
        if gpus.is_empty():
            self.suspects = {}
            return
        scored = peer_z(gpus.with_columns(pl.col(FEATURES).cast(pl.Float64)), "job_id", c.floors())
        scored = scored.join(self._offsets, on=["job_id", "node", "gpu"], how="left")
        shift = {f: pl.col(f"z_{f}") - pl.col(f"offset_{f}").fill_null(0.0) for f in FEATURES}
        deviation = [
            -shift["sm_clock_mhz"],
            shift["power_w"].abs(),
            *(shift[f] for f in FEATURES[2:]),
        ]
        scored = scored.with_columns(
            [d.alias(f"d_{f}") for d, f in zip(deviation, FEATURES, strict=True)]
        ).with_columns(pl.max_horizontal(f"d_{f}" for f in FEATURES).alias("z"))
        scored = scored.with_columns(
            pl.coalesce(
                pl.when(pl.col(f"d_{f}") == pl.col("z")).then(pl.lit(i))
                for i, f in enumerate(FEATURES)
            ).alias("feature"),
            (
                (pl.col("z") >= c.z_threshold) & (pl.col("seen").fill_null(0) >= c.grace_windows)
            ).alias("flagged"),
        )
        self._track_nodes(scored)
        self._learn_offsets(scored)

    def _track_nodes(self, scored: pl.DataFrame) -> None:
        """Push each node's flag (its worst GPU's) into its k-of-n history; persistent, still
        flagged nodes that are a minority of their job become its suspects."""
        c = self.config
        keys = ["job_id", "node"]
        worst = scored.group_by(keys).agg(
            pl.col("z", "gpu", "feature", "flagged").sort_by("z").last()
        )
        nodes = worst.join(self._nodes, on=keys, how="left").with_columns(
            push_flags(pl.col("history"), pl.col("flagged"), c.peer_n).alias("history")
        )
        self._nodes = pl.concat(
            [self._nodes.join(nodes, on=keys, how="anti"), nodes.select(list(_NODES))]
        )
        persistent = nodes.filter((flag_count(pl.col("history")) >= c.peer_k) & pl.col("flagged"))
        if persistent.is_empty():
            self.suspects = {}
            return
        sizes = (
            scored.filter(
                pl.col("job_id").is_in(persistent.get_column("job_id").unique().to_list())
            )
            .group_by("job_id")
            .agg(
                pl.col("node").n_unique().alias("job_nodes"),
                pl.len().alias("job_gpus"),
                pl.col("flagged").sum().alias("flagged_gpus"),
            )
        )
        suspects: dict[str, list[Suspect]] = {}
        for row in persistent.join(sizes, on="job_id").sort(keys).iter_rows(named=True):
            suspects.setdefault(row["job_id"], []).append(
                Suspect(
                    node=row["node"],
                    gpu=row["gpu"],
                    z=row["z"],
                    feature=FEATURES[row["feature"]],
                    job_gpus=row["job_gpus"],
                    job_nodes=row["job_nodes"],
                    flagged_gpus=row["flagged_gpus"],
                )
            )
        self.suspects = {
            job_id: found for job_id, found in suspects.items() if self._minority(found)
        }

    def _minority(self, suspects: list[Suspect]) -> bool:
        share = self.config.max_culprit_fraction
        first = suspects[0]
        return len(suspects) <= max(1.0, share * first.job_nodes) and (
            first.flagged_gpus <= max(1.0, share * first.job_gpus)
        )

    def _learn_offsets(self, scored: pl.DataFrame) -> None:
        """Move each GPU's offset toward its current z (clipped at ``z_threshold``, so one odd
        window cannot make a large offset): the mean over its grace windows, then an
        exponential average of healthy windows only: never while the job is slowed or its
        node was flagged in any of the last ``peer_n`` windows, so a straggler (even one that
        hovers around the threshold) never becomes its own baseline."""
        c = self.config
        slowed = [job_id for job_id, pace in self.paces.items() if pace.votes.active]
        seen = pl.col("seen").fill_null(0)
        history = self._nodes.select("job_id", "node", "history")
        learning = scored.join(history, on=["job_id", "node"], how="left").filter(
            (seen < c.grace_windows)
            | (~pl.col("job_id").is_in(slowed) & (pl.col("history").fill_null(0) == 0))
        )
        weight = pl.max_horizontal(pl.lit(c.offset_weight), 1.0 / (seen + 1))
        limit = c.z_threshold
        learned = learning.select(
            "job_id",
            "node",
            "gpu",
            (seen + 1).alias("seen"),
            *(
                (
                    pl.col(f"offset_{f}").fill_null(0.0)
                    + weight
                    * (pl.col(f"z_{f}").clip(-limit, limit) - pl.col(f"offset_{f}").fill_null(0.0))
                ).alias(f"offset_{f}")
                for f in FEATURES
            ),
        )
        keys = ["job_id", "node", "gpu"]
        self._offsets = pl.concat([self._offsets.join(learned, on=keys, how="anti"), learned])

    def _forget(self, job_ids: list[str]) -> None:
        if not job_ids:
            return
        for job_id in job_ids:
            self.paces.pop(job_id, None)
            self.suspects.pop(job_id, None)
            self.alarmed.discard(job_id)
        self.telemetry.forget(job_ids)
        self._offsets = self._offsets.filter(~pl.col("job_id").is_in(job_ids))
        self._nodes = self._nodes.filter(~pl.col("job_id").is_in(job_ids))
