"""``hang``: a job stopped making progress while it still runs.

Three parts, as Merlion keeps a model's scorer apart from its alarm policy: the *evidence*
(``medic.detectors.hang_evidence``: what the GPUs show and whom it blames;
``medic.detectors.hang_rhythm``: the job's own pauses), the *score*
(``medic.detectors.hang_score``: the silence against the job's step gaps) and the *policy*
(``medic.detectors.hang_policy``: the tier, suspect or confirmed, from one function per kind of
positive evidence and the bound the job's history sets). This module keeps the per-job state,
learns it, and holds the pauses a job may be in (``HangDetector.expected``: one method per kind
of expected pause).

A hung job prints nothing until NCCL's watchdog fires 10 to 30 minutes later. This detector
learns, per job, how long the gaps between training steps usually are (river rolling quantile
over clean gaps, scored before learned, flagged gaps never learned) and fires when the current
silence is improbable for that job: longer than ``gap_factor`` times its p99 gap and than
``min_silence_s``. The end of training or a cancel stops the watch; so does, where no
scheduler feed says a job ended, telemetry that names jobs showing its GPUs released.

Telemetry corroborates (``medic.detectors.hang_evidence``): while the job's GPUs are pegged
but draw much less power than when the job progressed (spinning in an NCCL wait), or one rank's
GPU stopped while the others spin, for ``corroborated_hold_s``, the silence is suspicious sooner:
past ``corroborated_gap_factor`` times the p99 gap and ``corroborated_silence_s``. When all
that shows is one rank's GPU idle, reporting itself idle, the GPUs must have shown it for
``stall_silence_s`` (a data-loader stall looks the same for up to a minute), whatever the
silence: measured on the telemetry's own timestamps, not on the step lines, whose silence a log
shipper's delivery delay inflates by up to its batching interval. While they work (evaluation,
training without printing) the job gets ``working_silence_s``; while they all idle (a checkpoint
or data stall that prints nothing) ``idle_silence_s``, each counted from the end of the GPUs'
previous quiet spell of another kind (a save after an evaluation) as well as from the last
step, and the next step is due counting from the end of such a spell, unless it ended within the
job's usual step gap (a job printing every minute trains unprinted between its lines). GPUs
corroborating a hang for ``spin_hold_s`` fire even past a long step gap, and are all that
watches a job printing no progress at all (timed from the snapshot that first showed them so).

Healthy jobs spin too: in a synchronous checkpoint the ranks that do not write wait in a
barrier, GPUs pegged at low power, as NCCL kernels busy-wait; an evaluation on some ranks or a
data-loader stall does the same. So an open checkpoint or evaluation phase is never a hang before
its own allowance runs out, learned per job: ``phase_factor`` times the longest such phase the
job has had (at least ``phase_floor_s``), ``phase_allowance_s`` before it finished one, unless
the GPUs show no one writing (every rank of a checkpoint in the wait for ``spin_hold_s``: a
save always has writers out of it). A spell of
GPUs corroborating the same way (spinning, a rank's GPU stopped) that ended by itself with no
phase printed (a checkpoint or stall the job does not announce) teaches the job's spell
allowance for that state the same way: the next one fires only past ``phase_factor`` times the
longest. A spell in which only writers are out of the wait (rank 0's GPU, as a single-writer
save leaves it: the Hugging Face Trainer's process zero, Lightning's global rank 0; or the last
of the writers seen out of the wait on several nodes at once, one per node or every rank, idle
or copying their shards in bursts) is a save whether or not it was announced: held like a
checkpoint phase, learned from the job's earlier such spells. Any other rank apart is held only
``stall_silence_s``, and a rank apart on a node whose kernel reports a process blocked on I/O
(a dead NFS server) gets no allowance at all, nor the stall's hold.

A job's own rhythm (``medic.detectors.hang_rhythm``) holds what its earlier pauses taught:
a silence that begins at the step interval its pauses came at (an evaluation or a save every
N steps, announced or not), or the same GPU apart again as in a stall that ended by itself, is
expected for ``phase_factor`` times the longest such pause; the first pause of a kind has only
the thresholds above. GPUs waiting for one of theirs that computes (busy at an evaluation's
power, as rank 0 evaluating alone leaves it) do not corroborate: the others wait for a rank at
work, not in a frozen collective, so such a silence is judged by the job's step gaps alone.

A job whose own ranks logged a crash (a traceback, a CUDA error, an out-of-memory kill) since
its last step is crashing, not hung: the crash detector reports it, and the crashed rank's GPU,
its context still held while the launcher tears the job down, must not read as a stuck GPU.

A culprit node is named only with evidence against it (hardware counters, a stuck GPU engine,
telemetry lost as the job stopped and not seen in the wait since, a hardware error in its kernel
log); otherwise the stuck ranks are named with no node, so the rules restart the job without
draining a healthy node.
When all the evidence is that the blamed nodes stopped reporting, the detection's kind is
``node_failure``.

The score is ``1 - 2^(-silence / threshold)``, discounted by the GPUs' corroboration
(``score_of``): 0.5 when the silence alone reaches its threshold, 0.8 when the GPUs corroborate
too, rising towards 1 as the silence goes on. ``evidence`` carries what it was made of.

Some hangs say so themselves: an NCCL watchdog timeout, a heartbeat monitor, Horovod's stall
inspector, NCCL's RAS declaring a process dead or a fault-tolerance rank monitor prints that a
collective or a rank has been stuck for so long (the ``hang`` signatures). Such a line is a hang
at once, its onset as far back as the line says (the collective "ran for" its milliseconds),
whatever the step model thinks.

Telemetry costs little while jobs progress: a snapshot of every job is taken from
``baseline_sample_s`` of telemetry every ``baseline_every_s``; full windows are kept only for
jobs silent for ``watch_after_s`` or more, or whose snapshot looks hung.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, ClassVar

import numpy as np
import polars as pl
from river import stats

from medic.config import Count, Fraction, NonNegative, Percent, Positive, PositiveCount, Range
from medic.detectors.attribution import excerpt
from medic.detectors.base import CONFIRMED, Detection
from medic.detectors.hang_evidence import (
    CORROBORATING,
    NO_TELEMETRY,
    JobTelemetry,
    culprits,
    held_us,
    verdict,
)
from medic.detectors.hang_policy import Silence, report_tier, tier_of
from medic.detectors.hang_rhythm import PAUSE, JobRhythm, kind_of
from medic.detectors.hang_score import holding_s, score_of, threshold_us
from medic.detectors.incidents import ReadsLiveness
from medic.detectors.liveness import Liveness
from medic.detectors.online import QuantileScorer
from medic.detectors.progress_state import JobProgress, WatchedJobs, WatchesJobs
from medic.detectors.telemetry import COUNTERS, GPU_IDLE_REASON, GpuWindows, Window
from medic.frames import holds, times_us
from medic.ingest.base import Batch
from medic.parse.catalogue import Catalogue, builtin_catalogue
from medic.parse.signatures import UNMATCHED
from medic.timeutil import US

CLOCK_SLACK_US = 5 * US
"""Two nodes' clocks, and a line's time against the moment it reports, may differ by this much
(NTP keeps clocks within milliseconds, within seconds where it drifts; a launcher stamps a line
as it passes it on)."""
SPACING_EVERY_US = 10 * US
"""How often the cluster's telemetry spacing is read again once known."""
BLOCKED_IO = ("hung_task_blocked",)
"""Signatures of a node's kernel reporting a task in uninterruptible sleep past its hung-task
timeout (120 s by default): a rank apart from the collective there is stuck, not saving."""
DEATH_REPORTS = ("nccl_ras_peer_dead", "nccl_ras_dead_report")
"""Signatures of NCCL's RAS declaring a process of the job dead (unreachable for a minute)."""
STORAGE_AWAY = ("nfs_server_not_responding",)
"""Signatures of a node's NFS client waiting on its server (the RPC's retries ran out; a hard
mount retries for as long as the server is away): a rank apart there waits on storage, not
saving, but a server failing over or back from a blip answers again and the job goes on."""
STACK_DUMPS = ("pyspy_thread_dump", "gdb_thread_dump")
"""Signatures of a process's threads dumped by a tool: taken of a live process, where its
threads wait; after the job's own fatal end (gdb opening its core file: "Program terminated
with signal") they are its last state, no wait."""


