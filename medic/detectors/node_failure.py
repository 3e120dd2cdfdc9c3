"""``node_failure``: a node running a job stopped responding or the scheduler failed it.

Evidence, from the fastest to the slowest:

* the node falls silent: no telemetry for ``silence_s`` while the rest of the cluster keeps
  reporting, and no log line either. Telemetry (~1 Hz) is the liveness signal, but exporters
  restart and scrapes fail for tens of seconds, and most nodes of a job print nothing (rank 0
  writes the progress). So the silence counts once something else agrees: the node used to write
  regularly and went quiet with it (three usual spacings), the job's ranks report losing a peer
  since (NCCL aborts, and no error of a rank's own that would explain them: torchrun's traceback
  after a rank died of such an abort is its consequence, not a cause), the job's other GPUs
  stalled (their power fell while they stayed pegged: GPUs blocked in a collective spin at full
  utilisation on a fraction of their working power, where a checkpoint or a data stall leaves
  them idle; every one of them, on every other node of the job, for a GPU still at work is a
  live rank its peers wait on; and from work when the node was last heard from, for a node seen
  in the wait with them was alive in it), or the silence outlasts ``long_silence_s``. A node
  last heard with its GPUs off work (none drawing working power, not all of them spinning in a
  collective) was alive off them, its rank 0 writing a checkpoint or evaluating on the host:
  its output going quiet and its peers' stall are that pause's, not its death's. The node's
  output going quiet and its peers' stall count only once the job's own pause is
  ``pause_factor`` times the longest it took before while training: an evaluation, a save or a
  data loader's stall (the first of a kind often longer than the job's steps) while a node's
  exporter restarts looks like a dead node that long; so does a save or an evaluation the job
  announced and has not ended (a line or its next step ends it), until the silence outlasts
  ``long_silence_s`` or a peer complains. Even past those bounds, the quiet and the stall
  make only a suspect until the silence lasts ``quiet_confirm_s``: a job's first long pause
  (a save nobody announced) while the writer's exporter restarts shows all of them, and ends
  sooner. A training step the job completed after
  the node's telemetry stopped waited on the node's ranks: the silence counts from that step,
  however long the exporter stays away, and only a peer's complaint or the silence's length
  confirms it (without the node's telemetry, its death and the job's next pause look the same).
  All this long before Slurm's SlurmdTimeout. The job's own output going quiet is no such sign:
  a hang stops it too (a rank stuck in host code or on a dead NFS server), and so do a job's
  start-up, checkpoints and evaluations, while a node's exporter restarts. Nor is a node's own
  output going quiet before its job printed a training step: start-up output comes in bursts
  (imports, configuration dumps, NCCL's bootstrap lines from every rank) followed by minutes of
  model building, compilation and data loading that print nothing, so a spacing learned from it
  is no cadence;
* srun/salloc print ``error: Node failure on <node>`` (slurmctld: ``Nodes <node> not
  responding``); the fabric says a node's HCA or port failed (``medic.detectors.fabric``):
  NCCL's ``Got async event : local catastrophic error`` blames the host that printed it and an
  mlx5 health failure the node whose kernel logged it, at once; a ``port error`` that does not
  come back within ``fabric_hold_s`` blames its host, and a completion error "retry exceeded"
  (status 12) the peer it names when no error of the job's own explains it (its process died)
  and the job's NCCL start-up lines tell which host holds that address;
* Slurm marks the node NOT_RESPONDING, DOWN or FAIL (admin drains are not failures);
* the job ends NODE_FAIL (or slurmstepd cancels it "DUE TO NODE FAILURE"): the culprit is
  then the job's node that has been silent the longest, when one is.

A job that failed a moment ago still counts for ``ended_grace_s``: peers of a dead node often
crash and end the job before the node's silence is long enough to be sure of.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, NamedTuple

import numpy as np
import polars as pl

from medic.config import NonNegative, Percent, Positive, Range
from medic.detectors.attribution import Complaints, Evidence, JobEvidence
from medic.detectors.base import SUSPECT, Detection
from medic.detectors.fabric import FabricEvidence
from medic.detectors.incidents import IncidentBook, WatchesLiveness
from medic.detectors.kernel_context import KernelContext
from medic.detectors.liveness import PRUNE_EVERY_US, Cadence, Gap, Liveness
from medic.detectors.progress_state import PHASE_END, PHASE_OF
from medic.frames import collect, holds, newest_by, present, spans_by, times_us
from medic.ingest.base import Batch
from medic.slurm import NODE_FAIL, NODE_FAILED_STATES
from medic.timeutil import US

RETENTION_US = 3600 * US
POWER_BASELINE_US = 60 * US
"""The span before a silence that the job's working power is measured over."""


