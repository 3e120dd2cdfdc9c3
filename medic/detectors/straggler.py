"""``straggler``: a job runs markedly slower because of one or a few of its GPUs or nodes.

Evidence, score and policy apart: each kind of evidence is one function that yields suspects
per job (``StragglerDetector.evidence``: GPUs and ports unlike their peers, flapping links,
ranks' printed shares); ``medic.detectors.straggler_policy`` decides from the suspects and the
job's pace whether it is a straggler (``confirmed``, or ``suspect`` where only stall reports
name it, below; slowness alone never fires), and ``medic.detectors.straggler_score`` says how
sure that is.

Two signals must agree:

1. **The job slowed against its own baseline** (``medic.detectors.pace``): once per window the
   job's current pace (seconds per step) is compared with a river rolling median of its
   healthy paces; ``slow_k`` of the last ``slow_n`` votes at ``slowdown_ratio`` or more make
   the job slowed.
2. **Some GPU looks unlike its peers.** Every ``window_s`` the job's GPUs are compared with each
   other, vectorised over all jobs at once: robust z-scores (median / MAD) of what slows a GPU
   by itself (``SLOWING``): SM clock (low, on average and still over the window's last
   third: a GPU back at its peers' clock as the window ends, a thermal blip that is over,
   does not count for it), PCIe replay and NVLink error rises. Each GPU's
   usual offset from its peers (a chronically different clock) is learned while the job is
   healthy and subtracted, so only a *change* counts. A GPU that deviates by ``z_threshold``
   or more in ``peer_k`` of its last ``peer_n`` windows makes its node a suspect; the same
   GPU must deviate each time (GPUs at their power limit each dip now and then, so a node's
   worst GPU of the moment is a different one each window). The windows judged must also hold
   ``min_samples`` samples of the GPU: with sparse telemetry the span grows to more windows,
   of which the same share must deviate. Power and clocks-event reasons alone never flag a
   GPU (they explain a low clock below).

The detector fires once both hold and the suspects are a minority of the job; the culprits are
the suspect nodes. A job that is uniformly slow everywhere has no suspect and is not a
straggler; a job that prints no parsable progress is not judged. After firing, the job is not
judged again until it is neither slowed nor suspect (no flapping).

A straggler present from the job's first step never shows as a slowdown against the job's own
baseline (it is in the baseline), and its offset from its peers would be learned as the way that
GPU always looked. So the raw peer comparison also looks for a *cause* of slowness: a busy GPU
whose SM clock sits ``z_threshold`` below its peers' and at most ``cause_clock_ratio`` of their
median while it has slowdown clocks-event reasons set (power cap, thermal, HW slowdown) that its
peers have not, or draws markedly less power (capped); or whose PCIe replay or NVLink error
counters rise ``z_threshold`` above its peers' (link retries cost bandwidth at any clock: DCGM's
PCIe health watch counts a rising replay rate as a fault). A GPU caused-flagged as persistently
(the same rule), first within the ``grace_windows`` of its GPUs being watched (before the
job's baseline could be trusted), and as persistently over ``ALONE_SPANS`` times the windows
judged (a thermal blip soon after a start or a requeue ends sooner), is a straggler without the
pace vote; one that turns up later still needs the job to slow.

A node whose network degrades is named from its logs or its port counters: ``flap_count``
InfiniBand/RoCE link drops (the kernel's mlx5 ``Link down``, NCCL's ``port error`` async
event, or rises of the node's ``ib_link_downed`` counter: the port failed to recover and went
down) within ``flap_window_s`` make it a straggler on their own; one drop is not flapping. The
two sources see the same drops, so a node's drops are the larger of the two counts, not their
sum; a drop another node had at the same time is their switch's
(``medic.detectors.link_drops``). NCCL routes around a flapping port or retries, so the job
runs slower with no GPU standing out. A degraded link that has not gone down yet shows in its
error counters (``ib_errors``: symbol errors, link recoveries, bad packets): a node whose
errors rise against its job's other nodes persistently (``medic.detectors.port_errors``) is a
suspect with a cause of slowness, like a GPU whose PCIe or NVLink retries rise, named even when
no log line says anything.

Where ranks print their own share of a step (NVRx's relative GPU scores and warnings,
Megatron's per-rank timers, a site's own lines: ``medic.parse.rank_timings``), a rank whose
share exceeds its peers' persistently is a straggler on its own, attributed to its node
(``medic.detectors.rank_share``): the one sign of a slowdown on the host side (CPU contention,
a slow data loader) that GPU telemetry does not show. A rank a framework's stall reports named
late in stalls the job got over (``medic.detectors.stall_reports``) is a straggler too, of tier
``suspect`` unless the job also slowed against its own baseline: a rank late by the job's
design (rank 0 evaluating while the others wait) reads the same.

Scores (``score_of``) are in [0, 1]: the doubt ``2^(-strength)`` (strength: the robust z over
``z_threshold``, or the link drops over ``flap_count``), cut by 60% for each corroboration (the
job slowed against its own baseline; a cause of slowness on the GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, ClassVar

import polars as pl

from medic.config import Count, Fraction, NonNegative, Percent, Positive, PositiveCount, Range
from medic.detectors.base import CONFIRMED, SUSPECT, Detection
from medic.detectors.link_drops import LinkDrops
from medic.detectors.log_windows import LogWindows
from medic.detectors.online import flag_count, peer_z_columns, push_flags
from medic.detectors.pace import PaceModel
from medic.detectors.port_errors import EARLY_ERRORS_PER_S, PortErrorPeers
from medic.detectors.port_errors import FEATURE as IB_ERRORS
from medic.detectors.port_errors import KEYS as PORT_KEYS
from medic.detectors.progress_state import WatchedJobs, WatchesJobs
from medic.detectors.rank_share import RankShares
from medic.detectors.stall_reports import STALLED, StallReports
from medic.detectors.straggler_policy import Suspect, firing
from medic.detectors.straggler_score import score_of, strength_of
from medic.detectors.telemetry import DEFAULT_THROTTLE_MASK, GpuWindows, Window
from medic.frames import collect, holds, replaced
from medic.ingest.base import Batch
from medic.timeutil import US

LATE_CLOCK = "late_sm_clock_mhz"
"""A GPU's SM clock over the end of a window (``GpuWindows``' ``late``): a clock low on
average but back to its peers' by the window's end (a thermal blip that ended within it) does
not count for that window; a straggler, steady or at its power limit many times a second, is
low at any part of it."""
FEATURES = (
    "sm_clock_mhz",
    LATE_CLOCK,
    "power_w",
    "throttled",
    "pcie_replay_delta",
    "nvlink_errors_delta",
)
SLOWING = ("sm_clock_mhz", "pcie_replay_delta", "nvlink_errors_delta")
"""Features that make a GPU do less work per second by themselves: a lower SM clock, link
retries. Power, temperature and clocks-event reasons alone do not: at full load GPUs sit at
their power limit with NVML's SW power cap reason set as a matter of course, and a GPU that
draws more or less or runs warmer at the same clock keeps pace (they explain a low clock, in
the cause path, rather than flag a GPU on their own)."""
FEATURE_NAMES = {
    "sm_clock_mhz": "SM clock low",
    "power_w": "power off",
    "throttled": "clocks throttled",
    "pcie_replay_delta": "PCIe replays",
    "nvlink_errors_delta": "NVLink errors",
}
_GPUS = pl.Schema(
    [
        ("job_id", pl.String()),
        ("node", pl.String()),
        ("gpu", pl.Int16()),
        ("history", pl.Int64()),
        ("cause_history", pl.Int64()),
        ("cause_seen", pl.Int64()),
        ("counts", pl.List(pl.Int64())),
        ("clock_ratios", pl.List(pl.Float64())),
        ("seen", pl.Int64()),
        *((f"offset_{f}", pl.Float64()) for f in SLOWING),
    ]
)
"""Per job and GPU, over its latest windows (newest last): the bit histories of its flags and
causes (newest in bit 0), how many windows it had been watched when its current run of causes
began, its samples and its clock ratio (the job's median SM clock over its own) per window;
the windows its offsets were learned from and its offset from its peers per slowing feature
(null before its first learned window). One frame, so that a window's GPUs are scored,
tracked and learned in one query."""
KEYS = ["job_id", "node", "gpu"]
LINK_DOWN = ("mlx5_link_down", "ib_port_error")
"""The catalogue's signatures of an InfiniBand/RoCE port going down (a flap when it comes back):
the kernel's mlx5 line, and NCCL's async event on the host whose port it is."""
CAUSE = "cause"
NETWORK = "network"
ALONE_SPANS = 2
"""A GPU's cause of slowness that fires without the pace vote (``early``) must hold as
persistently over this many times the windows judged (``peer_k`` of each ``peer_n``): a cause
there from the job's first step holds for good, a thermal blip a minute or two long after a
start or a requeue does not. More: later detections of stragglers present from the start."""
MAX_BITS = 62
"""The most windows a bit history keeps (an Int64's bits)."""
LINK_DOWNED = "ib_link_downed_delta"
FLAPS = frozenset({NETWORK, LINK_DOWNED})
"""Suspect features of a flapping link (strength: drops over ``flap_count``)."""
RANK_SHARE = "rank_share"
FEATURE_NAMES[RANK_SHARE] = "its share of a step (as its job prints it) above its peers'"
FEATURE_NAMES[CAUSE] = "SM clock held low (clocks-event reasons or a power cap)"
FEATURE_NAMES[NETWORK] = "network link drops"
FEATURE_NAMES[LINK_DOWNED] = "InfiniBand link drops"
FEATURE_NAMES[IB_ERRORS] = "InfiniBand port errors"


@dataclass(frozen=True)
class StragglerConfig:
    """Parameters of the straggler detector; every one can be swept by backtests."""

    slowdown_ratio: Annotated[float, Range(gt=1)] = 1.07
    """A current pace this many times the job's baseline is a slow vote. Lower: milder
    stragglers found; a job's own drift votes slow more often (a GPU must still stand out)."""
    pace_window: PositiveCount = 256
    """Healthy paces the per-job baseline keeps. More: a steadier baseline, slower to follow a
    job whose pace changes on purpose."""
    grace_steps: PositiveCount = 20
    """Training steps the learned paces must cover before the baseline votes. Fewer: votes
    sooner on a baseline of a warming-up job."""
    pace_span_s: Positive = 120.0
    """The current pace is the median of the paces seen this long before a vote. Longer:
    steadier, slower to see a slowdown begin."""
    slow_k: PositiveCount = 2
    slow_n: PositiveCount = 3
    """Slow votes (one per window) out of the last ones that make the job slowed. A higher
    share: fewer passing slowdowns, later detections."""
    stale_s: Positive = 420.0
    """No vote without a pace this recent, or within three of the job's usual print intervals
    if longer (a silent job is the hang detector's business). Longer: a job printing rarely
    still votes; a stale pace may vote."""
    window_s: Positive = 30.0
    """Peer-comparison window. Shorter: sooner, noisier comparisons (more windows to persist
    through), more work."""
    sample_s: Positive = 30.0
    """Telemetry used per window (its first seconds): the comparison needs means, not every
    sample. It must cover the telemetry's sampling interval (15 or 30 s with dcgm-exporter
    behind Prometheus), or the GPUs sampled outside it are never compared; with 1 Hz telemetry
    a third of each window (10 s) is enough and costs a third. Shorter: cheaper, fewer
    samples per comparison."""
    z_threshold: Positive = 4.0
    """Robust z-score of a GPU against its peers (per feature) that makes a deviation. Lower:
    milder stragglers flagged; more GPUs at their power limit flagged by chance."""
    busy_util: Percent = 50.0
    """A job whose median GPU utilisation is below this in a window is not compared then.
    Lower: more windows compared, including pauses in which every GPU is odd its own way."""
    peer_k: PositiveCount = 3
    peer_n: Annotated[int, Range(ge=1, le=62)] = 4
    """Deviating windows out of the last ones that make a GPU (and its node) a straggler. A
    higher share: fewer chance flags, later detections."""
    min_samples: Annotated[int, Range(ge=1, le=62)] = 8
    """Telemetry samples of a GPU that the windows judged must hold: fewer, and the span grows
    to more windows (``peer_k`` of each ``peer_n`` of them must deviate). An SM clock reading
    (NVML, DCGM) is instantaneous, and under a power cap the firmware moves the clock many
    times a second; dcgm-exporter behind Prometheus samples every 15-30 s, so ``peer_n``
    windows may hold one reading each. A GPU whose readings fall low a fifth of the time (at
    its power limit, keeping pace on average) then shows low in 3 of 4 windows by chance about
    one time in 37; in 6 of 8 about one time in 800."""
    min_gpus: Annotated[int, Range(ge=2)] = 4
    """Fewer GPUs in a window make no peer group. Lower: small jobs judged, on weaker
    statistics."""
    max_culprit_fraction: Fraction = 0.25
    """Suspects covering more of the job's nodes (or GPUs) than this blame nobody. Higher:
    more nodes drained at once on evidence that may be the job's or the fabric's."""
    grace_windows: Count = 10
    """Windows a GPU is watched before it can be flagged; its offset from its peers over them
    is what it always looked like (a hot slot, a slower part), not a change. More: a steadier
    offset; a straggler from the first steps waits longer for the cause path."""
    offset_weight: Fraction = 0.1
    """Weight of one healthy window in a GPU's learned offset after the grace windows. Higher:
    follows a GPU's drift sooner, and a slow decline becomes its baseline sooner."""
    clock_floor_mhz: NonNegative = 30.0
    power_floor_w: NonNegative = 15.0
    throttle_floor: NonNegative = 0.1
    counter_floor: NonNegative = 2.0
    """Least spread assumed among peers, per feature, so identical peers do not make tiny
    differences look huge. Lower: smaller differences flagged among identical peers."""
    explained_share: Fraction = 0.5
    """A GPU suspected for its SM clock is blamed for a slowed job only if it runs at least
    ``slowdown_ratio`` times slower than its peers' median clock (the median over the windows
    judged) and that accounts for this share of the job's slowdown. In synchronous
    training every rank waits for the slowest in each collective, so a rank computing x%
    slower makes the step at most x% slower (less: communication and input do not scale with
    its clock); a job far slower than its odd GPU's clock allows slowed for another reason
    (a job-wide drift), and a GPU at its power limit dipping a few percent now and then
    cannot slow it by ``slowdown_ratio``. Lower: a GPU explains more of a job-wide drift (more
    nodes blamed for it)."""
    cause_clock_ratio: Fraction = 0.9
    """A cause of slowness counts only on a GPU clocked this far below its peers' median or
    lower (10% less work per second: a straggler, not the spread among healthy parts that hit
    their power limit now and then), and a GPU whose clock stands out is blamed for a slowed
    job only that far below them (over the windows judged). Higher: milder causes count,
    nearer the healthy spread."""
    throttle_mask: Count = DEFAULT_THROTTLE_MASK
    """NVML clocks-event reason bits that count as throttling (SW power cap, HW slowdown, SW
    thermal, HW thermal, HW power brake by default). More bits: more causes of a low clock
    counted, some of them healthy (SW power cap at full load)."""
    share_ratio: Annotated[float, Range(gt=1)] = 1.1
    """A rank whose own work (compute, data loading) takes this many times its peers' median
    in a report (or whose slowest-over-fastest ratio reaches it) is flagged in that report (with
    ``z_threshold``); ``peer_k`` of its last ``peer_n`` reports make it a straggler. Lower:
    milder host-side stragglers, more ranks flagged by a report's noise."""
    score_threshold: Fraction = 0.75
    """A relative performance score (NVRx's, 1.0 the best rank) at or below this flags a rank:
    NVRx's own default ``gpu_rel_threshold``. Higher: milder slow ranks flagged."""
    share_floor: Positive = 0.01
    """Least spread assumed among ranks' shares (1%), so identical peers do not make a tiny
    difference look huge. Lower: smaller differences among identical ranks flagged."""
    min_ranks: Annotated[int, Range(ge=2)] = 4
    """Fewer ranks in a report of per-rank times make no peer group. Lower: small jobs judged
    on weaker statistics."""
    flap_count: PositiveCount = 2
    """Link drops of one node (its kernel's or NCCL's lines, or rises of its ports'
    ``link_downed`` counters), within ``flap_window_s``, that make it a network straggler
    without the pace vote. Lower: one drop is flapping (a single retrain drains a node)."""
    flap_window_s: Positive = 900.0
    """The span over which a node's link drops are counted. Longer: drops far apart count as
    flapping."""
    forget_after_s: Positive = 7200.0
    """Drop a job not heard of for this long (no scheduler end seen). Shorter: less state; a
    job quiet that long loses its baseline."""

    def __post_init__(self) -> None:
        if not 1 <= self.slow_k <= self.slow_n or not 1 <= self.peer_k <= self.peer_n:
            raise ValueError("persistence needs 1 <= k <= n")
        if self.sample_s > self.window_s:
            raise ValueError("sample_s must not exceed window_s")

    def floors(self) -> dict[str, float]:
        return {
            "sm_clock_mhz": self.clock_floor_mhz,
            LATE_CLOCK: self.clock_floor_mhz,
            "power_w": self.power_floor_w,
            "throttled": self.throttle_floor,
            "pcie_replay_delta": self.counter_floor,
            "nvlink_errors_delta": self.counter_floor,
        }


class StragglerDetector(WatchesJobs):
    """Fires when a job slowed against itself *and* a minority of its GPUs stands out."""

    name: ClassVar[str] = "straggler"
    streams: ClassVar[frozenset[str]] = frozenset(
        {"progress", "gpu", "scheduler", "signatures", "rank_timing"}
    )
    Config: ClassVar[type] = StragglerConfig

    def __init__(self, config: StragglerConfig | None = None) -> None:
        self.config = config or StragglerConfig()
        self.jobs = WatchedJobs(self.config.forget_after_s)
        self.telemetry = GpuWindows(
            self.config.window_s,
            means=("util", "sm_clock_mhz", "power_w"),
            counters=("pcie_replay", "nvlink_errors", "ib_errors", "ib_link_downed"),
            throttle_mask=self.config.throttle_mask,
            sample_s=self.config.sample_s,
            late=("sm_clock_mhz",),
        )
        self.paces: dict[str, PaceModel] = {}
        self.rank_shares = RankShares(self.config)
        self.stalls = StallReports()
        self.log_windows = LogWindows(self.config.window_s)
        self.alarmed: set[str] = set()
        self.suspects: dict[str, list[Suspect]] = {}
        self._gpus = pl.DataFrame(schema=_GPUS)
        self.odd_jobs: set[str] = set()
        """Jobs with a GPU one deviating window short of a suspect: their paces are not
        learned."""
        self.link_drops = LinkDrops(round(2 * self.config.window_s * US))
        """Each node's link drops: the counters show a drop late by up to a window, so nodes
        that dropped together may show it a window apart."""
        self.port_errors = PortErrorPeers(
            self.config.z_threshold,
            self.config.counter_floor,
            self.config.peer_k,
            self.config.peer_n,
        )
        self.evidence: tuple[Callable[[int], dict[str, list[Suspect]]], ...] = (
            lambda now: self.suspects,
            self._flapping,
            self._rank_suspects,
        )
        """Each kind of evidence of a straggler, as suspects per job at a window's end: GPUs
        and ports unlike their peers (``_compare_peers``, run as the window closes), flapping
        links, ranks' printed shares. A new kind of evidence is one more function here."""
        self._watched = pl.DataFrame(schema={"node": pl.String, "job_id": pl.String})
        """node -> job of the GPUs in the latest window that had any: a job running since before
        medic started has no Slurm row telling its nodes, but dcgm-exporter's job mapping (or
        the NVML agent's) labels its GPUs' samples with it."""

    def state_size(self) -> int:
        learned = self._gpus.height - self._gpus.get_column("seen").null_count()
        held = len(self.jobs) + len(self.paces) + learned + len(self.link_drops)
        held += len(self.port_errors) + len(self.stalls)
        return held + self.telemetry.state_size() + self.rank_shares.state_size()

    def update(self, batch: Batch) -> list[Detection]:
        if batch.stream == "scheduler":
            self._forget(self.jobs.observe_scheduler(batch))
        elif batch.stream == "progress":
            paces, odd = self.paces, self.odd_jobs
            steps = self.jobs.observe_progress(batch.frame)
            for step in steps:
                job_id = step[0]
                pace = paces.get(job_id)
                if pace is None:
                    pace = paces[job_id] = PaceModel(self.config)
                pace.observe(step, suspect=job_id in odd)
            resumed = self.stalls.resumed(steps)
            if resumed is not None:
                self.rank_shares.observe(resumed)
        elif batch.stream == "gpu":
            self.log_windows.saw_gpu()
            self.telemetry.add(batch.frame, self.jobs.placement, self.paces.keys())
        elif batch.stream == "signatures":
            self._link_drops(batch.frame)
            self.stalls.observe(batch.frame)
        elif batch.stream == "rank_timing":
            self.rank_shares.observe(batch.frame)
        return []

    def _link_drops(self, hits: pl.DataFrame) -> None:
        if not holds(hits.get_column("signature"), LINK_DOWN):
            return
        drops = hits.filter(pl.col("signature").is_in(LINK_DOWN) & pl.col("node").is_not_null())
        for node, time in drops.select("node", pl.col("time").to_physical()).iter_rows():
            self.link_drops.log(node, time)

    def advance(self, watermark: int) -> list[Detection]:
        found = []
        self.rank_shares.advance(
            watermark, lambda: {job: len(nodes) for job, nodes in self._job_nodes().items()}
        )
        for window in self.telemetry.close(watermark):
            self._count_drops(window)
            self._compare_peers(window)
            found.extend(self._judge(window.end))
        log_window = self.log_windows.due(watermark)
        if log_window is not None:  # no GPU telemetry at all: judged on the logs alone
            found.extend(self._judge(log_window))
        self._forget(self.jobs.release(watermark))
        self._forget([job_id for job_id in self.paces if self.jobs.done(job_id)])
        self.stalls.expire(watermark - round(self.config.stale_s * US))
        drops = self.link_drops  # a drop this old still tells whether a newer one was shared
        drops.forget(watermark - round(self.config.flap_window_s * US) - drops.shared_us)
        return found

    def _count_drops(self, window: Window) -> None:
        """Link drops by the nodes' ``ib_link_downed`` counters: each rise in a window is that
        many drops at the window's end (``LinkDrops`` tells a node's own from the fabric's).
        Most windows have no rise, which one comparison of the column tells without a query."""
        if window.gpus.is_empty() or not (window.gpus.get_column(LINK_DOWNED) > 0).any():
            return
        rises = collect(
            window.gpus.lazy()
            .filter(pl.col(LINK_DOWNED) > 0)
            .group_by("node")
            .agg(pl.col(LINK_DOWNED).max())
        )
        for node, rise in rises.iter_rows():
            self.link_drops.count(node, window.end, min(rise, self.config.flap_count))

    def _judge(self, now: int) -> list[Detection]:
        """Once per window: every job's pace votes; a slowed job with suspects is a straggler.
        An alarmed job is judged afresh only once it is neither slowed nor suspect."""
        found = []
        found_by = [source(now) for source in self.evidence]
        for job_id, pace in self.paces.items():
            pace.vote(now)
            pace.settle(now, odd=job_id in self.odd_jobs)
            suspects = [s for by_job in found_by for s in by_job.get(job_id, [])]
            if job_id in self.alarmed:
                if not pace.slowed and not suspects:
                    self.alarmed.discard(job_id)
                continue
            suspects = firing(pace, suspects, self.config)
            if suspects:
                found.append(self._detection(job_id, pace, suspects))
                self.alarmed.add(job_id)
        return found

    def _flapping(self, now: int) -> dict[str, list[Suspect]]:
        """Nodes of running jobs whose links dropped ``flap_count`` times within
        ``flap_window_s``: suspects sure enough to fire alone (one drop is no flapping)."""
        c = self.config
        if not self.link_drops:
            return {}  # the usual window: no drop, and no query to find no flapping
        placement = self.jobs.placement
        if placement is not None:
            placement = pl.concat([placement, self._watched]).unique()
            placement = placement.filter(pl.len().over("node") == 1)
        else:
            placement = self._watched
        if placement.is_empty():
            return {}
        flapping = self.link_drops.own(now - round(c.flap_window_s * US), c.flap_count)
        if not flapping:
            return {}
        sizes = placement.group_by("job_id").agg(pl.len().alias("nodes"))
        rows = placement.filter(pl.col("node").is_in(list(flapping)))
        found: dict[str, list[Suspect]] = {}
        for node, job_id, nodes in rows.join(sizes, on="job_id").sort("node").iter_rows():
            drops, by_logs = flapping[node]
            feature = NETWORK if by_logs else LINK_DOWNED
            suspect = Suspect(node, -1, drops / c.flap_count, feature, 0, nodes, 0, True, True)
            found.setdefault(job_id, []).append(suspect)
        share = c.max_culprit_fraction
        return {
            job_id: nodes
            for job_id, nodes in found.items()
            if len(nodes) <= max(1.0, share * nodes[0].job_nodes)
        }

    def _job_nodes(self) -> dict[str, tuple[str, ...]]:
        """Each job's nodes: Slurm's list, or for a job running since before medic started the
        nodes its GPUs' samples are labelled with, in name order (Slurm's hostlists are
        sorted)."""
        labelled = self._watched.group_by("job_id").agg(pl.col("node").sort())
        placement = {job_id: tuple(nodes) for job_id, nodes in labelled.iter_rows()}
        return placement | {
            job_id: info.nodes for job_id, info in self.jobs.scheduler.jobs.items() if info.nodes
        }

    def _rank_suspects(self, now: int) -> dict[str, list[Suspect]]:
        """Ranks whose printed share of a step exceeds their peers' persistently, as suspects
        sure enough to fire alone (``medic.detectors.rank_share``), on the job's nodes."""
        placement = self._job_nodes()
        printing = {
            job_id: {rank: node for rank, (_, node) in progress.rank_steps.items()}
            for job_id, progress in self.jobs.progress.jobs.items()
            if progress.rank_steps
        }
        found: dict[str, list[Suspect]] = {}
        for job_id, ranks in self.rank_shares.suspects(now, placement, printing).items():
            nodes = len(placement.get(job_id, ())) or 1
            found[job_id] = [
                Suspect(r.node or "", -1, r.strength, RANK_SHARE, 0, nodes, 0, True, True, rank=r)
                for r in ranks
            ]
        return found

    def _detection(self, job_id: str, pace: PaceModel, suspects: list[Suspect]) -> Detection:
        culprits = sorted({s.node for s in suspects if s.node})
        top = max(suspects, key=lambda s: (s.feature not in FLAPS, s.z))
        progress = self.jobs.progress.jobs.get(job_id)
        ranks = sorted(
            {s.rank.rank for s in suspects if s.rank is not None}
            or {
                rank
                for rank, (_, node) in (progress.rank_steps.items() if progress else ())
                if node in culprits
            }
        )
        ratio = pace.ratio
        pace_says = (
            f"runs {ratio:.2f}x slower than its own baseline ({pace.source} pace)"
            if pace.slowed and ratio is not None
            else "waits on a slow rank"
            if top.rank is not None
            else "has been slow since its first steps (no baseline free of it)"
        )
        if top.feature == NETWORK:
            why = f"{top.node}: {FEATURE_NAMES[NETWORK]} (its kernel or NCCL logged them)"
        elif top.feature == LINK_DOWNED:
            why = f"{top.node}: {FEATURE_NAMES[LINK_DOWNED]} (its ports' link_downed counters)"
        elif top.feature == IB_ERRORS:
            why = (
                f"{top.node}: {FEATURE_NAMES[IB_ERRORS]} rising against the job's other nodes "
                f"(robust z {top.z:.1f})"
            )
        elif top.rank is not None:
            r = top.rank
            why = (
                f"rank {r.rank} on {r.node or 'an unknown node'}: {FEATURE_NAMES[RANK_SHARE]} "
                f"({r.source} {r.metric} {r.share:.2f}x, flagged in {r.flags} of its last "
                f"{min(r.samples, self.config.peer_n)} reports)"
            )
        else:
            why = (
                f"{', '.join(culprits)} stand out from the job's {top.job_gpus} GPUs: "
                f"{top.node} GPU {top.gpu} {FEATURE_NAMES[top.feature]} (robust z {top.z:.1f})"
            )
        strength = strength_of(top, self.config)
        late_only = all(s.rank is not None and s.rank.source == STALLED for s in suspects)
        return Detection(
            job_id=job_id,
            kind="straggler",
            culprits=tuple(culprits),
            ranks=tuple(ranks),
            score=score_of(strength, pace.slowed, any(s.caused for s in suspects)),
            detector=self.name,
            summary=f"job {job_id} {pace_says}; {why}",
            evidence={"slowdown": ratio, "z": top.z, "feature": top.feature},
            tier=SUSPECT if late_only and not pace.slowed else CONFIRMED,
        )

    def _compare_peers(self, window: Window) -> None:
        """Score every GPU of every job against its peers; update suspects and offsets. Only
        jobs training in the window take part: none in a checkpoint or evaluation, and most
        of their GPUs busy (a pause printing nothing makes every GPU odd in its own way)."""
        if not window.gpus.is_empty():
            self._watched = collect(window.gpus.lazy().select("node", "job_id").unique())
        pausing = [j for j, p in self.jobs.progress.jobs.items() if p.phase is not None]
        gpus = window.gpus.filter(
            _scoring(self.config).comparable & ~pl.col("job_id").is_in(pausing)
        )
        if gpus.is_empty():
            self.suspects = {}
            return
        nodes = self.port_errors.compare(gpus)
        scored = collect(self._scored(gpus))
        self._gpus = replaced(self._gpus, scored.lazy().select(list(_GPUS)), KEYS)
        self._track_gpus(scored)
        self._add_port_suspects(nodes)

    def _scored(self, gpus: pl.DataFrame) -> pl.LazyFrame:
        """The window's GPUs scored against their peers, their flags and causes pushed into
        their histories, and their offsets learned (``_scoring``): one query over the state
        kept per GPU."""
        scoring = _scoring(self.config)
        slowed = [job_id for job_id, pace in self.paces.items() if pace.votes.active]
        query = gpus.lazy().with_columns(pl.col(FEATURES).cast(pl.Float64))
        for stage in scoring.z:
            query = query.with_columns(stage)
        query = query.join(self._gpus.lazy(), on=KEYS, how="left")
        query = query.with_columns(pl.col("job_id").is_in(slowed).alias("_slowed"))
        for stage in (*scoring.scored, *scoring.tracked, *scoring.learned):
            query = query.with_columns(stage)
        return query

    def _add_port_suspects(self, nodes: pl.DataFrame) -> None:
        """Nodes whose InfiniBand errors rise persistently against their job's other nodes
        become suspects with a cause of slowness (early when their run of flags began within
        the grace windows and they count errors far beyond spec, ``EARLY_ERRORS_PER_S``), when
        they are a minority of their job's nodes; a node one
        flagged window short makes its job odd."""
        c = self.config
        short = max(c.peer_k - 1, 1)
        odd = nodes.get_column("flags") >= short
        if odd.any():
            self.odd_jobs |= set(nodes.filter(odd).get_column("job_id"))
        if not nodes.get_column("persistent").any():
            return  # the usual window: no suspect, and no query to find none
        sized = nodes.with_columns(
            pl.len().over("job_id").alias("job_nodes"),
            pl.col("persistent").sum().over("job_id").alias("suspect_nodes"),
        ).filter(
            pl.col("persistent")
            & (
                pl.col("suspect_nodes")
                <= pl.max_horizontal(1.0, c.max_culprit_fraction * pl.col("job_nodes"))
            )
        )
        for row in sized.sort(PORT_KEYS).iter_rows(named=True):
            suspect = Suspect(
                node=row["node"],
                gpu=-1,
                z=row["z"],
                feature=IB_ERRORS,
                job_gpus=0,
                job_nodes=row["job_nodes"],
                flagged_gpus=0,
                caused=True,
                early=row["run_seen"] < c.grace_windows
                and row["errors"] >= EARLY_ERRORS_PER_S * c.window_s,
            )
            self.suspects.setdefault(row["job_id"], []).append(suspect)

    def _track_gpus(self, gpus: pl.DataFrame) -> None:
        """GPUs persistently flagged (or caused) and still so make their nodes suspects, when
        they are a minority of their job; GPUs one flagged window short make their jobs odd.
        Read from the columns of the window's scored GPUs (``_scored``): a filter is a query."""
        odd = gpus.get_column("job_id").filter(gpus.get_column("odd"))
        self.odd_jobs = set(odd.to_list())
        persistent = gpus.get_column("persistent") | gpus.get_column("persistent_cause")
        self.suspects = self._suspects(gpus.filter(persistent), gpus) if persistent.any() else {}

    def _suspects(self, persistent: pl.DataFrame, gpus: pl.DataFrame) -> dict[str, list[Suspect]]:
        """The nodes of ``persistent`` GPUs, each by its GPU deviating most, per job whose
        suspects are a minority of it (its size from the window's ``gpus``)."""
        scoring = _scoring(self.config)
        # one query: the plan reads ``nodes`` twice (cheap: a few persistent GPUs) rather
        # than run it alone first
        nodes = (
            persistent.lazy()
            .with_columns(scoring.suspect)
            .group_by("job_id", "node")
            .agg(scoring.suspect_nodes)
        )
        sizes = (
            gpus.lazy()
            .filter(pl.col("job_id").is_in(persistent.get_column("job_id").to_list()))
            .group_by("job_id")
            .agg(pl.col("node").n_unique().alias("job_nodes"), pl.len().alias("job_gpus"))
            .join(
                nodes.group_by("job_id").agg(pl.col("suspect_gpus").sum().alias("flagged_gpus")),
                on="job_id",
            )
        )
        rows = collect(nodes.join(sizes, on="job_id").sort("job_id", "node"))
        suspects: dict[str, list[Suspect]] = {}
        for row in rows.iter_rows(named=True):
            suspects.setdefault(row["job_id"], []).append(
                Suspect(
                    node=row["node"],
                    gpu=row["gpu"],
                    z=row["z"],
                    feature=CAUSE if row["feature"] < 0 else SLOWING[row["feature"]],
                    job_gpus=row["job_gpus"],
                    job_nodes=row["job_nodes"],
                    flagged_gpus=row["flagged_gpus"],
                    caused=row["caused"],
                    early=row["early"],
                    clock_ratio=row["ratio"],
                )
            )
        return {job_id: found for job_id, found in suspects.items() if self._minority(found)}

    def _minority(self, suspects: list[Suspect]) -> bool:
        share = self.config.max_culprit_fraction
        first = suspects[0]
        return len(suspects) <= max(1.0, share * first.job_nodes) and (
            first.flagged_gpus <= max(1.0, share * first.job_gpus)
        )

    def _forget(self, job_ids: list[str]) -> None:
        if not job_ids:
            return
        for job_id in job_ids:
            self.odd_jobs.discard(job_id)
            self.paces.pop(job_id, None)
            self.suspects.pop(job_id, None)
            self.alarmed.discard(job_id)
        self.telemetry.forget(job_ids)
        self.port_errors.forget(job_ids)
        self.rank_shares.forget(job_ids)
        self.stalls.forget(job_ids)
        self._gpus = self._gpus.filter(~pl.col("job_id").is_in(job_ids))
        self._watched = self._watched.filter(~pl.col("job_id").is_in(job_ids))


@dataclass(frozen=True)
class _Scoring:
    """The expressions of a window's peer comparison (``_compare_peers``), each stage one
    ``with_columns`` of a single query."""

    comparable: pl.Expr
    """GPUs of jobs large and busy enough to compare (pausing jobs are left out apart)."""
    z: list[list[pl.Expr]]
    scored: list[list[pl.Expr]]
    tracked: list[list[pl.Expr]]
    """The GPU's histories pushed, whether it is ``persistent`` (or ``persistent_cause``), and
    whether it is ``odd``: one window short of that."""
    learned: list[list[pl.Expr]]
    """Its offsets moved toward its current z (clipped at ``z_threshold``, so one odd window
    cannot make a large offset): the mean over its grace windows, then an exponential average
    of healthy windows only: never while its job is slowed (``_slowed``) or the GPU was
    flagged in any of its last ``peer_n`` windows, so a straggler (even one that hovers around
    the threshold) never becomes its own baseline."""
    suspect: list[pl.Expr]
    """A persistent GPU's deviation: its cause's when only its cause persists."""
    suspect_nodes: list[pl.Expr]


@cache
def _scoring(c: StragglerConfig) -> _Scoring:
    """The peer comparison's expressions for ``c``, built once: building them each window
    costs more than running them on a window of a small cluster."""
    comparable = (pl.len().over("job_id") >= c.min_gpus) & (
        pl.col("util").median().over("job_id") >= c.busy_util
    )
    # a clock is low in a window when it is low on average and still low at its end
    clock_z = pl.max_horizontal(pl.col("z_sm_clock_mhz"), pl.col(f"z_{LATE_CLOCK}"))
    z = {f: clock_z if f == "sm_clock_mhz" else pl.col(f"z_{f}") for f in SLOWING}
    shift = {f: z[f] - pl.col(f"offset_{f}").fill_null(0.0) for f in SLOWING}
    deviation = [-shift["sm_clock_mhz"], *(shift[f] for f in SLOWING[1:])]
    reason = pl.max_horizontal(pl.col("z_throttled"), -pl.col("z_power_w"))
    busy = pl.col("util") >= c.busy_util
    # Terms used more than once are columns of their own (``_``-prefixed, read by no one
    # after): unoptimised queries compute an expression again at each use, and the job's
    # median clock is a grouping.
    held_low, link_z, job_clock = pl.col("_held_low"), pl.col("_link_z"), pl.col("_job_clock")
    clock_cause = pl.col("_clock_cause")
    by_link = pl.col("_by_link")
    links = [pl.col(f"z_{f}") for f in SLOWING[1:]]
    scored = [
        [
            *(d.alias(f"d_{f}") for d, f in zip(deviation, SLOWING, strict=True)),
            pl.min_horizontal(-clock_z, reason).alias("_held_low"),
            pl.max_horizontal(links).alias("_link_z"),
            pl.col("sm_clock_mhz").median().over("job_id").alias("_job_clock"),
        ],
        [
            pl.max_horizontal(f"d_{f}" for f in SLOWING).alias("z"),
            (
                (held_low >= c.z_threshold)
                & busy
                & (pl.col("sm_clock_mhz") <= c.cause_clock_ratio * job_clock)
            ).alias("_clock_cause"),
        ],
        [
            ((link_z >= c.z_threshold) & busy & ~(clock_cause & (held_low > link_z))).alias(
                "_by_link"
            ),
        ],
        [
            (job_clock / pl.col("sm_clock_mhz")).alias("clock_ratio"),
            pl.coalesce(
                pl.when(pl.col(f"d_{f}") == pl.col("z")).then(pl.lit(i))
                for i, f in enumerate(SLOWING)
            ).alias("feature"),
            (
                (pl.col("z") >= c.z_threshold)
                & (pl.col("seen").fill_null(0) >= c.grace_windows)
                & (pl.col("util") >= c.busy_util)
            ).alias("flagged"),
            pl.when(by_link).then(link_z).otherwise(held_low).alias("cause_z"),
            pl.when(by_link)
            .then(pl.when(links[0] >= links[1]).then(pl.lit(1)).otherwise(pl.lit(2)))
            .otherwise(pl.lit(-1))
            .alias("cause_feature"),
            (clock_cause | by_link).alias("caused"),
        ],
    ]
    kept = min(ALONE_SPANS * max(c.peer_n, c.min_samples), MAX_BITS)
    span = pl.col("judged_span")  # a column of its own: unoptimised queries repeat expressions
    recent = pl.lit(2, pl.Int64).pow(span).cast(pl.Int64) - 1
    needed = (span * c.peer_k / c.peer_n).ceil().cast(pl.Int64)
    long_span = pl.min_horizontal(ALONE_SPANS * span, pl.lit(MAX_BITS, pl.Int64))
    long_recent = pl.lit(2, pl.Int64).pow(long_span).cast(pl.Int64) - 1
    long_needed = (long_span * c.peer_k / c.peer_n).ceil().cast(pl.Int64)
    seen = pl.col("seen").fill_null(0)
    short = pl.max_horizontal(pl.col("needed") - 1, pl.lit(1))
    tracked = [
        [
            push_flags(pl.col("history"), pl.col("flagged"), kept).alias("history"),
            push_flags(pl.col("cause_history"), pl.col("caused"), kept).alias("cause_history"),
            *(
                pl.concat_list(pl.col(many).fill_null([]), pl.col(one)).list.tail(kept).alias(many)
                for many, one in (("counts", "samples"), ("clock_ratios", "clock_ratio"))
            ),
        ],
        [judged_span(pl.col("counts"), c.min_samples, c.peer_n).alias("judged_span")],
        [
            flag_count(pl.col("history") & recent).alias("flags"),
            flag_count(pl.col("cause_history") & recent).alias("causes"),
            needed.alias("needed"),
            (span <= pl.col("counts").list.len()).alias("ready"),
            pl.col("clock_ratios").list.reverse().list.head(span).list.median().alias("ratio"),
        ],
        [
            pl.when(pl.col("causes") == 0)
            .then(None)
            .otherwise(pl.col("cause_seen").fill_null(seen))
            .alias("cause_seen"),
            (pl.col("ready") & pl.col("flagged") & (pl.col("flags") >= pl.col("needed"))).alias(
                "persistent"
            ),
            (pl.col("ready") & pl.col("caused") & (pl.col("causes") >= pl.col("needed"))).alias(
                "persistent_cause"
            ),
            (
                (long_span <= pl.col("counts").list.len())
                & (flag_count(pl.col("cause_history") & long_recent) >= long_needed)
            ).alias("settled_cause"),
            ((pl.col("flags") >= short) | (pl.col("causes") >= short)).alias("odd"),
        ],
    ]
    weight = pl.max_horizontal(pl.lit(c.offset_weight), 1.0 / (seen + 1))
    limit = c.z_threshold
    flagged_lately = (pl.col("history") & ((1 << c.peer_n) - 1)).fill_null(0) != 0
    moved = {
        "seen": seen + 1,
        **{
            f"offset_{f}": pl.col(f"offset_{f}").fill_null(0.0)
            + weight * (pl.col(f"z_{f}").clip(-limit, limit) - pl.col(f"offset_{f}").fill_null(0.0))
            for f in SLOWING
        },
    }
    learned = [
        [((seen < c.grace_windows) | (~pl.col("_slowed") & ~flagged_lately)).alias("_learning")],
        [
            pl.when(pl.col("_learning")).then(new).otherwise(pl.col(name)).alias(name)
            for name, new in moved.items()
        ],
    ]
    by_cause = pl.col("persistent_cause") & ~pl.col("persistent")
    suspect = [
        pl.when(by_cause).then(pl.col("cause_z")).otherwise(pl.col("z")).alias("z"),
        pl.when(by_cause)
        .then(pl.col("cause_feature"))
        .otherwise(pl.col("feature"))
        .alias("feature"),
        (
            pl.col("persistent_cause")
            & pl.col("settled_cause")
            & (pl.col("cause_seen") < c.grace_windows)
        ).alias("early"),
    ]
    suspect_nodes = [
        pl.col("gpu", "z", "feature").sort_by("z").last(),
        pl.col("persistent_cause").any().alias("caused"),
        pl.col("early").any(),
        pl.col("ratio").max(),
        pl.len().alias("suspect_gpus"),
    ]
    return _Scoring(
        comparable,
        peer_z_columns("job_id", c.floors()),
        scored,
        tracked,
        learned,
        suspect,
        suspect_nodes,
    )


def judged_span(counts: pl.Expr, min_samples: int, windows: int) -> pl.Expr:
    """How many of the latest windows are judged, given each window's sample count (``counts``,
    newest last): at least ``windows``, and as many as hold ``min_samples`` samples; more than
    the list holds while it does not hold that many yet."""
    short = counts.list.reverse().list.eval(pl.element().cum_sum() < min_samples).list.sum()
    return pl.max_horizontal(short.cast(pl.Int64) + 1, pl.lit(windows, pl.Int64))