@dataclass(frozen=True)
class HangConfig:
    """Parameters of the hang detector; every one can be swept by backtests."""

    min_silence_s: Positive = 60.0
    """Never fire on a shorter silence (without corroborating telemetry). Lower: hangs of jobs
    that print often are found sooner; more healthy pauses are suspected."""
    corroborated_silence_s: Positive = 45.0
    """Shortest silence that fires while telemetry shows the job's GPUs waiting. Lower: sooner
    on corroborated hangs; more barrier waits and short saves suspected."""
    corroborated_gap_factor: Positive = 1.5
    """... and it must exceed this many times the job's ``gap_quantile`` step gap (lower:
    sooner, and more of a slow-printing job's gaps suspected)."""
    stall_silence_s: Positive = 90.0
    """While the only sign is a rank left without work (its GPU idle, and reporting itself idle)
    as the others wait, the GPUs must have shown it this long (telemetry time): a data-loader
    stall or a rank's own host work looks like that for up to a minute. (A save written by rank 0
    alone, or by the last of one writer per node, is held as a checkpoint phase instead.) Where
    that rank's node reports its NFS server not responding, the rank waits on storage: a
    suspect at once, confirmed once the GPUs have shown it this long (a server failing over
    answers again within a minute or so, and its jobs go on); where its kernel reports a task
    blocked past its hung-task timeout, confirmed at once. Lower: a rank stuck in host code is
    found sooner; longer stalls, and storage blips, suspected or confirmed."""
    corroborated_hold_s: NonNegative = 20.0
    """The GPUs must have corroborated this long (two windows) before a silence counts as
    corroborated. Lower: sooner; a barrier's edge or a stall's first seconds counts too."""
    gap_quantile: Annotated[float, Range(gt=0, le=1)] = 0.99
    """Quantile of the job's step gaps the silence is compared with. Higher: a job's rare long
    gaps raise its bar (fewer suspects, later detections)."""
    gap_factor: Positive = 3.0
    """Fire when the silence exceeds this many times the job's ``gap_quantile`` step gap.
    Lower: sooner; more unannounced pauses suspected."""
    gap_window: PositiveCount = 256
    """Step gaps the per-job model keeps. More: a steadier quantile, slower to follow a job
    whose pace changes, more state."""
    grace_gaps: Count = 8
    """Gaps learned before the model is trusted; until then ``cold_silence_s`` applies. Fewer:
    a job's first hang is found sooner; a quantile of few gaps misjudges its pauses."""
    cold_silence_s: Positive = 600.0
    """Silence tolerated before ``grace_gaps`` are learned (or ``gap_factor`` times the longest
    gap learned so far, if longer). Lower: hangs at start-up found sooner; long model builds
    and first saves suspected."""
    phase_allowance_s: NonNegative = 600.0
    """Silence tolerated while a checkpoint or an evaluation runs, or while only the writers of
    a save are out of the wait (announced or not), before the job has finished one of that kind
    (the cold start: synchronous saves of large models take minutes). Lower: a hang in a job's
    first save is found sooner; a slow first save is suspected."""
    phase_factor: Positive = 3.0
    """Once it has: this many times the longest such phase (or unannounced spell of GPUs in
    the same state that ended by itself, or pause of the kind its rhythm expects: higher holds
    a recurring pause longer, and a hang at that step too) this job has had ..."""
    phase_floor_s: NonNegative = 120.0
    """... and, for a phase, at least this long (lower: hangs in short phases sooner; a phase
    that varies more than its longest so far is suspected)."""
    working_silence_s: Positive = 1800.0
    """Silence tolerated while the GPUs work (not pegged, or drawing more than a wait does).
    Lower: a livelock keeping GPUs busy is found sooner; long unprinted evaluations suspected."""
    idle_silence_s: Positive = 480.0
    """Silence tolerated while most GPUs idle, or one rank per node does as the others wait (a
    checkpoint or data stall printing nothing). Lower: hangs with idle GPUs found sooner; long
    unannounced saves suspected."""
    spin_hold_s: Positive = 120.0
    """GPUs corroborating a hang this long fire even if the step model would wait longer (never
    inside an open phase or a learned spell allowance, except a checkpoint or an evaluation in
    which every GPU sat in the wait this long: no rank writing or evaluating, and a phase in
    which a GPU looked stuck this long); it is also all that fires for a job printing no
    progress. Lower: sooner; longer healthy waits suspected."""
    watch_after_s: NonNegative = 15.0
    """Silence after which the job's telemetry is kept in full ``window_s`` windows. Lower:
    more jobs watched in full (cost); higher: a hang's first seconds of telemetry are lost."""
    window_s: Positive = 10.0
    """Telemetry window of a silent job (its GPUs' means per window). Shorter: a state change
    seen sooner, noisier states, more work per silent job."""
    carry_s: NonNegative = 35.0
    """A GPU missing from a silent job's window keeps its latest values this long, or the
    cluster's usual telemetry spacing and half a window where that is longer (telemetry sampled
    every 15 or 30 s leaves most GPUs out of a 10 s window, every minute most windows; a node
    missing longer is taken for stopped only once overdue by its own sample spacing). Longer:
    sparse telemetry judged on every GPU; a GPU that stopped reporting is noticed later."""
    baseline_every_s: Positive = 60.0
    """Period of a progressing job's healthy snapshots. Shorter: a fresher baseline, more work
    per progressing job."""
    baseline_sample_s: Positive = 30.0
    """A progressing job's healthy snapshot: this much telemetry out of every baseline period,
    raised to the cluster's telemetry spacing where that is longer (a node scraped every minute
    would never be in a 30 s sample taken outside its scrapes), and all of the period until the
    spacing is known. More: more work per progressing job."""
    busy_util: Percent = 50.0
    """A GPU at this utilisation or more is working (higher: more windows read as waiting or
    idle)."""
    idle_util: Percent = 10.0
    """A GPU below this utilisation is idle (higher: a rank barely working counts as left
    without work)."""
    spin_util: Percent = 95.0
    """A GPU at this utilisation or more is pegged (working, or spinning in a wait); lower
    reads more busy GPUs as possibly spinning."""
    spin_power_ratio: Fraction = 0.5
    """GPUs pegged at ``spin_util`` or more while drawing less than this share of the job's
    progressing power (what its work draws, over the share of time its GPUs work: what it
    would draw pegged) are spinning in a wait. Higher: waits seen sooner; a light evaluation
    may read as a wait."""
    stuck_power_ratio: Fraction = 0.6
    """A pegged GPU drawing less than this share of its spinning peers' power has stopped.
    Higher: more stuck GPUs named (their nodes drained); power noise may name one."""
    power_window: PositiveCount = 9
    """Healthy snapshots whose median power makes the job's power baseline (river rolling
    median: a stand-in snapshot taken while the job was still warming up is outvoted). More:
    steadier, slower to follow a job whose power changes."""
    max_culprit_fraction: Fraction = 0.5
    """Evidence pointing at more of the job than this blames nobody. Higher: more nodes
    drained on shared evidence (a fabric-wide event blamed on many)."""
    kernel_lookback_s: NonNegative = 120.0
    """A hardware error line in a node's kernel log this long before the silence began, or
    during it, is evidence against the node. Longer: an older, unrelated error may blame a
    node; shorter: a fault logged just before the silence is missed."""
    confirm_floor_s: Positive = 180.0
    """A hang with no positive evidence (no stuck GPU, hardware counter or kernel error
    against a node, no rank blocked on I/O: silence, and GPUs waiting, alone) is a suspect until
    its silence lasts this long, and one rank's GPU idle while its peers wait, or every GPU
    waiting, is evidence only once it has been so this long; so is a job's own line reporting a
    shorter wait than this (a stall inspector's one-minute warning, not a collective's timeout)
    until its reports span this long ... Lower confirms (and acts on) such hangs sooner; higher
    spares healthy jobs whose first unannounced pause, first data-loader stall, or first
    unannounced evaluation or save by rank 0 (its peers all waiting), outlasts the thresholds
    above."""
    confirm_factor: Positive = 2.0
    """... and this many times the longest pause the job has had (its longest step gap, save or
    spell of waiting GPUs), or, for a rank apart, the longest spell of one rank apart it came
    back from (a stall), or, for every GPU waiting, the longest such spell it came back from;
    also how much longer than the job's longest pause a silence must be before a node whose
    telemetry stopped in it is blamed (an exporter restarting in a pause), and how much longer
    silence alone must last while the job's GPUs, seen before, are not seen. Higher spares jobs
    whose pauses vary more; lower confirms sooner in jobs that pause long (a job whose longest
    pause is 150 s confirms after 300 s)."""
    forget_after_s: Positive = 7200.0
    """Drop a job not heard of for this long (no scheduler end seen). Shorter: less state; a
    job silent that long loses what was learned of it."""

    def __post_init__(self) -> None:
        if self.baseline_sample_s > self.baseline_every_s:
            raise ValueError("baseline_sample_s must not exceed baseline_every_s")