@dataclass(frozen=True)
class NodeFailureConfig:
    """``[detectors.node_failure]``: nodes gone silent, or failed in Slurm."""

    silence_s: Positive = 20.0
    """A node of a running job with neither telemetry nor logs this long has failed if it or its
    job wrote regularly until then and has not for three of its usual spacings since, or if the
    job's ranks report errors since: a healthy job keeps writing while a node's telemetry
    exporter restarts. A node whose telemetry was overdue while its job still completed steps
    (its exporter away) is confirmed only by those errors or by ``long_silence_s``: without its
    telemetry, its death and the job's next pause (a save, an evaluation) look the same."""
    long_silence_s: Positive = 180.0
    """A silence this long is a failure without corroboration (telemetry exporters restarting or
    failing scrapes can stay silent for a minute or two)."""
    quiet_confirm_s: Positive = 120.0
    """A silence corroborated only by what a pause of the job shows as well (the node's output
    going quiet, the job's other GPUs stalled) is a suspect until it lasts this long: a save or
    an evaluation nobody announced, the job's first, while the writer's exporter restarts looks
    the same, and a restart with a missed scrape or two keeps a node's telemetry away for up
    to two minutes. Peers' complaints, fabric errors and Slurm confirm at once. Lower: a dead
    node confirmed sooner where nothing else tells; a first long pause more often taken for
    one."""
    slack_s: NonNegative = 5.0
    """Lines written (and power drawn) this soon after the silence began were already in flight."""
    stall_ratio: Annotated[float, Range(gt=0, lt=1)] = 0.6
    """The job's other GPUs stalled with the node if each of them, on every other node of the
    job, drew less than this share of the job's mean power of the minute before (GPUs blocked in
    a collective draw a fraction of their working power) while every one of them stayed at
    ``spin_util`` or more. Higher: a dead node is confirmed sooner where its peers' spinning
    draws more, and a live rank at light work (an evaluation) may pass for a stall."""
    spin_util: Percent = 80.0
    """NCCL kernels spin at full utilisation while they wait, on every rank blocked on the dead
    peer; in a synchronous checkpoint the writers' GPUs idle while the others wait in the
    barrier, and in a data stall the stalled rank's GPU idles, so neither pegs them all."""
    pause_factor: Positive = 2.0
    """A job quiet with its silent node for up to this many times the longest pause it took
    while training may be pausing again (an evaluation or a save not announced, its peers
    spinning meanwhile) while the node's exporter restarts: its output going quiet and its
    peers' stall do not corroborate the silence until then. Higher: fewer first pauses of a new
    kind taken for a failure; a failure confirmed by them later."""
    ended_grace_s: NonNegative = 60.0
    """A job that failed this recently is still watched for its nodes' silence."""
    node_states: tuple[str, ...] = NODE_FAILED_STATES
    """Slurm node state flags that mean the node failed."""
    fabric_hold_s: NonNegative = 20.0
    """A fabric error that may pass (a port error, a peer's retries exhausted) counts only if
    this long after it its port has not come back and the job shows no error of its own."""
    recovered_by: tuple[str, ...] = ("ib_port_active",)
    """Signatures saying a host's fabric port came back (a port error before it was a flap)."""
    context_s: NonNegative = 600.0
    """Kernel context events (storage, NVMe, soft lockups, NIC events) on a node this long
    before its failure are attached to the failure as evidence (0: none)."""

    def __post_init__(self) -> None:
        if self.long_silence_s < self.silence_s:
            raise ValueError("long_silence_s must be at least silence_s")
        if not self.silence_s <= self.quiet_confirm_s <= self.long_silence_s:
            raise ValueError("quiet_confirm_s must lie between silence_s and long_silence_s")


class PowerSample(NamedTuple):
    """One telemetry batch of a job's reporting GPUs."""

    time: int
    power: float
    """Their mean power."""
    lowest: float
    """The lowest utilisation of any of them."""
    peak: float
    """The highest power of any of them."""
    nodes: frozenset[str]
    """The nodes they are on."""