@dataclass
class JobWatch:
    """The hang model's state for one job."""

    gaps: QuantileScorer
    telemetry: JobTelemetry
    longest_spell_us: dict[str, int] = field(default_factory=dict)
    """Per GPU state (``spinning``, ``rank stopped``, ``gpu stuck``): the longest spell of
    GPUs corroborating that way that ended by itself outside a phase. A healthy job's data
    stall (one rank idle) says nothing about how long all its GPUs may spin."""
    longest_save_us: int | None = None
    """The longest spell in which only the writer's GPU was out of the wait (a save by one
    rank) that ended by itself."""
    saved_since: int | None = None
    """The start of the latest spell that showed a save (only writers out of the wait): a
    rank that goes apart later in it (a data-loader stall as training resumes) is held as the
    save's tail, as an announced save's phase holds it until the next step."""
    longest_apart_us: int = 0
    """The longest spell of one GPU apart alone, not the writer's, that ended by itself (a
    data-loader stall): how long a rank apart is no evidence of a hang in this job."""
    longest_all_waiting_us: int = 0
    """The longest spell in which every GPU spun in the wait (``JobTelemetry.all_spinning_since``)
    that a fresh step ended (the job recovered: rank 0 evaluating or saving unannounced, its
    peers in the collective): how long all GPUs waiting is no evidence of a hang in this job."""
    rhythm: JobRhythm = field(default_factory=JobRhythm)
    """The pauses the job has taken and the step interval they come at
    (``medic.detectors.hang_rhythm``)."""
    scheduled_us: int | None = None
    """How long a scheduled pause after the job's latest step may last on its rhythm
    (``JobRhythm.expected_us``), None until asked: kept until the next step line changes the
    rhythm, as a silence asks it every second."""
    longest_gap_us: int = 0
    """The job's longest step gap of any kind (pauses included)."""
    step_us: int | None = None
    """How long the job's latest training step took, as its line says (Megatron-LM's elapsed
    time per iteration) or as its gap over the steps it advanced tells; None before one."""
    suspect: Detection | None = None
    """The suspect reported for the current silence, until it is confirmed or the job goes on."""
    dead: dict[str, str | None] = field(default_factory=dict)
    """The processes NCCL's RAS declared dead since the job's latest step (host and pid, its
    address, or the report's line) -> the host each ran on, where the line says."""
    alarmed: bool = False
    """A confirmed hang was reported for the current silence."""
    suspicious: bool = False
    """Its latest snapshot looked hung (jobs that print no progress)."""


ExpectedPause = Callable[[str, JobProgress, JobWatch, int, int, str], int]
"""(job id, its progress, its watch, now, how long the GPUs held, their state) -> the silence a
pause the job may be in is allowed."""


class HangDetector(WatchesJobs, ReadsLiveness):
    """Fires when a job's silence is improbable for its own step rhythm."""

    name: ClassVar[str] = "hang"
    streams: ClassVar[frozenset[str]] = frozenset(
        {"progress", "gpu", "gpu_latest", "scheduler", "signatures"}
    )
    Config: ClassVar[type] = HangConfig

    uses_catalogue = True

    def __init__(
        self, config: HangConfig | None = None, catalogue: Catalogue | None = None
    ) -> None:
        c = self.config = config or HangConfig()
        catalogue = catalogue or builtin_catalogue()
        # Xids NVIDIA's catalogue says to ignore (a row remapping recorded, an informational
        # event) are no evidence against a node (Xid 63 comes and goes on healthy GPUs).
        benign = catalogue.xids.filter(pl.col("kind") == "none").get_column("code").to_list()
        self.jobs = WatchedJobs(c.forget_after_s)
        self.baseline = GpuWindows(
            c.baseline_every_s, means=("util", "power_w"), sample_s=c.baseline_sample_s
        )
        self.silent = GpuWindows(
            c.window_s,
            means=("util", "power_w"),
            counters=COUNTERS,
            throttle_mask=GPU_IDLE_REASON,
            xid=True,
            benign_xids=benign,
        )
        """A silent job's windows; ``throttled`` is the share of samples in which the GPU
        reported itself idle."""
        self.watch: dict[str, JobWatch] = {}
        self.kernel: dict[str, tuple[int, str]] = {}
        """node -> (time, signature) of the latest hardware error its kernel logged."""
        self._silent_jobs: set[str] = set()
        self.stuck: dict[str, int] = {}
        """Job -> time of the line that reported it stuck (reported once until it progresses)."""
        self.carrying = c
        """The config silent windows are judged with: ``carry_s`` raised to the cluster's
        telemetry spacing (``_carrying``), set each time the spacing is read."""
        self.spacing_us = 0
        """The cluster's usual telemetry spacing (0: not known yet;
        ``Liveness.cluster_cadence_us``), read every ``SPACING_EVERY_US`` of event time once
        known: exporters keep their schedule, and the median over every node costs a sort."""
        self.spacing_read_at = 0
        self.warned: dict[str, Detection] = {}
        """Job -> the suspect its own lines reported, a wait shorter than a collective's timeout
        (``report_tier``), until it progresses or its reports confirm the hang."""
        self.crashed: dict[str, int] = {}
        """Job -> time of the newest crash line of one of its own ranks."""
        self.blocked: dict[str, int] = {}
        """node -> time of its kernel's latest line reporting a task blocked (``BLOCKED_IO``)."""
        self.storage: dict[str, int] = {}
        """node -> time of its NFS client's latest line reporting its server away
        (``STORAGE_AWAY``)."""
        self.feed_at: int | None = None
        """Time of the newest GPU sample of any job: how far the telemetry feed has come."""
        self.liveness = Liveness()
        """Each node's newest telemetry sample and usual spacing (shared with the other
        detectors that read it, which count it in their state; a row per node and GPU of the
        cluster, pruned after ``forget_after_s``): when a node's telemetry stopped."""
        self.expected: tuple[ExpectedPause, ...] = (self._allowance_us, self._rhythm_us)
        """The pauses a silent job may be in, each the silence it is allowed (0: none): a
        new kind of expected pause is one more method here, not one more clause in ``_check``.
        No evidence cuts them short; the silence thresholds still apply past them."""

    def state_size(self) -> int:
        return (
            len(self.jobs)
            + len(self.watch)
            + len(self.stuck)
            + len(self.warned)
            + len(self.crashed)
            + len(self.kernel)
            + len(self.blocked)
            + len(self.storage)
            + self.baseline.state_size()
            + self.silent.state_size()
        )

    def update(self, batch: Batch) -> list[Detection]:
        if batch.stream == "scheduler":
            self._forget(self.jobs.observe_scheduler(batch))
        elif batch.stream == "progress":
            self._learn(batch.frame)
        elif batch.stream == "signatures":
            self._kernel_errors(batch.frame)
            self._blocked_io(batch.frame)
            self._declared_dead(batch.frame)
            self._crashes(batch.frame)
            return self._reported_stuck(batch.frame)
        elif batch.stream == "gpu_latest":
            self.liveness.observe_gpu(batch.frame)
        elif batch.stream == "gpu":
            times = times_us(batch.frame)
            if times.size:
                self.feed_at = max(self.feed_at or 0, int(times.max()))
            self.baseline.add(batch.frame, self.jobs.placement)
            self.silent.add(batch.frame, self.jobs.placement, self._silent_jobs)
        return []

    def _kernel_errors(self, hits: pl.DataFrame) -> None:
        """Keep each node's latest hardware error line (a GPU or node fault of error or fatal
        severity, logged by the node itself rather than a peer): of lines logged in the same
        microsecond, the one that came last (a stable sort, so a replay that parses batches
        together and one that parses them apart keep the same line)."""
        if not (
            holds(hits.get_column("role"), "root")
            and holds(hits.get_column("severity"), ("fatal", "error"))
            and holds(hits.get_column("implicates"), ("gpu", "node"))
        ):
            return
        errors = hits.filter(
            pl.col("implicates").is_in(["gpu", "node"])
            & pl.col("severity").is_in(["fatal", "error"])
            & (pl.col("role") == "root")
            & pl.col("node").is_not_null()
        )
        if errors.is_empty():
            return
        latest = errors.group_by("node").agg(
            pl.col("time").to_physical().max(),
            pl.col("signature").sort_by("time", maintain_order=True).last(),
        )
        for node, time, signature in latest.iter_rows():
            if node not in self.kernel or self.kernel[node][0] <= time:
                self.kernel[node] = (time, signature)

    def _blocked_io(self, hits: pl.DataFrame) -> None:
        """Keep each node's latest kernel line reporting a task blocked or its storage away."""
        if not holds(hits.get_column("signature"), (*BLOCKED_IO, *STORAGE_AWAY)):
            return
        for signatures, marks in ((BLOCKED_IO, self.blocked), (STORAGE_AWAY, self.storage)):
            lines = hits.filter(
                pl.col("signature").is_in(signatures) & pl.col("node").is_not_null()
            )
            latest = lines.group_by("node").agg(pl.col("time").dt.epoch("us").max())
            for node, time in latest.iter_rows():
                marks[node] = max(time, marks.get(node, time))

    def _declared_dead(self, hits: pl.DataFrame) -> None:
        """Keep the processes NCCL's RAS declared dead in each watched job's silence."""
        if not holds(hits.get_column("signature"), DEATH_REPORTS):
            return
        lines = hits.filter(
            pl.col("signature").is_in(DEATH_REPORTS) & pl.col("job_id").is_not_null()
        )
        process = pl.coalesce(pl.concat_str("host", pl.lit(":"), "pid"), "peer", "message").alias(
            "process"
        )
        for job_id, key, host in lines.select("job_id", process, "host").iter_rows():
            watch = self.watch.get(job_id)
            if watch is not None:
                watch.dead.setdefault(key, host)

    def _crashes(self, hits: pl.DataFrame) -> None:
        """Keep each job's newest crash line of its own (not a peer's complaint)."""
        if not holds(hits.get_column("kind"), "crash"):
            return
        crashes = (
            hits.filter(
                (pl.col("kind") == "crash")
                & (pl.col("role") == "root")
                & pl.col("job_id").is_not_null()
            )
            .group_by("job_id")
            .agg(pl.col("time").to_physical().max())
        )
        for job_id, time in crashes.iter_rows():
            self.crashed[job_id] = max(time, self.crashed.get(job_id, time))

    def advance(self, watermark: int) -> list[Detection]:
        if not self.spacing_us or watermark - self.spacing_read_at >= SPACING_EVERY_US:
            self.spacing_us = self.liveness.cluster_cadence_us()
            self.spacing_read_at = watermark
            self.baseline.cover(self.spacing_us)
            self.carrying = self._carrying()
        for window in self.baseline.close(watermark):
            self._fold_baseline(window)
        for window in self.silent.close(watermark, empty=False):  # no rows: no job to fold
            self._fold_silent(window)
        self._forget(self.jobs.release(watermark))
        horizon = watermark - round(self.config.forget_after_s * US)
        self.kernel = {node: hit for node, hit in self.kernel.items() if hit[0] >= horizon}
        self.blocked = {node: time for node, time in self.blocked.items() if time >= horizon}
        self.storage = {node: time for node, time in self.storage.items() if time >= horizon}
        self.liveness.forget_before(horizon)
        for state in (self.stuck, self.crashed):
            for job_id in [j for j, t in state.items() if t < horizon]:
                del state[job_id]
        for job_id in [j for j, d in self.warned.items() if (d.onset or 0) < horizon]:
            del self.warned[job_id]
        found = []
        watched = set()
        gone = []
        for job_id, watch in self.watch.items():
            job = self.jobs.progress.jobs.get(job_id)
            if self.jobs.done(job_id) or (job is None and watch.telemetry.last_seen < horizon):
                gone.append(job_id)
                continue
            if self._needs_windows(job, watch, watermark):
                watched.add(job_id)  # alarmed too: how long the spell lasts is learned
            if watch.alarmed:
                continue
            detection = self._check(job_id, job, watch, watermark)
            if detection is not None and self._left_its_gpus(job_id, job, watch):
                gone.append(job_id)  # it ended with no word of its end (no scheduler feed)
                continue
            if detection is None or (watch.suspect is not None and not detection.confirmed):
                continue
            if detection.confirmed:
                watch.alarmed = True
                if watch.suspect is not None:  # a suspect confirmed keeps its onset
                    detection = dataclasses.replace(detection, onset=watch.suspect.onset)
            else:
                watch.suspect = detection
            found.append(detection)
        self._forget(gone)
        resumed = self._silent_jobs - watched
        for job_id in resumed:
            if job_id in self.watch:
                self.watch[job_id].telemetry.resume()
        self.silent.forget(resumed)
        self._silent_jobs = watched
        return found

    def _needs_windows(self, job: JobProgress | None, watch: JobWatch, now: int) -> bool:
        """Full telemetry windows are kept for jobs silent a while, and for jobs that print
        no progress while their snapshot looks hung."""
        if job is not None and job.last_step_at is not None:
            return _silence(job, now) >= self.config.watch_after_s * US
        return watch.suspicious or watch.telemetry.corroborated_since is not None

    # -- learning -------------------------------------------------------------------------

    def _learn(self, rows: pl.DataFrame) -> None:
        config, stuck = self.config, self.stuck
        for job_id, time, step, gap_us, fresh, clean, took_s, _, _ in self.jobs.observe_progress(
            rows
        ):
            watch = self.watch.get(job_id)
            if watch is None:
                watch = self._watch(job_id)
            telemetry = watch.telemetry
            took = _step_us(took_s, gap_us if clean else None, step, watch.rhythm.last_step)
            watch.step_us = took if took is not None else watch.step_us
            self._learn_rhythm(job_id, watch, time, gap_us)
            watch.rhythm.step(step)
            watch.scheduled_us = None
            waited = telemetry.all_spinning_spell(time)
            if fresh and waited is not None:
                watch.longest_all_waiting_us = max(watch.longest_all_waiting_us, waited)
            telemetry.all_spinning_ended = None
            if telemetry.corroborated_since is not None or telemetry.ended is not None:
                self._learn_spell(watch, time, fresh, self._writer(job_id, watch))  # else: no spell
            watch.alarmed, watch.suspect = False, None
            watch.dead.clear()
            stuck.pop(job_id, None)
            self.warned.pop(job_id, None)
            if gap_us is None:
                continue
            watch.longest_gap_us = max(watch.longest_gap_us, gap_us)
            if not clean:
                continue
            gap_s = gap_us / US
            ratio = watch.gaps.score(gap_s)
            if ratio is None or ratio < config.gap_factor:
                watch.gaps.learn(gap_s)
                telemetry.progressed(time, config)

    def _learn_rhythm(self, job_id: str, watch: JobWatch, time: int, gap_us: int | None) -> None:
        """Remember the pause a step at ``time`` ended, if it was one: a spell of one GPU
        apart from its waiting peers that ended by itself (a stall of that GPU, however long
        the job's gaps), else a step gap the step model would not learn (a scheduled pause,
        announced or not)."""
        telemetry, rhythm = watch.telemetry, watch.rhythm
        spell = self._spell(telemetry, time)
        if spell is not None:
            kind = kind_of(spell[1], self._writer(job_id, watch))
            if kind != PAUSE:
                rhythm.learn(rhythm.last_step, spell[0], kind)
                watch.longest_apart_us = max(watch.longest_apart_us, spell[0])
                return
        if gap_us is not None and self._paused(watch, gap_us):
            rhythm.learn(rhythm.last_step, gap_us, PAUSE)

    @staticmethod
    def _spell(telemetry: JobTelemetry, time: int) -> tuple[int, list[tuple[str, int]]] | None:
        """(length, GPUs apart) of the spell of corroborating GPUs open at ``time``, else of
        the latest one that ended; None without one."""
        since, apart = telemetry.corroborated_since, telemetry.apart
        if since is not None and since < time:
            length = time - since
        elif since is None and telemetry.ended is not None and telemetry.ended.since < time:
            ended = telemetry.ended
            length, apart = ended.end - ended.since, ended.apart
        else:
            return None
        gpus = [] if apart is None else [(str(n), int(g)) for n, g in apart.iter_rows()]
        return length, gpus

    def _paused(self, watch: JobWatch, gap_us: int) -> bool:
        """Whether a step gap was a pause: more than ``gap_factor`` times the job's
        ``gap_quantile`` step gap (its longest before that is known), the gaps its step model
        does not learn. A job with no gap yet has no measure of one."""
        gaps = watch.gaps
        usual = gaps.reference if gaps.ready else gaps.longest
        return usual is not None and gap_us > self.config.gap_factor * usual * US

    @staticmethod
    def _learn_spell(
        watch: JobWatch, time: int, fresh: bool, writer: tuple[str, int] | None
    ) -> None:
        """A spell of corroborating GPUs that a step at ``time`` ended (``fresh``: ``Step``):
        the job spins like this when healthy. A spell in which only writers were out of the
        wait (``JobTelemetry.saving``) is one of the job's saves, learned whether or not a phase
        line came with it (a save line logged only at its end opens no phase during it), and
        also when the telemetry showed its end before the step line came (a log shipper's
        delay): saves recur at the job's cadence. The other spells are learned per GPU state
        while still open, outside a phase (an announced phase is learned as a phase); a
        data-loader stall that ended is no rule for how long the next rank apart may stay so.
        Learned even if it was alarmed: a job that went on by itself was not hung, and should
        not alarm at every save."""
        telemetry, ended = watch.telemetry, watch.telemetry.ended
        since = telemetry.corroborated_since
        if since is not None and since < time:
            spell = time - since
            states, saving = frozenset(telemetry.spell_states), telemetry.saving(writer)
        elif since is None and ended is not None and ended.since < time:
            telemetry.ended = None
            if not ended.saving(writer):
                return  # only saves recur at the job's cadence; a stall that ended is no rule
            spell, states, saving = ended.end - ended.since, ended.states, True
        else:
            return  # no spell, or one that began after this step (its line delivered late)
        if saving:
            watch.longest_save_us = max(spell, watch.longest_save_us or spell)
            return
        if not fresh:
            return
        longest = watch.longest_spell_us
        for state in states:
            longest[state] = max(spell, longest.get(state, spell))

    def _watch(self, job_id: str) -> JobWatch:
        watch = self.watch.get(job_id)
        if watch is None:
            c = self.config
            watch = self.watch[job_id] = JobWatch(
                gaps=QuantileScorer(c.gap_quantile, c.gap_window, c.grace_gaps),
                telemetry=JobTelemetry(
                    power=stats.RollingQuantile(q=0.5, window_size=c.power_window)
                ),
            )
        return watch

    def _fold_baseline(self, window: Window) -> None:
        """A snapshot of a job outside any phase becomes its healthy baseline once a step
        ends an ordinary gap after it; a job that prints no progress is watched through its
        snapshots alone."""
        for job_id, rows in _by_job(window):
            if self.jobs.done(job_id):
                continue
            watch, job = self._watch(job_id), self.jobs.progress.jobs.get(job_id)
            gpus = rows[["node", "gpu", "util", "power_w"]]  # columns picked without a query
            if job is None or job.last_step_at is None:
                watch.suspicious = watch.telemetry.glance(gpus, window.end, self.config)
            elif job.phase is None:
                watch.telemetry.snapshot(gpus, window.end, self.config)

    def _fold_silent(self, window: Window) -> None:
        for job_id, rows in _by_job(window):
            watch = self.watch.get(job_id)
            if watch is not None:
                watch.telemetry.observe_silence(rows, window.end, self.carrying)

    def _carrying(self) -> HangConfig:
        """The config silent windows are judged with: GPUs keep their latest values for
        ``carry_s``, or the cluster's usual telemetry spacing (``spacing_us``) and half a window
        where that is longer: a cluster scraped every minute leaves a GPU out of most windows
        between two of its samples, without having stopped."""
        c = self.config
        carry = max(c.carry_s, self.spacing_us / US + c.window_s / 2)
        return c if carry == c.carry_s else dataclasses.replace(c, carry_s=carry)

    # -- deciding -------------------------------------------------------------------------

    def _reported_stuck(self, signs: pl.DataFrame) -> list[Detection]:
        """A hang per job whose lines say it is stuck; the onset is the earliest moment a line
        says it has been stuck since (line time minus the time it reports). Its ranks are those
        its lines name as the root: a hang entry's, and the ranks a line no entry matched
        names at fault beside it (the stall report's "[missing ranks: 0]" under its warning);
        the hosts of the processes its lines name (NCCL's RAS: "Process P on node H") are said.
        Confirmed, unless the wait the lines report is shorter than a collective's timeout and
        the job's reports of the stall do not span its bound yet (``report_tier``): a suspect."""
        if not holds(signs.get_column("kind"), "hang"):
            return []  # a job's rows are kept only beside a hang line of its own
        signs = _without_posthumous_dumps(signs)
        said = pl.col("_hang")
        named = pl.col("signature").str.starts_with(UNMATCHED) & (pl.col("role") == "root")
        # a node's kernel on blocked I/O (context) reports no job
        hang = (pl.col("kind") == "hang") & (pl.col("role") != "context")
        rows = (
            signs.with_columns(hang.alias("_hang"))
            .filter(
                (said | named)
                & pl.col("job_id").is_not_null()
                & ~pl.col("job_id").is_in(list(self.stuck))
            )
            .filter(said.any().over("job_id"))
        )
        if rows.is_empty():
            return []
        time = pl.col("time").dt.epoch("us")
        jobs = (
            rows.with_columns(
                time.alias("time_us"), (time - pl.col("waited_us").fill_null(0)).alias("onset")
            )
            .sort("onset")
            .group_by("job_id", maintain_order=True)
            .agg(
                pl.col("time_us").filter(said).min(),
                pl.col("time_us").filter(said).max().alias("latest"),
                pl.col("onset").filter(said).min(),
                pl.col("waited_us").filter(said).max(),
                said.sum().alias("lines"),
                pl.col("signature").filter(said).first(),
                pl.col("message").filter(said).first(),
                pl.col("rank")
                .filter(pl.col("role") == "root")
                .drop_nulls()
                .unique(maintain_order=True),
                pl.col("host")  # where a line names a process (NCCL RAS): its host
                .filter(said & (pl.col("role") == "root") & pl.col("pid").is_not_null())
                .drop_nulls()
                .unique(maintain_order=True),
            )
        )
        found = []
        for row in jobs.iter_rows(named=True):
            job_id, onset, latest = row["job_id"], row["onset"], row["latest"]
            watch = self.watch.get(job_id)
            if self.jobs.done(job_id) or (watch is not None and watch.alarmed):
                continue
            suspect = self.warned.get(job_id) or (watch.suspect if watch is not None else None)
            if suspect is not None and suspect.onset is not None:
                onset = min(onset, suspect.onset)  # the suspect keeps its onset
            longest = _longest(watch) if watch is not None else 0
            reported = report_tier(self.config, row["waited_us"], latest - onset, longest)
            tier = reported.tier
            if tier == CONFIRMED:
                self.stuck[job_id] = row["time_us"]
                self.warned.pop(job_id, None)
                if watch is not None:
                    watch.alarmed = True
            elif suspect is not None:
                continue  # the stall goes on: reported once until confirmed or resumed
            stuck_s = ((row["time_us"] if suspect is None else latest) - onset) / US
            ranks, lines = row["rank"], row["lines"]
            lagging = f"; lagging rank(s) {', '.join(map(str, ranks))}" if ranks else ""
            hosts = row["host"]
            on = f"; process(es) reported stuck or dead on {', '.join(hosts)}" if hosts else ""
            detection = Detection(
                job_id=job_id,
                kind="hang",
                culprits=(),
                ranks=tuple(ranks),
                score=1.0 if tier == CONFIRMED else stuck_s * US / reported.bound_us,
                detector=self.name,
                summary=f"job {job_id} reports being stuck for {stuck_s:.0f}s "
                f"({row['signature']}, {lines} line{'s' if lines != 1 else ''}): "
                f"{excerpt(row['message'])}{lagging}{on}; no node at fault"
                + ("" if tier == CONFIRMED else "; suspect: a warning the job may recover from"),
                onset=onset,
                evidence={"signatures": [row["signature"]], "stuck_s": stuck_s}
                | ({"hosts": list(hosts)} if hosts else {}),
                tier=tier,
            )
            if tier != CONFIRMED:
                self.warned[job_id] = detection
                if watch is not None:
                    watch.suspect = detection  # the silence's confirmation keeps its onset
            found.append(detection)
        return found

    def _check(
        self, job_id: str, job: JobProgress | None, watch: JobWatch, now: int
    ) -> Detection | None:
        """Fire when the silence since the last step passes its threshold, or when the GPUs
        have corroborated a hang for ``spin_hold_s``; never inside the allowance of an open
        phase or of the job's healthy spells."""
        c = self.config
        shortest = min(c.min_silence_s, c.corroborated_silence_s) * US
        if job is not None and job.last_step_at is not None and _silence(job, now) < shortest:
            return None  # the usual second of a job at work: no silence to judge yet
        spacing = self.spacing_us
        held = held_us(watch.telemetry, now, c, self.feed_at, spacing)
        began = job.last_step_at if job is not None and job.last_step_at is not None else now - held
        crashed = self.crashed.get(job_id)
        if crashed is not None and crashed > began - round(c.window_s * US):
            return None
        gpus = verdict(watch.telemetry, now, c, self.feed_at, spacing)
        if job is not None and (job.last_step_at is not None or job.last_event_at is not None):
            # A line of the job (a phase's end, delivered late; before the first step too) is a
            # sign of life: what the GPUs showed before it was the job at work (the save that
            # line closed), so they corroborate the silence only from then on.
            held = min(held, _silence(job, now))
        # GPUs waiting for a rank at work do not corroborate: the silence is judged by the
        # job's step gaps alone (the first pause of a kind; the next ones are on its rhythm).
        corroborated = (
            gpus in CORROBORATING
            and held >= c.corroborated_hold_s * US
            and not watch.telemetry.computing_apart(c)
        )
        if job is not None and job.last_step_at is not None:
            silence = _silence(job, now)
            quiet_until = self._quiet_until(job, watch, gpus, now)
            holding = round(holding_s(self.config, gpus) * US)
            if quiet_until is not None and not holding:
                # The GPUs were evidently busy with something until then (an evaluation or a
                # checkpoint printing nothing): the next step is due counting from there.
                silence = min(silence, now - quiet_until)
            if quiet_until is not None and now - quiet_until < holding:
                return None  # a quiet spell (a save) right after one of another kind
            if silence < shortest:
                return None
            if any(silence < pause(job_id, job, watch, now, held, gpus) for pause in self.expected):
                return None
            threshold = self._threshold_us(watch, gpus, corroborated)
            if silence < threshold and held < c.spin_hold_s * US:
                return None
            if (
                self._stalled(watch, gpus)
                and held < c.stall_silence_s * US
                and not self._blocked_apart(watch)
            ):
                return None
            reference = watch.gaps.reference if watch.gaps.ready else None
            step = job.last_step if job.last_step is not None else "?"
            what = f"has made no progress for {silence / US:.0f}s since step {step}" + (
                f" (its p{c.gap_quantile * 100:g} step gap is {reference:.1f}s)"
                if reference
                else ""
            )
            onset: int | None = job.last_step_at
        elif (
            held >= c.spin_hold_s * US
            and not self._in_phase(job, watch, now, held)
            and not self._saving_before_steps(job_id, watch, held)
        ):
            what = f"prints no progress and its GPUs have looked hung for {held / US:.0f}s"
            onset, silence, threshold = now - held, held, round(c.spin_hold_s * US)
        else:
            return None
        if watch.telemetry.undecided(self.carrying) or self._missing_not_due(watch, now):
            return None
        blame = culprits(
            job,
            watch.telemetry,
            c,
            self._kernel_lines(job, now),
            lambda node: self._stopped_with(job, watch, node),
        )
        if blame.nodes:
            whom = f"; culprit {blame.why}"
        elif blame.ranks or blame.stuck:
            ranks = f"rank(s) {', '.join(map(str, blame.ranks))}: " if blame.ranks else ""
            whom = f"; stuck {ranks}{blame.stuck}; no node at fault"
        else:
            whom = "; no node at fault"
        facts = Silence(
            silence,
            blame,
            bool(held) and self._apart_on(watch, self.blocked),
            held if held and self._apart_on(watch, self.storage) else 0,
            _longest(watch),
            self._apart_us(job_id, watch, now, held, gpus) if corroborated else 0,
            watch.longest_apart_us,
            min(held, watch.telemetry.all_spinning_us(now)),
            watch.longest_all_waiting_us,
            gpus == NO_TELEMETRY and watch.telemetry.healthy is not None,
            dead=tuple(watch.dead.values()),
            job_gpus=0 if watch.telemetry.healthy is None else watch.telemetry.healthy.height,
            waiting=corroborated,
        )
        tier = tier_of(c, facts)
        return Detection(
            job_id=job_id,
            kind="node_failure" if blame.nodes_went_silent else "hang",
            culprits=blame.nodes,
            ranks=blame.ranks,
            score=score_of(silence, threshold, corroborated),
            detector=self.name,
            summary=f"job {job_id} {what}; GPUs: {gpus}{whom}{tier.why}",
            onset=onset,
            evidence={
                "silence_s": silence / US,
                "threshold_s": threshold / US,
                "gap_s": watch.gaps.reference if watch.gaps.ready else None,
                "gpus": gpus,
                "corroborated": corroborated,
                "confirmed_by": list(tier.evidence),
                "confirm_after_s": tier.bound_us / US,
                "apart_s": facts.apart_us / US,
                "apart_confirm_after_s": None
                if tier.apart_bound_us is None
                else tier.apart_bound_us / US,
                **_history(watch.rhythm, silence, facts.longest_pause_us),
            },
            tier=tier.tier,
        )

    @staticmethod
    def _quiet_until(job: JobProgress, watch: JobWatch, gpus: str, now: int) -> int | None:
        """End of the latest quiet spell of another state than ``gpus`` (``quiet_until``),
        unless it ended within the job's usual step gap of its last sign of life: GPUs at work
        until a step was due anyway are the job training between two printed steps (a job that
        prints every 50 steps works a minute unprinted), not an evaluation or a save that puts
        the next step off, so a hang in the middle of such a gap is timed from the last step."""
        quiet_until = watch.telemetry.quiet_until(gpus)
        reference = watch.gaps.reference if watch.gaps.ready else None
        if quiet_until is None or reference is None:
            return quiet_until
        due = now - _silence(job, now) + round(reference * US)
        return quiet_until if quiet_until > due else None

    def _apart_us(self, job_id: str, watch: JobWatch, now: int, held: int, gpus: str) -> int:
        """How long one rank's GPU, not the save's writer, has been idle (saying so) while all
        its peers wait: ``held``, while the GPUs show that and the spell has shown no other GPU
        apart; else 0."""
        if gpus != "rank stopped" or not held:
            return 0
        spell = self._spell(watch.telemetry, now)
        if spell is None or kind_of(spell[1], self._writer(job_id, watch)) == PAUSE:
            return 0
        return held

    @staticmethod
    def _stalled(watch: JobWatch, gpus: str) -> bool:
        """Whether all the spell has shown is a rank left without work: its GPU idle as the
        others wait, or, once that GPU went back to work, the others still waiting for it (the
        window in which a data-loader stall ends)."""
        states = watch.telemetry.spell_states
        return gpus == "rank stopped" or (gpus == "spinning" and "rank stopped" in states)

    def _allowance_us(
        self, job_id: str, job: JobProgress, watch: JobWatch, now: int, held: int, gpus: str
    ) -> int:
        """Silence no evidence can cut short: an open phase's allowance; while the GPUs
        corroborate with no phase open and only writers are out of the wait, a save's
        (``phase_factor`` times the longest such spell the job had, at least ``phase_floor_s``,
        or ``phase_allowance_s`` before it had one); otherwise ``phase_factor`` times the
        longest of the job's earlier spells of the same GPU state that ended by themselves.
        Spells are measured from their start; the silence thresholds still apply past them.

        Frameworks that save from one process (the Hugging Face Trainer's process zero,
        Lightning's global rank 0, ``torch.save`` under ``if rank == 0``) leave that rank's GPU
        without work while it serialises and writes, and the other ranks wait for it in the
        next collective: a long spell of that one GPU apart is the job's save, and so is the
        tail of a save written by one rank per node (the last writers still at it). Any other
        rank apart is not a save (a data-loader stall, a rank stuck in host code), held
        ``stall_silence_s`` only, unless it went apart in a spell that showed a save
        (``JobWatch.saved_since``: a stall as training resumes is the save's tail). Nor is a
        spell whose ranks apart are on a node whose kernel reported a process blocked on I/O
        since it began (``BLOCKED_IO``: a save to a dead NFS server does not end before the
        server answers again), announced or not.

        A save always has writers out of the wait: the Hugging Face Trainer's process zero and
        Lightning's global rank 0 write while the others wait in the next collective or
        ``strategy.barrier``, Megatron-LM's legacy format writes from one rank per
        model-parallel group before ``torch.distributed.barrier``, and
        torch.distributed.checkpoint has every rank write its shards (host I/O, the GPU idle)
        before the closing gather, where the ranks done first wait for the slowest writer; once
        the last writer joins the wait, the collective completes and training resumes. So an
        announced checkpoint in which every GPU has sat in the wait (pegged at low power, no
        rank apart) for ``spin_hold_s`` is no longer writing anything: its allowance lapses, and
        an announced evaluation's too (its ranks compute, or idle, never all wait for minutes). So
        does any phase's once a GPU has looked stuck (``gpu stuck``: pegged below its waiting
        peers' power, or idle without saying so) for ``spin_hold_s``: an evaluating or writing
        rank's GPU computes, or idles and reports it."""
        c = self.config
        if held and self._blocked_apart(watch):
            return 0  # a rank apart is blocked on I/O: neither a save nor a stall ending soon
        if job.phase is not None:
            return self._phase_allowance_us(job.phase.kind, job, watch, now, held)
        since = watch.telemetry.corroborated_since
        if not held or since is None:
            return 0
        if watch.telemetry.saving(self._writer(job_id, watch)):  # looked up only in a spell
            watch.saved_since = since
        if watch.saved_since == since:
            return _silence(job, since) + self._save_us(watch)
        longest = watch.longest_spell_us.get(gpus)
        if longest is None:
            return 0
        return _silence(job, since) + round(c.phase_factor * longest)

    def _save_us(self, watch: JobWatch) -> int:
        """How long a save may hold the GPUs: ``phase_factor`` times the longest the job had,
        at least ``phase_floor_s``, or ``phase_allowance_s`` before it had one."""
        c, learned = self.config, watch.longest_save_us
        if learned is None:
            return round(c.phase_allowance_s * US)
        return round(max(c.phase_floor_s * US, c.phase_factor * learned))

    def _saving_before_steps(self, job_id: str, watch: JobWatch, held: int) -> bool:
        """Whether a job that printed no step yet is within a save's allowance (``_save_us``):
        only writers out of the wait, none blocked on I/O, as after a step (``_allowance_us``),
        announced or not."""
        if not held or held >= self._save_us(watch) or self._blocked_apart(watch):
            return False
        return watch.telemetry.saving(self._writer(job_id, watch))

    def _rhythm_us(
        self, job_id: str, job: JobProgress, watch: JobWatch, now: int, held: int, gpus: str
    ) -> int:
        """Silence a pause on the job's own rhythm is expected to last, announced or not
        (``medic.detectors.hang_rhythm``): of the kind the open spell shows (one GPU apart: a
        stall of that GPU; anything else: a scheduled pause). None while a rank apart is
        blocked on I/O (a dead NFS server ends no pause)."""
        if held and self._blocked_apart(watch):
            return 0
        rhythm, since = watch.rhythm, watch.telemetry.corroborated_since
        spell = None if since is None else self._spell(watch.telemetry, now)
        kind = PAUSE if spell is None else kind_of(spell[1], self._writer(job_id, watch))
        factor = self.config.phase_factor
        # A silence on the job's step rhythm is expected whatever its GPUs show (a save by a
        # rank 0 the scheduler did not name looks like that GPU stalling).
        if watch.scheduled_us is None:
            watch.scheduled_us = rhythm.expected_us(rhythm.last_step, PAUSE, factor)
        scheduled = watch.scheduled_us
        if kind == PAUSE or since is None:
            return scheduled
        stall = rhythm.expected_us(rhythm.last_step, kind, factor)
        # A stall is timed from the spell's start.
        return max(scheduled, _silence(job, since) + stall if stall else 0)

    def _phase_allowance_us(
        self, kind: str, job: JobProgress, watch: JobWatch, now: int, held: int
    ) -> int:
        """The allowance of the job's open phase of ``kind`` (see ``_allowance_us``), before
        its first step too (``_in_phase``)."""
        c = self.config
        everyone = min(held, watch.telemetry.all_waiting_us(now))
        if everyone >= c.spin_hold_s * US:
            return 0  # no one is writing or evaluating: not the phase any more
        if min(held, watch.telemetry.stuck_us(now)) >= c.spin_hold_s * US:
            return 0  # no evaluation or save leaves a GPU stuck while its peers wait
        cold, floor = round(c.phase_allowance_s * US), round(c.phase_floor_s * US)
        return job.phase_allowance_us(kind, cold, floor, c.phase_factor)

    def _in_phase(self, job: JobProgress | None, watch: JobWatch, now: int, held: int) -> bool:
        """Whether a job that has printed no step yet is inside an announced phase's allowance
        (a job resumed from a checkpoint that evaluates, then saves, before its first step
        line): the GPUs' spell is the phase, timed from its start."""
        if job is None or job.phase is None or (held and self._blocked_apart(watch)):
            return False
        allowance = self._phase_allowance_us(job.phase.kind, job, watch, now, held)
        return now - job.phase.started < allowance

    def _blocked_apart(self, watch: JobWatch) -> bool:
        """Whether a GPU the open spell has shown out of the wait is on a node whose kernel
        reported a task blocked, or its NFS client its server away, since the spell began
        (``BLOCKED_IO``, ``STORAGE_AWAY``: "server not responding" comes once the mount's RPC
        retries ran out, nfs(5) ``timeo``/``retrans``; a hard mount then retries for as long
        as the server is down)."""
        return self._apart_on(watch, self.blocked) or self._apart_on(watch, self.storage)

    def _apart_on(self, watch: JobWatch, marks: dict[str, int]) -> bool:
        """Whether a GPU the open spell has shown out of the wait is on a node that ``marks``
        (node -> its latest such kernel line) marked since the spell began."""
        since = watch.telemetry.corroborated_since
        if since is None:
            return False
        marked = {node for node, time in marks.items() if time >= since}
        return bool(marked & watch.telemetry.apart_nodes())

    def _writer(self, job_id: str, watch: JobWatch) -> tuple[str, int] | None:
        """The GPU of the job's global rank 0, which writes a single-writer save: local rank 0
        on rank 0's node (``torch.cuda.set_device(local_rank)``), that node as the job's lines
        name it, else the first node of its allocation (srun starts task 0 there, and
        torchrun's rendezvous host is by convention the first host of the node list). A job
        the scheduler has not listed (medic started after it, or no scheduler feed) has the
        nodes its GPUs reported from, in the order Slurm lists them (``node2`` before
        ``node10``)."""
        info = self.jobs.scheduler.jobs.get(job_id)
        ranked = info.rank_nodes.get(0) if info is not None else None
        listed = info.nodes if info is not None else ()
        node = ranked or (
            listed[0] if listed else min(watch.telemetry.known(), key=_hostlist_key, default=None)
        )
        return None if node is None else (node, 0)

    def _threshold_us(self, watch: JobWatch, gpus: str, corroborated: bool) -> int:
        """The silence that fires (``hang_score.threshold_us``). While the step gaps are not
        known, a step time the job's line states counts as a gap seen: a job whose first line
        says its steps (or its lines: Marian's "Time 1300.19s" over the updates between two)
        take twenty minutes is not hung after ten."""
        reference = watch.gaps.reference if watch.gaps.ready else None
        longest = watch.gaps.longest
        if reference is None and watch.step_us is not None:
            stated = watch.step_us / US
            longest = stated if longest is None else max(longest, stated)
        return threshold_us(self.config, reference, longest, gpus, corroborated)

    def _stopped_with(self, job: JobProgress | None, watch: JobWatch, node: str) -> bool:
        """Whether ``node``, missing from the job's silent windows, stopped reporting when the
        job stopped, so that its silence is evidence against it. A node that dies takes its
        ranks with it: its peers block in their next collective, within a step, and no later
        step completes. So a node whose next sample was due before the job's last step began
        (a step needs every rank: the node's ranks were at work) stopped only reporting (its
        exporter restarting), and so did a node that still reported after its peers were seen
        waiting (the wait began without it), or that reported in the wait with its own GPUs
        waiting too (the wait began with it: a scrape missed since, with telemetry every 30 s,
        is no death). Times are compared with ``CLOCK_SLACK_US`` to spare, and with the node's
        own sample spacing (``Liveness.cadence_of``). A node the liveness no longer knows
        counts, as before anything was known of when it stopped."""
        seen = self.liveness.node_seen_at(node)
        if seen is None:
            return True
        since, waited = watch.telemetry.corroborated_since, watch.telemetry.waited
        if since is not None:
            if seen > since + round(self.config.window_s * US) + CLOCK_SLACK_US:
                return False  # it reported after the wait began
            if seen >= since and waited is not None and holds(waited.get_column("node"), node):
                return False  # it reported in the wait, waiting
        if job is None or job.last_step_at is None or watch.step_us is None:
            return True
        due = seen + self.liveness.cadence_of(node)
        return due + CLOCK_SLACK_US >= job.last_step_at - watch.step_us

    def _left_its_gpus(self, job_id: str, job: JobProgress | None, watch: JobWatch) -> bool:
        """Whether the job's GPUs, on every node they reported it from, report another job or
        none since its last step, where the telemetry names jobs (``Liveness.names_jobs``):
        the job has left them (it ended, or was moved), as the scheduler's terminal state
        would say where no scheduler feed tells. A hung job's processes hold its GPUs to the
        end, and a node that stopped reporting says nothing of it."""
        if not self.liveness.names_jobs or job is None or job.last_step_at is None:
            return False
        nodes = watch.telemetry.known()
        for node in nodes:
            seen = self.liveness.node_seen_at(node)
            if seen is None or seen <= job.last_step_at or job_id in self.liveness.jobs_on(node):
                return False
        return bool(nodes)

    def _missing_not_due(self, watch: JobWatch, now: int) -> bool:
        """Whether a node missing from the silent windows is not due to report yet by its own
        sample spacing (``Liveness.cadence_of``, a window and ``CLOCK_SLACK_US`` to spare): a
        node scraped every minute is missing from half a minute of windows at every scrape,
        not stopped. Worth the wait until it reports again or is overdue."""
        missing = watch.telemetry.known() - watch.telemetry.heard()
        spare = round(self.config.window_s * US) + CLOCK_SLACK_US
        for node in missing:
            seen = self.liveness.node_seen_at(node)
            if seen is not None and now < seen + self.liveness.cadence_of(node) + spare:
                return True
        return False

    def _kernel_lines(self, job: JobProgress | None, now: int) -> dict[str, str]:
        """Nodes whose kernel logged a hardware error since shortly before the silence."""
        began = job.last_step_at if job is not None and job.last_step_at is not None else now
        since = began - round(self.config.kernel_lookback_s * US)
        return {node: what for node, (time, what) in self.kernel.items() if time >= since}

    # -- forgetting -----------------------------------------------------------------------

    def _forget(self, job_ids: list[str]) -> None:
        """Drop the jobs' state; their telemetry windows are cut once for all of them (a
        filter per job per window was most of what a burst of ended jobs cost)."""
        if not job_ids:
            return
        for job_id in job_ids:
            self.watch.pop(job_id, None)
            self.stuck.pop(job_id, None)
            self.warned.pop(job_id, None)
            self.crashed.pop(job_id, None)
            self._silent_jobs.discard(job_id)
        self.baseline.forget(job_ids)
        self.silent.forget(job_ids)