class JobPower:
    """Each job's reporting GPUs per telemetry batch (``PowerSample``), over the last minutes.
    Batches are folded in ``FOLD_EVERY`` at a time, or when asked about: one grouping query per
    second of telemetry would cost more than everything else this detector does with it. The
    folds are kept as frames, read only when a silence is weighed (rarely): a sample object a
    row built at each fold would cost more than the query."""

    FOLD_EVERY = 64
    """About a minute of 1 Hz telemetry (``forget_before`` folds once a minute too): a query
    over 64 batches costs about half of four over 16 each."""
    COLUMNS = ("time", "job_id", "node", "power_w", "util")

    def __init__(self, keep_us: int) -> None:
        self.keep_us = keep_us
        self.newest: dict[str, int] = {}
        """Job -> time of its newest sample: its samples up to ``keep_us`` older are kept."""
        self._folded: list[pl.DataFrame] = []
        """Per fold: job_id, time, power_w, util, peak, node (a list), in batch order."""
        self._arrived: list[pl.DataFrame] = []
        self._pruned_at = 0

    def __len__(self) -> int:
        return len(self.newest)

    def observe(self, latest: pl.DataFrame) -> None:
        self._arrived.append(latest)
        if len(self._arrived) >= self.FOLD_EVERY:
            self._fold()

    def _fold(self) -> None:
        arrived, self._arrived = self._arrived, []
        if not arrived:
            return
        batch = np.repeat(np.arange(len(arrived)), [f.height for f in arrived])
        means = collect(
            pl.concat(arrived, rechunk=False)
            .lazy()
            .select(self.COLUMNS)
            .with_columns(pl.Series("batch", batch))
            .filter(pl.col("job_id").is_not_null() & pl.col("power_w").is_not_null())
            .group_by("batch", "job_id")
            .agg(
                pl.col("time").max().cast(pl.Int64),
                pl.col("power_w").mean(),
                pl.col("util").min().fill_null(0.0),
                pl.col("power_w").max().alias("peak"),
                pl.col("node").unique(),
            )
            .sort("batch")
            .select("job_id", "time", "power_w", "util", "peak", "node")
        )
        if means.is_empty():
            return
        self._folded.append(means)
        # Later rows overwrite earlier ones: each job's last sample, as batches came.
        jobs, times = means.get_column("job_id"), means.get_column("time")
        self.newest.update(zip(jobs.to_list(), times.to_list(), strict=True))

    def history(self, job_id: str, start: int, end: int) -> list[PowerSample]:
        """The job's samples kept with ``start <= time <= end``, oldest first."""
        self._fold()
        newest = self.newest.get(job_id)
        if newest is None:
            return []
        start = max(start, newest - self.keep_us)
        time = pl.col("time")
        rows = collect(
            pl.concat([f.lazy() for f in self._folded])
            .filter((pl.col("job_id") == job_id) & time.is_between(start, end))
            .select("time", "power_w", "util", "peak", "node")
        )
        return [
            PowerSample(t, power, lowest, peak, frozenset(nodes))
            for t, power, lowest, peak, nodes in rows.iter_rows()
        ]

    def stalled(
        self,
        job_id: str,
        since: int,
        now: int,
        settle: int,
        ratio: float,
        spin_util: float,
        absent: frozenset[str] = frozenset(),
    ) -> bool:
        """Whether the job's GPUs waited from ``since + settle`` to ``now``: every GPU drew
        under ``ratio`` of the job's mean power of the minute before ``since`` while every one
        of them stayed at ``spin_util`` or more (three samples at least on each side), and every
        node that reported in that minute has reported since, but those in ``absent`` (the
        silent ones). Every sample and every GPU: peers of a dead node block in their next
        collective, within a step; peers that went on working for a while and then waited (on a
        save by a rank on the silent node, whose exporter restarted) were not waiting on a dead
        node, and a GPU still at work while the others wait (rank 0 evaluating, at a scrape
        interval of 30 s seen only by its node's next scrape) is the rank they wait for, alive.
        And the job worked until the node fell silent: a GPU of its samples over the ``settle``
        before ``since`` (the silent node's last among them) drew ``ratio`` of the most the job
        drew in the minute before. A job seen waiting already, the silent node with it, did not
        stall on the node's death: the node was alive in the wait (a rank stuck in host code,
        the node's exporter restarting later)."""
        around = self._around(job_id, since, now, settle)
        if around is None:
            return False
        before, after, heard = around
        expected = frozenset().union(*(s.nodes for s in before)) - absent
        if not expected <= frozenset().union(*(s.nodes for s in after)):
            return False
        last_heard = [s.peak for s in heard]
        working = max(s.power for s in before)
        if last_heard and max(last_heard) < ratio * working:
            return False
        baseline = sum(s.power for s in before) / len(before)
        peak = max(s.peak for s in after)
        lowest = sum(s.lowest for s in after) / len(after)
        return lowest >= spin_util and peak < ratio * baseline

    def idle_when_heard(
        self,
        job_id: str,
        node: str,
        last: int,
        ratio: float,
        spin_util: float,
        worked_until: int | None = None,
    ) -> bool:
        """Whether ``node``'s last sample (at ``last``) showed its GPUs off work while it was
        heard: none of them drawing ``ratio`` of the job's mean power at its most in the minute
        before the job was last seen at work (``worked_until``, its newest training step, where
        earlier: a save that began before the node's last scrape is no work to measure by), and
        not every one spinning at ``spin_util`` (a collective's wait). Its ranks were alive
        then, off their GPUs (rank 0 writing a checkpoint or evaluating on the host, host code):
        the peers waiting meanwhile waited on live ranks, not on the node's death, and its
        output pausing with them is the pause's."""
        until = last if worked_until is None else min(worked_until, last)
        history = self.history(job_id, until - POWER_BASELINE_US, last)
        mine = [s for s in history if node in s.nodes]
        working_then = [s for s in history if s.time <= until] or history
        if len(history) < 3 or not mine:
            return False
        working = max(s.power for s in working_then)
        return mine[-1].peak < ratio * working and mine[-1].lowest < spin_util

    def worked(self, job_id: str, since: int, now: int, settle: int, ratio: float) -> bool:
        """Whether the job's reporting GPUs drew ``ratio`` or more of their power of the minute
        before ``since`` in every sample from ``since + settle`` to ``now`` (three samples at
        least on each side): the job went on working, so its ranks on a node that fell silent
        then were not dead (their peers would have blocked in their next collective)."""
        around = self._around(job_id, since, now, settle)
        if around is None:
            return False
        before, after, _ = around
        return min(s.power for s in after) >= ratio * sum(s.power for s in before) / len(before)

    def _around(
        self, job_id: str, since: int, now: int, settle: int
    ) -> tuple[list[PowerSample], list[PowerSample], list[PowerSample]] | None:
        """The job's samples over the minute before ``since``, from ``since + settle`` to
        ``now``, and over the ``settle`` up to ``since`` (the last heard of a silent node): one
        query; None with fewer than three in either of the first two."""
        start = since - max(POWER_BASELINE_US, settle)
        history = self.history(job_id, start, now)
        before = [s for s in history if since - POWER_BASELINE_US <= s.time < since]
        after = [s for s in history if since + settle <= s.time]
        if len(before) < 3 or len(after) < 3:
            return None
        return before, after, [s for s in history if since - settle <= s.time <= since]

    def forget_before(self, cutoff: int) -> None:
        """Drop jobs not heard from since ``cutoff``, and samples older than ``keep_us`` before
        their job's newest; scans at most once a minute."""
        if cutoff - self._pruned_at < PRUNE_EVERY_US:
            return
        self._pruned_at = cutoff
        self._fold()
        self.newest = {job_id: t for job_id, t in self.newest.items() if t >= cutoff}
        if not self._folded:
            return
        oldest = pl.col("job_id").replace_strict(
            list(self.newest),
            [t - self.keep_us for t in self.newest.values()],
            default=None,
            return_dtype=pl.Int64,
        )
        kept = collect(pl.concat([f.lazy() for f in self._folded]).filter(pl.col("time") >= oldest))
        self._folded = [kept] if not kept.is_empty() else []