_DIGITS = re.compile(r"(\d+)")


def _hostlist_key(node: str) -> tuple[tuple[int, str], ...]:
    """Sort key of a node name in a Slurm node list's order: its runs of digits by number."""
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in _DIGITS.split(node))


def _longest(watch: JobWatch) -> int:
    """The longest pause the job has had: step gap, save, spell of waiting GPUs, or pause of
    its rhythm."""
    return max(
        watch.longest_gap_us,
        watch.longest_save_us or 0,
        max(watch.longest_spell_us.values(), default=0),
        int(watch.rhythm.lengths.max()) if watch.rhythm.lengths.size else 0,
    )


def _history(rhythm: JobRhythm, silence: int, longest: int) -> dict[str, float | int | bool]:
    """What the job's own pauses say of a silence, for the calibration
    (``medic.evidence_features``): the longest pause it had, how many of its remembered
    pauses lasted as long, and whether the silence began at the step interval they came at."""
    return {
        "longest_pause_s": longest / US,
        "pauses": int(rhythm.lengths.size),
        "like_pauses": rhythm.precedents(silence),
        "on_rhythm": rhythm.on_rhythm(rhythm.last_step),
    }


def _step_us(
    took_s: float | None, gap_us: int | None, step: int | None, previous: int | None
) -> int | None:
    """How long a training step took: what its line says (``took_s``), else its clean gap
    (``gap_us``, None when not clean) over the steps since the previous line; None when
    neither tells."""
    if took_s is not None and took_s > 0:
        return round(took_s * US)
    if gap_us is None or step is None or previous is None or step <= previous:
        return None
    return gap_us // (step - previous)


def _silence(job: JobProgress, now: int) -> int:
    return now - max(job.last_step_at or 0, job.last_event_at or 0)


def _by_job(window: Window) -> list[tuple[str, pl.DataFrame]]:
    """The window's rows of each job, by job id. A window comes sorted by job: each job's rows
    are a slice, found with array operations (a partition is a query)."""
    gpus = window.gpus
    if gpus.is_empty():
        return []
    jobs = gpus.get_column("job_id")
    ids = jobs.to_numpy()
    if jobs.null_count() or not (ids[1:] >= ids[:-1]).all():
        groups = gpus.partition_by("job_id", as_dict=True)
        return sorted(((str(key[0]), rows) for key, rows in groups.items()), key=lambda kv: kv[0])
    starts = [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist(), len(ids)]
    return [(str(ids[a]), gpus.slice(a, b - a)) for a, b in itertools.pairwise(starts)]


def _without_posthumous_dumps(signs: pl.DataFrame) -> pl.DataFrame:
    """``signs`` without the stack dumps of a job (``STACK_DUMPS``) at or after a fatal end of
    its own among them."""
    if not holds(signs.get_column("signature"), STACK_DUMPS):
        return signs
    died = (
        (pl.col("kind") == "crash") & (pl.col("role") == "root") & (pl.col("severity") == "fatal")
    )
    death = pl.col("time").filter(died).min().over("job_id")
    after = pl.col("signature").is_in(STACK_DUMPS) & (pl.col("time") >= death)
    return signs.filter(~after.fill_null(False))