def failed_state(state: str, failed: tuple[str, ...]) -> str | None:
    """The first flag of a Slurm node state (``IDLE+NOT_RESPONDING``, ``down*``) in ``failed``."""
    for flag in state.upper().split("+"):
        flag = flag.strip().rstrip("*~#!%$@^-")
        if flag in failed:
            return flag
    return None


class NodeFailureDetector(WatchesLiveness):
    """Silent nodes, Slurm node failures and NODE_FAIL job ends, blamed on the failed node."""

    name = "node_failure"
    streams = frozenset({"scheduler", "gpu_latest", "logs", "signatures", "progress"})
    Config = NodeFailureConfig

    def __init__(self, config: NodeFailureConfig | None = None) -> None:
        self.config = config or NodeFailureConfig()
        self.liveness = Liveness()
        self.book = IncidentBook(
            self.name, self.name, round(self.config.ended_grace_s * US), self.liveness
        )
        self.job_logs = Cadence()
        """Per job: its newest log line (from any node) and its delivery lag."""
        self.complaints = Complaints()
        self.job_collateral: dict[str, int] = {}
        """Job -> newest complaint of a rank about a peer (an NCCL timeout or abort)."""
        self.job_root_errors: dict[str, int] = {}
        """Job -> newest error of a rank's own (a traceback, out of memory, a CUDA error)."""
        self.job_stalls: dict[str, tuple[int, int]] = {}
        """Job -> (the newest line saying how long one of its ranks had waited, when that wait
        began): NCCL's watchdog timing a collective out, a heartbeat monitor."""
        self.training: dict[str, tuple[int, int]] = {}
        """Job -> (its first training step, its newest one): its log cadence means something
        only once it trains."""
        self.pauses: dict[str, int] = {}
        """Job -> the longest its lines paused since it began training: a pause no longer than
        ``pause_factor`` times that may be one the job takes, whatever its GPUs show."""
        self.phases: dict[str, int] = {}
        """Job -> when the phase it announced (a save, an evaluation) began, until a line ends
        it or the job's next training step does."""
        self.suspected: dict[tuple[str, str], int] = {}
        """(job, node) -> the start of the silence reported as a suspect (reported once)."""
        self.job_power = JobPower(POWER_BASELINE_US + round(self.config.long_silence_s * US))
        self.fabric = FabricEvidence(
            round(self.config.fabric_hold_s * US),
            round(self.config.slack_s * US),
            self.config.recovered_by,
        )
        self.context = KernelContext(round(self.config.context_s * US))

    def state_size(self) -> int:
        return (
            len(self.fabric)
            + len(self.book)
            + len(self.liveness)
            + len(self.job_logs)
            + len(self.complaints)
            + len(self.job_collateral)
            + len(self.job_root_errors)
            + len(self.job_stalls)
            + len(self.job_power)
            + len(self.training)
            + len(self.pauses)
            + len(self.phases)
            + len(self.suspected)
            + len(self.context)
        )

    def update(self, batch: Batch) -> list[Detection]:
        if batch.num_rows == 0:
            return []
        if batch.stream == "gpu_latest":
            self.liveness.observe_gpu(batch.frame)
            self.job_power.observe(batch.frame)
        elif batch.stream == "logs":
            self.liveness.observe_logs(batch.frame)
            self._job_activity(batch.frame)
        elif batch.stream == "scheduler":
            return self._scheduler(batch)
        elif batch.stream == "signatures":
            return self._signatures(batch.frame)
        elif batch.stream == "progress":
            self._training(batch.frame)
        return []

    def advance(self, watermark: int) -> list[Detection]:
        cfg = self.config
        self.liveness.advance_to(watermark)
        evidence: list[tuple[str | None, Evidence]] = []
        suspects: list[tuple[str | None, Evidence]] = []
        gaps = self.liveness.silent_nodes(round(cfg.silence_s * US), watermark)
        silent = {gap.node for gap in gaps}
        for node_gap in gaps:
            for job_id in self.book.concerned(None, node_gap.node, watermark):
                if self.book.is_reported(job_id, node_gap.node) or self._all_silent(job_id, silent):
                    continue
                gap = self._since_last_step(job_id, node_gap)
                if gap.length < cfg.silence_s * US:
                    continue
                corroboration = self._corroboration(
                    job_id, gap, watermark, frozenset(silent), node_gap.since
                )
                if corroboration is None:
                    continue
                why, sure = corroboration
                what = f"no telemetry or log line for {gap.length / US:.0f} s, and {why}"
                doubt = silence_doubt(gap.length, cfg.silence_s)
                item = Evidence(gap.since, what, gap.node, hardware=True, doubt=doubt)
                if sure:
                    evidence.append((job_id, item))
                elif self.suspected.get((job_id, gap.node)) != gap.since:
                    self.suspected[(job_id, gap.node)] = gap.since
                    suspects.append((job_id, item))
        found = self._emit(evidence, confirmed_at=watermark)
        found += self.book.report(suspects, _headline, watermark, tier=SUSPECT)
        released = self.fabric.release(watermark, self.job_root_errors, self._log_lag)
        found += self._emit(self._placed(released))
        stale = watermark - RETENTION_US
        self.book.forget_ended(stale)
        self.liveness.forget_before(stale)
        self.job_logs.forget_before(stale)
        self.complaints.forget_before(stale)
        self.job_power.forget_before(stale)
        self.fabric.forget_before(stale)
        self.context.forget_before(watermark - round(self.config.context_s * US))
        for state in (self.job_collateral, self.job_root_errors):
            for job_id in [j for j, t in state.items() if t < stale]:
                del state[job_id]
        for job_id in [j for j, (said, _) in self.job_stalls.items() if said < stale]:
            del self.job_stalls[job_id]
        for job_id in [j for j, (_, newest) in self.training.items() if newest < stale]:
            del self.training[job_id]
            self.pauses.pop(job_id, None)
        for job_id in [j for j, began in self.phases.items() if began < stale]:
            del self.phases[job_id]  # a job that announced a phase and never trained, too
        for key in [k for k, since in self.suspected.items() if since < stale]:
            del self.suspected[key]
        return found

    def _log_lag(self, job_id: str | None) -> int:
        """How late the job's log lines have been arriving lately."""
        return 0 if job_id is None else self.job_logs.lag(job_id)

    def _all_silent(self, job_id: str, silent: set[str]) -> bool:
        """Whether every node of a job of several went silent at once: what their telemetry
        and log feeds have in common (a collector, the job's end) failed, not each node; one
        dead node leaves its peers reporting. Slurm's own node states still tell."""
        info = self.book.jobs.jobs.get(job_id)
        nodes = set(info.all_nodes) if info is not None else set()
        return len(nodes) > 1 and nodes <= silent

    def _since_last_step(self, job_id: str, gap: Gap) -> Gap:
        """The node's silence as its job tells it: a training step the job completed after the
        node's telemetry stopped waited on every rank, those on the node too, so the node was
        alive then (its exporter was not) and its silence counts from that step."""
        stepped = self.training.get(job_id)
        if stepped is None or stepped[1] <= gap.since:
            return gap
        return dataclasses.replace(
            gap, since=stepped[1], length=gap.length - stepped[1] + gap.since
        )

    def _corroboration(
        self, job_id: str, gap: Gap, now: int, silent: frozenset[str], last_sample: int
    ) -> tuple[str, bool] | None:
        """Why a silent node is a failed one rather than a restarting telemetry exporter
        (``silent``: the nodes silent now; ``last_sample``: the node's newest telemetry, where
        ``gap`` counts from the job's last step, ``_since_last_step``). A step that came when
        the node's next sample was overdue, not merely between two scrapes, shows its exporter
        away while it lived; then no telemetry tells the node's death from the job's next pause
        (a save, an evaluation, its peers waiting in either case): the node's output going quiet
        and its peers' stall are no sign, and only a peer's complaint or the silence's length
        confirms it. A node dying while its exporter is away is rarer than a job pausing while
        an exporter restarts. Returns the reason and whether it confirms the failure (else the
        silence is a suspect: see ``quiet_confirm_s``)."""
        cfg = self.config
        slack = round(cfg.slack_s * US)
        longest = round(cfg.long_silence_s * US / 3)
        if gap.length >= cfg.long_silence_s * US:
            return "the silence lasts", True
        own_error = self.job_root_errors.get(job_id, gap.since - slack - 1) >= gap.since - slack
        peers_complain = self.job_collateral.get(job_id, gap.since - 1) >= gap.since
        if peers_complain and not own_error and not self._stalled_before(job_id, gap):
            return f"ranks of job {job_id} report losing a peer", True
        # The node's next sample was due a spacing after its last: peers' samples until then
        # may still show the work they did before it died.
        settle = slack + self.liveness.cadence_of(gap.node)
        away = gap.since - last_sample > settle
        stepped = self.training.get(job_id)
        trained = stepped is not None and stepped[0] < gap.since
        # A job pausing as it has paused before, or a little longer (an evaluation, a save, a
        # loader's stall, its peers spinning in the wait meanwhile), while its node's exporter
        # restarts looks the same as a dead node, until the pause runs past ``pause_factor``
        # times the job's longest: only a peer's complaint or the silence's length confirms it
        # sooner.
        usual = away or self._in_usual_pause(job_id, gap, now) or self._announced(job_id, gap)
        # A node last heard with its GPUs off work, alive (rank 0 starting a save its peers
        # wait on), may just as well be pausing as its exporter restarts.
        usual = usual or self.job_power.idle_when_heard(
            job_id,
            gap.node,
            last_sample,
            cfg.stall_ratio,
            cfg.spin_util,
            None if stepped is None else stepped[1],
        )
        if usual:
            return None
        # A first pause of the job (a save nobody announced), its writer's exporter restarting
        # as it began, shows all of what follows: a suspect until the silence outlasts it.
        sure = gap.length >= cfg.quiet_confirm_s * US
        # A rank pausing its lines (an unannounced evaluation) while its node's exporter
        # restarts looks the same, unless the job's other GPUs show it working on.
        if (
            trained
            and self.liveness.logs.went_quiet(gap.node, gap.since, now, slack, longest)
            and not self.job_power.worked(job_id, gap.since, now, settle, cfg.stall_ratio)
        ):
            return "it stopped logging", sure
        if self.job_power.stalled(
            job_id, gap.since, now, settle, cfg.stall_ratio, cfg.spin_util, silent
        ):
            return f"the other GPUs of job {job_id} stalled with it", sure
        return None

    def _training(self, progress: pl.DataFrame) -> None:
        """Fold each job's first and newest training step in (a row without a job is none's),
        and the phases it announces."""
        jobs = progress.get_column("job_id")
        steps = (progress.get_column("event").to_numpy() == "step") & present(jobs)
        for job_id, first, newest in spans_by(jobs.to_numpy()[steps], times_us(progress)[steps]):
            known = self.training.get(job_id)
            if known is not None:
                first, newest = min(first, known[0]), max(newest, known[1])
            self.training[job_id] = (first, newest)
        if holds(progress.get_column("event"), tuple(PHASE_OF)):
            self._phases(progress)
        elif self.phases:
            self._phases_end(progress)

    def _phases_end(self, progress: pl.DataFrame) -> None:
        """Close each open phase at its job's line ending it or its next training step, in a
        batch opening none (most of them: a step line of every job's every print): a comparison
        of the columns per job in a phase, not a query."""
        jobs = progress.get_column("job_id").to_numpy()
        events = progress.get_column("event").to_numpy()
        steps = events == "step"
        ends = np.logical_or.reduce([events == event for event in PHASE_END])
        times = times_us(progress)
        for job_id, began in list(self.phases.items()):
            theirs = jobs == job_id
            if (theirs & (ends | (steps & (times > began)))).any():
                del self.phases[job_id]

    def _phases(self, progress: pl.DataFrame) -> None:
        """Open a job's phase at the line announcing it, close it at the line ending it or at
        the job's next training step (a few rows: the lines of phases and of jobs in one)."""
        rows = progress.filter(
            pl.col("job_id").is_not_null()
            & pl.col("event").is_in([*PHASE_OF, *PHASE_END, "step"])
            & (pl.col("event").is_in(list(PHASE_OF)) | pl.col("job_id").is_in(list(self.phases)))
        )
        jobs, events = rows.get_column("job_id").to_list(), rows.get_column("event").to_list()
        for job_id, event, time in zip(jobs, events, times_us(rows), strict=True):
            began = self.phases.get(job_id)
            if event in PHASE_OF:
                self.phases.setdefault(job_id, int(time))
            elif began is not None and (event != "step" or time > began):
                del self.phases[job_id]

    def _announced(self, job_id: str, gap: Gap) -> bool:
        """Whether the job had announced a phase (a save, an evaluation) that had not ended when
        its node went silent: its quiet and its peers' wait are that phase's, until the silence
        lasts or a peer complains."""
        began = self.phases.get(job_id)
        return began is not None and began <= gap.since + round(self.config.slack_s * US)

    def _job_activity(self, logs: pl.DataFrame) -> None:
        if "job_id" not in logs.columns:
            return
        jobs, times = newest_by(logs, "job_id")
        for job_id, time in zip(jobs, times, strict=True):
            last, trained = self.job_logs.last.get(job_id), self.training.get(job_id)
            if last is not None and trained is not None and last >= trained[0]:
                self.pauses[job_id] = max(self.pauses.get(job_id, 0), time - last)
        self.job_logs.observe(jobs, times, arrived=self.liveness.watermark)

    def _in_usual_pause(self, job_id: str, gap: Gap, now: int) -> bool:
        """Whether the job's lines went quiet with the silent node (``gap``) and have been quiet
        no longer than ``pause_factor`` times the longest pause the job took before while
        training (an evaluation, a save, a data loader's stall), as far as ``now`` can tell. A
        job whose other ranks write on is in no pause."""
        quiet = self.job_logs.silence(job_id, now)
        longest = self.pauses.get(job_id)
        if quiet is None or longest is None:
            return False
        bound = self.config.pause_factor * longest
        return gap.length - round(self.config.slack_s * US) <= quiet <= bound

    def _scheduler(self, batch: Batch) -> list[Detection]:
        frame = batch.frame
        ended = self.book.observe(batch).ended
        evidence: list[tuple[str | None, Evidence]] = []
        nodes = frame.filter((pl.col("kind") == "node") & pl.col("node").is_not_null())
        for node, state, reason, time in nodes.select(
            "node", "state", "reason", pl.col("time").dt.epoch("us")
        ).iter_rows():
            flag = failed_state(state or "", self.config.node_states)
            if flag is None:
                continue
            what = f"Slurm set the node {flag}" + (f" ({reason})" if reason else "")
            evidence.append((None, Evidence(time, what, node, role="root", hardware=True)))
        for job_id in ended:
            info = self.book.jobs.jobs[job_id]
            if info.state == NODE_FAIL:
                node = self._likeliest(list(info.all_nodes))
                end = info.ended_at or 0
                item = Evidence(end, "the job ended NODE_FAIL", node, role="root", hardware=True)
                evidence.append((job_id, item))
        return self._emit(evidence)

    def _stalled_before(self, job_id: str, gap: Gap) -> bool:
        """Whether the job's ranks said, since the node went silent, that they had been waiting
        since well before it did (a collective timed out after its 30 minutes): their aborts
        complain of that stall, which the node's silence followed (its ranks aborting with the
        others, its exporter away meanwhile), not of the node's death."""
        stall = self.job_stalls.get(job_id)
        if stall is None:
            return False
        said, began = stall
        slack = round(self.config.slack_s * US)
        return said >= gap.since - slack and began < gap.since - round(self.config.silence_s * US)

    def _signatures(self, frame: pl.DataFrame) -> list[Detection]:
        self.context.observe(frame)
        if holds(frame.get_column("kind"), "crash"):
            self._errors(frame)
        if frame.get_column("waited_us").is_not_null().any():
            self._stalls(frame)
        return self._emit(self._placed(self.fabric.observe(frame)))

    def _errors(self, frame: pl.DataFrame) -> None:
        """Note each job's newest own error and newest complaint about a peer."""
        errors = frame.filter(
            (pl.col("kind") == "crash")
            & pl.col("role").is_in(["root", "collateral"])
            & pl.col("job_id").is_not_null()
        ).select("job_id", "node", "rank", "role", pl.col("time").dt.epoch("us").alias("time_us"))
        errors = errors.filter(~self.complaints.consequences(errors))
        newest = errors.group_by("job_id", "role").agg(pl.col("time_us").max())
        for job_id, role, time in newest.iter_rows():
            state = self.job_collateral if role == "collateral" else self.job_root_errors
            state[job_id] = max(time, state.get(job_id, time))

    def _stalls(self, frame: pl.DataFrame) -> None:
        """Note each job's newest line saying how long a rank had waited, and when it began."""
        said = frame.filter(pl.col("waited_us").is_not_null() & pl.col("job_id").is_not_null())
        newest = said.group_by("job_id").agg(
            pl.col("time").dt.epoch("us").max().alias("said"),
            (pl.col("time").dt.epoch("us") - pl.col("waited_us")).min().alias("began"),
        )
        for job_id, time, began in newest.iter_rows():
            known = self.job_stalls.get(job_id)
            if known is None or time >= known[0]:
                self.job_stalls[job_id] = (time, began)

    def _placed(
        self, evidence: list[tuple[str | None, Evidence]]
    ) -> list[tuple[str | None, Evidence]]:
        """Evidence that names no node (or only the host that reported it) put on the job's node
        whose telemetry stopped first, if any did."""
        placed = []
        for job_id, item in evidence:
            if item.node is None or item.signature == "slurm_cancelled_node_failure":
                info = self.book.jobs.jobs.get(job_id) if job_id else None
                node = self._likeliest(list(info.all_nodes)) if info else None
                item = Evidence(item.time, item.what, node, role="root", hardware=True)
            placed.append((job_id, item))
        return placed

    def _likeliest(self, nodes: list[str]) -> str | None:
        """Of a job's nodes, the one whose telemetry stopped first, if any stopped at all."""
        gaps = [g for g in self.liveness.node_gaps(nodes) if g.length > 0]
        return max(gaps, key=lambda g: g.length).node if gaps else None

    def _emit(
        self, evidence: list[tuple[str | None, Evidence]], confirmed_at: int | None = None
    ) -> list[Detection]:
        return self.book.report(evidence + self.context.of(evidence), _headline, confirmed_at)


def silence_doubt(length_us: int, silence_s: float) -> float:
    """What a corroborated silence leaves in doubt: ``0.4 x 2^(-length / silence_s)`` (0.2 at
    ``silence_s``, as a hardware sign; less as the silence goes on), like the hang's score."""
    return float(0.4 * 0.5 ** (length_us / (silence_s * US)))


def _headline(job_id: str, incident: JobEvidence) -> str:
    culprits = incident.culprits()
    return f"Node {culprits[0] if culprits else '(unknown)'} of job {job_id} failed"
