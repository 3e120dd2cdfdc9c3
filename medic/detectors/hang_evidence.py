"""What a silent job's telemetry says: the GPUs' state during the silence and the culprit.

``JobTelemetry`` holds one job's healthy snapshot (per-GPU utilisation and power from a window
in which the job progressed, confirmed by progress after it, so the window a hang began in is
never the baseline), a river rolling median of its healthy median power, and, while the job is
silent, the latest full window, the nodes heard from in the last windows and the hardware counter
rises since the silence began.

``verdict`` names the GPUs' state: ``spinning`` (pegged but drawing much less power than when
progressing: an NCCL wait), ``gpu stuck`` (a GPU that was busy draws idle power while pegged, or
stopped without reporting itself idle, as its peers wait), ``rank stopped`` (a GPU that was busy
went idle and says so, as its peers wait: a rank left without work), ``writers`` (GPUs idle on
several nodes at once: one rank per node busy on its host while the others wait, as a
checkpoint written by one rank per node or per model-parallel group does, Megatron-LM's legacy
format; a stuck rank is one rank), ``working`` (not pegged,
or drawing more than a wait: an evaluation, training without printing), ``idle`` (most GPUs),
``mixed``, ``busy`` (no baseline yet) or ``no telemetry``. A GPU pegged at low power is stuck
only while its peers wait (spin) too: beside peers computing at full power it is one still, or
already, in a wait, at a barrier's edges seen through exporters that sample at their own moments.

A spell of corroborating windows starts again when a GPU that waited in it (idle, or spinning)
is back at work: a rank leaves an NCCL collective only once every peer joined it, so the job
moved on, whatever older samples of the other GPUs still show (a save's barrier releasing).

``culprits`` names a node only with evidence against the node itself, and only when the evidence
points at a minority of the job: a GPU pegged at 100% while drawing idle power (its engine is
stuck: a waiting kernel draws far more), a GPU that stopped working but does not report itself
idle (NVML's GPU-idle clocks-event reason unset: something holds it that is not running), a node
whose telemetry stopped, hardware counters (PCIe replay, NVLink, uncorrectable ECC, Xid) that
rose during the silence, or a hardware error line in the node's kernel log. A node whose
telemetry stopped counts only while no GPU still reporting was left without work: a dead node
leaves its peers all blocked in the collective it never joins, whereas a rank whose GPU went
idle, saying so, on a node still reporting is what the job waits on, and a node falling silent
then (its exporter restarting) is no cause (``node_failure`` reads a silent node the same way:
only the job's other GPUs all stalled in the wait corroborate it). Nor is a node whose telemetry
stopped well before the job did (its ranks finished a step begun after it) or after its peers
were already waiting: a gap of its exporter that has nothing to do with the hang's onset
(``HangDetector._stopped_with``). A GPU that went idle and says so while its peers wait, or
ranks a step behind the others, is what a rank stuck in host code (a dead NFS mount, a Python
deadlock) looks like: those name the stuck ranks and no node, so the job is restarted without
draining a healthy node. A software deadlock, where every GPU looks alike, blames nothing.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from river import stats

from medic.detectors.progress_state import JobProgress
from medic.detectors.telemetry import COUNTERS
from medic.frames import collect
from medic.timeutil import US

if TYPE_CHECKING:
    from medic.detectors.hang import HangConfig

SILENT_NODE = "its telemetry stopped"
NO_TELEMETRY = "no telemetry"
"""The GPUs' state when no recent window of the job holds any of them."""
GPU_STUCK = "gpu stuck"
"""The GPUs' state when one of them looks stuck as its peers wait (``JobTelemetry.stopped``)."""
CORROBORATING = frozenset({"spinning", GPU_STUCK, "rank stopped"})
HOLDING = frozenset({"idle", "working", "writers"})
EVIDENCE_COLUMNS = [f"{c}_delta" for c in COUNTERS] + ["xid"]
_GPU = {"node": pl.String, "gpu": pl.Int16}
_NO_GPUS = pl.DataFrame(schema=_GPU | {"stuck": pl.Boolean, "pegged": pl.Boolean})
"""Stopped GPUs: ``stuck`` says the GPU itself looks stuck (pegged at idle power, or idle
without reporting the GPU-idle reason) rather than left without work by its rank; ``pegged``
that it is the former (its engine busy on nothing)."""


_StoppedOf = tuple[pl.DataFrame, pl.DataFrame, float | None, "HangConfig"]
"""What a ``JobTelemetry.stopped`` answer is of: the window, the healthy snapshot, the job's
power baseline and the config."""


@dataclass(frozen=True)
class EndedSpell:
    """A run of corroborating windows that ended: from ``since`` to ``end`` (telemetry time)."""

    since: int
    end: int
    states: frozenset[str]
    apart: pl.DataFrame | None
    writing: pl.DataFrame | None

    def saving(self, writer: tuple[str, int] | None) -> bool:
        """Whether the only GPUs out of the wait in it were writers of a save: ``writer`` (the
        GPU of the job's rank 0, as a single-writer save leaves it while the others wait in the
        next collective) or GPUs seen writing in the silence."""
        return self.apart is not None and _writers_only(self.apart, writer, self.writing)


def _writers_only(
    apart: pl.DataFrame, writer: tuple[str, int] | None, writing: pl.DataFrame | None
) -> bool:
    """Whether ``apart`` holds GPUs and each of them is ``writer`` or in ``writing``."""
    if apart.is_empty():
        return False
    others = (
        apart
        if writer is None
        else apart.filter((pl.col("node") != writer[0]) | (pl.col("gpu") != writer[1]))
    )
    if others.is_empty():
        return True
    return writing is not None and others.join(writing, on=list(_GPU), how="anti").is_empty()


def _gpus_where(gpus: pl.DataFrame, mask: pl.Series) -> pl.DataFrame:
    """The GPUs (node, gpu) of the rows of ``gpus`` where ``mask`` holds, each column filtered
    apart: ``DataFrame.filter`` would be a query."""
    return pl.DataFrame([gpus.get_column(c).filter(mask) for c in _GPU])


def _union(gpus: pl.DataFrame | None, more: pl.DataFrame) -> pl.DataFrame:
    """The GPUs (node, gpu) of both, once each."""
    more = more[list(_GPU)]  # columns picked without a query
    return more.unique() if gpus is None else pl.concat([gpus, more]).unique()


@dataclass
class JobTelemetry:
    """One job's telemetry as the hang detector keeps it."""

    power: stats.RollingQuantile
    healthy: pl.DataFrame | None = None
    pending: pl.DataFrame | None = None
    pending_end: int = 0
    last_seen: int = 0
    latest: pl.DataFrame | None = None
    latest_end: int = 0
    state: str = NO_TELEMETRY
    corroborated_since: int | None = None
    """Start of the run of windows whose state corroborates a hang, None outside one."""
    spell_states: set[str] = field(default_factory=set)
    """The corroborating states seen in that run."""
    waited: pl.DataFrame | None = None
    """The GPUs seen waiting (idle, or spinning) in that run; one of them back at work restarts
    it (``_resumed``)."""
    apart: pl.DataFrame | None = None
    """The GPUs seen out of the wait in that run (neither computing nor spinning: a rank busy
    on its host, or blocked there), to tell a single writer's save from any other rank's."""
    writing: pl.DataFrame | None = None
    """The GPUs seen out of the wait in a ``writers`` window of this silence (one rank per node
    writing its shard of a save): the last of them to finish is still the save."""
    ended: EndedSpell | None = None
    """The latest run of corroborating windows that ended (the GPUs back at work, or in a
    state that does not corroborate): a step line, delivered after the telemetry showed the
    end, still learns it."""
    all_waiting_since: int | None = None
    """Start of the run of windows in which every GPU waited (spinning, none with less than
    ``busy_util``), None outside one."""
    stuck_since: int | None = None
    """Start of the run of windows showing a GPU stuck (``GPU_STUCK``), None outside one."""
    all_spinning_since: int | None = None
    """Start of the run of windows in which every GPU of the job spun in the wait, strictly:
    each pegged at ``spin_util`` or more and drawing less than ``spin_power_ratio`` of the
    job's progressing power (none computing, none idle), and every node of the healthy snapshot
    reporting; None outside one (``hang_policy.all_waiting_past_spells``)."""
    all_spinning_ended: tuple[int, int] | None = None
    """(start, end) of the latest such run that ended: a step line after it (the job
    recovered) teaches how long this job's GPUs may all wait when healthy."""
    quiet: dict[str, int] = field(default_factory=dict)
    """Per quiet state (``working``, ``idle``, ``writers``): end of the latest window in which
    the GPUs were in it while the job printed nothing (a spell of evaluation or checkpointing)."""
    recent_nodes: deque[tuple[int, set[str]]] = field(default_factory=deque)
    """(window end, nodes heard in it) for the windows of the last ``carry_s``: a node sampled
    every 30 s is missing from most 10 s windows without having stopped."""
    since: pl.DataFrame | None = None
    """Hardware counter rises per GPU in the silence's first windows: a fault that stopped the
    job shows in the first samples after it stopped (``since_until``); a rise minutes into a
    hang did not stop it (a corrected PCIe replay on another node), and blames no node."""
    since_until: int | None = None
    """End of the last silent window whose counter rises count in ``since``: the first silent
    window's end plus ``carry_s`` (a GPU sampled that seldom reports in it) and a window."""
    _stopped: tuple[_StoppedOf, pl.DataFrame] | None = field(
        default=None, repr=False, compare=False
    )
    """The latest ``stopped`` answer and what it was of (window, snapshot, power baseline,
    config): asked again every second of a silence of the same window."""

    def snapshot(self, gpus: pl.DataFrame, end: int, config: HangConfig) -> None:
        """A window of a job that prints progress; healthy once an ordinary step follows.
        Until the first such, a snapshot of busy GPUs stands in (a job printing rarely may
        take a while to confirm one)."""
        self.pending, self.pending_end, self.last_seen = gpus, end, end
        if self.healthy is None and _state(self, gpus, config) in ("working", "busy"):
            self._healthy(gpus, end, config)

    def progressed(self, time: int, config: HangConfig) -> None:
        """A step after the pending snapshot confirms it healthy, unless its GPUs corroborated
        a hang then: a data-loader stall that ended by itself leaves one rank's GPU idle in the
        window, and a baseline with that GPU idle could never see it stop again."""
        pending = self.pending
        if pending is not None and time >= self.pending_end:
            if _state(self, pending, config) not in CORROBORATING:
                self._healthy(pending, self.pending_end, config)
            self.pending = None

    def glance(self, gpus: pl.DataFrame, end: int, config: HangConfig) -> bool:
        """A snapshot of a job that prints no progress: healthy if its GPUs work as before;
        True when they look hung (then the detector watches it in full windows). The GPUs
        have looked hung since the snapshot's sample began (the start of its baseline period):
        the spell the full windows go on with is timed from there, not from the first of them
        a baseline period later."""
        self.last_seen = end
        state = _state(self, gpus, config)
        if state in ("working", "busy"):
            self._healthy(gpus, end, config)
        if state not in CORROBORATING:
            return False
        if self.corroborated_since is None:
            self.corroborated_since = end - round(config.baseline_every_s * US)
        return True

    def observe_silence(self, gpus: pl.DataFrame, end: int, config: HangConfig) -> None:
        """A full window while the job is silent (or looks hung). GPUs sampled less often than
        a window (telemetry every 15 or 30 s) keep their latest values for ``carry_s``, so the
        GPUs' state is judged on all of them, not on the third that a window happened to hold."""
        self.recent_nodes.append((end, set(gpus.get_column("node").to_list())))
        while self.recent_nodes[0][0] < end - round(config.carry_s * US):
            self.recent_nodes.popleft()
        if self.since_until is None:
            self.since_until = end + round((config.carry_s + config.window_s) * US)
        if end <= self.since_until:
            self.since = _summed(self.since, gpus[["node", "gpu", *EVIDENCE_COLUMNS]])
        gpus = _stamped(gpus, end, self.latest, end - round(config.carry_s * US))
        self.latest, self.latest_end, self.last_seen = gpus, end, end
        state = _state(self, gpus, config)
        if state == "mixed" and self.state in HOLDING:
            state = self.state  # a window half-way out of an idle or working spell
        self.state = state
        window = round(config.window_s * US)
        if state != "spinning" or (gpus.get_column("util") < config.busy_util).any():
            self.all_waiting_since = None
        elif self.all_waiting_since is None:
            self.all_waiting_since = end - window
        self._all_spinning(gpus, end - window, config)
        if state != GPU_STUCK:
            self.stuck_since = None
        elif self.stuck_since is None:
            self.stuck_since = end - window
        if state in HOLDING:
            self.quiet[state] = end
        if state == "writers":
            writing = self.stopped(gpus, config)[list(_GPU)]
            self.writing = _union(self.writing, writing)
        if self.state not in CORROBORATING:
            self._close_spell(end - window)
            return
        if self.corroborated_since is None or self._resumed(gpus, config):
            self._close_spell(end - window)
            self.corroborated_since = end - window
        self.spell_states.add(self.state)
        waiting = self._waiting(gpus, config)
        self.waited = _union(self.waited, waiting)
        apart = _gpus_where(gpus, gpus.get_column("util") < config.busy_util)
        self.apart = _union(self.apart, apart)
        if apart.get_column("node").n_unique() > 1:
            # Out of the wait on several nodes at once: the writers of a save written by one
            # rank per node or by every rank, copying their shards in bursts (not idle, so not
            # ``stopped``); a rank stuck alone leaves one GPU out.
            self.writing = _union(self.writing, apart)

    def _all_spinning(self, gpus: pl.DataFrame, start: int, config: HangConfig) -> None:
        """Open or close the run of windows in which every GPU spins (``all_spinning_since``)
        with the window that began at ``start``. A run opens only on every node of the healthy
        snapshot; a node missing from a window later (its exporter restarting, its samples
        late) neither ends it nor says it goes on: the run holds while the GPUs there spin."""
        since = self.all_spinning_since
        spins = self.state == "spinning" and self._everyone_spins(gpus, config)
        if spins and since is None and self.known() <= set(gpus.get_column("node").to_list()):
            self.all_spinning_since = start
        elif not spins and since is not None:
            self.all_spinning_ended, self.all_spinning_since = (since, start), None

    def _everyone_spins(self, gpus: pl.DataFrame, config: HangConfig) -> bool:
        """Whether every GPU of the window is pegged at a wait's power (a value not known is
        not)."""
        baseline = self.power.get()
        if not baseline:
            return False
        util, power = gpus.get_column("util").to_numpy(), gpus.get_column("power_w").to_numpy()
        return bool(
            ((util >= config.spin_util) & (power < config.spin_power_ratio * baseline)).all()
        )

    def all_spinning_us(self, now: int) -> int:
        """How long every GPU has spun in the wait without a break (``all_spinning_since``);
        0 when they do not now."""
        since = self.all_spinning_since
        return 0 if since is None else now - since

    def all_spinning_spell(self, time: int) -> int | None:
        """The length of the run of windows in which every GPU spun that a step at ``time``
        ended: the open one, else the latest that ended before it; None without one."""
        since, ended = self.all_spinning_since, self.all_spinning_ended
        if since is not None and since < time:
            return time - since
        if ended is not None and ended[0] < time:
            return ended[1] - ended[0]
        return None

    def _close_spell(self, end: int) -> None:
        """The current run of corroborating windows ended at ``end`` (if one was open)."""
        since = self.corroborated_since
        if since is not None:
            states = frozenset(self.spell_states)
            self.ended = EndedSpell(since, end, states, self.apart, self.writing)
        self.corroborated_since = self.waited = self.apart = None
        self.spell_states = set()

    def computing_apart(self, config: HangConfig) -> bool:
        """Whether, in the latest silent window, some of the job's GPUs compute (busy, drawing
        at least ``spin_power_ratio`` of the job's progressing power) while most wait pegged
        at low power: the others wait for a rank at work (rank 0 evaluating, or saving, alone
        under ``if rank == 0``, as nanoGPT's loop does), not in a frozen collective. A stuck
        GPU draws an idle GPU's power, however pegged."""
        gpus, baseline = self.latest, self.power.get()
        if gpus is None or gpus.is_empty() or not baseline:
            return False
        # Read as arrays (NaN where null, counted nowhere): checked every second of a silence.
        util, power = gpus.get_column("util").to_numpy(), gpus.get_column("power_w").to_numpy()
        floor = config.spin_power_ratio * baseline
        working = int(((util >= config.busy_util) & (power >= floor)).sum())
        waiting = int(((util >= config.spin_util) & (power < floor)).sum())
        return 0 < working < waiting and waiting * 2 > gpus.height

    def apart_nodes(self) -> set[str]:
        """Nodes of the GPUs the open run of corroborating windows has shown out of the wait."""
        return set() if self.apart is None else set(self.apart.get_column("node").to_list())

    def all_waiting_us(self, now: int) -> int:
        """How long the windows have shown every GPU in the wait without a break (spinning,
        none out of it: no rank busy on its host, so none writing a save); 0 when they do not
        now."""
        since = self.all_waiting_since
        return 0 if since is None else now - since

    def stuck_us(self, now: int) -> int:
        """How long the windows have shown a GPU stuck without a break; 0 when they do not."""
        since = self.stuck_since
        return 0 if since is None else now - since

    def saving(self, writer: tuple[str, int] | None) -> bool:
        """Whether the only GPUs the open run of corroborating windows has shown out of the
        wait are writers of a save (see ``EndedSpell.saving``)."""
        return self.apart is not None and _writers_only(self.apart, writer, self.writing)

    def quiet_until(self, state: str) -> int | None:
        """End of the latest quiet window in another state than ``state``: the GPUs were busy
        with something else until then (an evaluation printing nothing, then a save printing
        nothing), so a spell of ``state`` is timed from there."""
        return max((end for quiet, end in self.quiet.items() if quiet != state), default=None)

    def heard(self) -> set[str]:
        """Nodes heard from in the windows of the last ``carry_s``."""
        return set().union(*(nodes for _, nodes in self.recent_nodes))

    def known(self) -> set[str]:
        """Nodes of the healthy snapshot."""
        return set(self.healthy.get_column("node").to_list()) if self.healthy is not None else set()

    def covered(self, config: HangConfig) -> bool:
        """Whether the silent windows span ``carry_s``: a node missing from all of them has
        stopped, not merely been sampled less often than a window."""
        recent, span = self.recent_nodes, (config.carry_s - config.window_s) * US
        return bool(recent) and recent[-1][0] - recent[0][0] >= span

    def undecided(self, config: HangConfig) -> bool:
        """A node is missing from every silent window so far, too few to tell a stopped node
        from a sparsely sampled one: worth the few seconds until they are enough."""
        return bool(self.known() - self.heard()) and not self.covered(config)

    def resume(self) -> None:
        """Progress came back: forget what the silence showed."""
        self.latest, self.since, self.since_until, self.state = None, None, None, NO_TELEMETRY
        self.corroborated_since = self.waited = self.apart = self.ended = self.writing = None
        self.all_waiting_since = self.all_spinning_since = self.all_spinning_ended = None
        self.stuck_since = None
        self.spell_states, self.quiet = set(), {}
        self.recent_nodes.clear()

    def stopped(self, gpus: pl.DataFrame | None, config: HangConfig) -> pl.DataFrame:
        """GPUs that were busy in the healthy snapshot and are now idle, or pegged at idle
        power while their peers spin (column ``stuck``: the GPU itself looks stuck)."""
        healthy = self.healthy
        if gpus is None or healthy is None or gpus.is_empty():
            return _NO_GPUS
        baseline, memo = self.power.get(), self._stopped
        if memo is not None:
            (was_gpus, was_healthy, was_baseline, was_config), stopped = memo
            same = was_gpus is gpus and was_healthy is healthy and was_config is config
            if same and was_baseline == baseline:
                return stopped
        stopped = self._stopped_of(gpus, healthy, config)
        self._stopped = ((gpus, healthy, baseline, config), stopped)
        return stopped

    def _stopped_of(
        self, gpus: pl.DataFrame, healthy: pl.DataFrame, config: HangConfig
    ) -> pl.DataFrame:
        util, power = gpus.get_column("util"), gpus.get_column("power_w")
        pegged = util >= config.spin_util
        stuck = pl.Series([False] * gpus.height)
        pegged_low = stuck
        if int(pegged.sum()) * 2 > gpus.height:
            median = power.filter(pegged).median()
            peers = None if median is None else float(median)  # type: ignore[arg-type]
            if peers is not None and self._peers_wait(peers, config):
                stuck = pegged_low = pegged & (power < config.stuck_power_ratio * peers)
        idle = util < config.idle_util
        stopped = idle | stuck
        if not stopped.any():
            return _NO_GPUS
        if "throttled" in gpus.columns:  # the share of samples reporting the GPU-idle reason
            unannounced = idle & (gpus.get_column("throttled").fill_null(1.0) < 0.5)
            stuck = stuck | unannounced
        busy_before = healthy.filter(pl.col("util") >= config.busy_util)[list(_GPU)]
        columns = [gpus.get_column(c) for c in _GPU]  # a frame of them: ``select`` is a query
        now = pl.DataFrame([*columns, stuck.alias("stuck"), pegged_low.alias("pegged")])
        now = now.filter(stopped)
        return now.join(busy_before, on=list(_GPU), how="semi")

    def _peers_wait(self, peers_power: float, config: HangConfig) -> bool:
        """Whether pegged GPUs drawing ``peers_power`` (their median) wait rather than compute:
        below ``spin_power_ratio`` of the job's progressing power. A GPU pegged at low power
        is stuck only as its peers wait for it; while they compute at full power it is one of
        those still waiting or already waiting (a barrier's edges, seen through GPUs sampled
        at different moments). Without a power baseline the peers cannot be judged."""
        baseline = self.power.get()
        return not baseline or peers_power < config.spin_power_ratio * baseline

    def _waiting(self, gpus: pl.DataFrame, config: HangConfig) -> pl.DataFrame:
        """GPUs waiting in a window: idle, or pegged below ``spin_power_ratio`` of the job's
        progressing power (an NCCL kernel busy-polling)."""
        baseline = self.power.get()
        util = gpus.get_column("util")
        waits = util < config.idle_util
        if baseline:
            waits = waits | (util >= config.spin_util) & (
                gpus.get_column("power_w") < config.spin_power_ratio * baseline
            )
        return _gpus_where(gpus, waits)

    def _resumed(self, gpus: pl.DataFrame, config: HangConfig) -> bool:
        """Whether a GPU that waited earlier in the spell works again (busy, drawing at least
        half-way from ``spin_power_ratio`` of the job's progressing power to all of it). A
        rank leaves an NCCL wait only once every peer joined the collective, so the job moved
        on: no frozen wait, whatever the other GPUs' older samples still show. Half-way, not
        the ratio itself: a spinning GPU's power is noisy about a level close to that ratio,
        and one sample just over it would restart a spell that never ended (a rank stuck in
        host code timed afresh every minute), whereas a GPU back at work draws about the
        job's progressing power."""
        baseline = self.power.get()
        if self.waited is None or self.waited.is_empty() or not baseline:
            return False
        at_work = (1.0 + config.spin_power_ratio) / 2 * baseline
        util, power = gpus.get_column("util"), gpus.get_column("power_w")
        working = _gpus_where(gpus, (util >= config.busy_util) & (power >= at_work))
        return not working.join(self.waited, on=list(_GPU), how="semi").is_empty()

    def _healthy(self, gpus: pl.DataFrame, end: int, config: HangConfig) -> None:
        """A healthy snapshot; GPUs it lacks (sampled less often than it lasts) keep their last
        healthy values for three baseline periods. The job's progressing power (``power``) is
        what its work would draw on a pegged GPU: the snapshot's power over its utilisation.
        A wait is told from work only on pegged GPUs (``spin_util``), and a job whose GPUs
        work 85% of the time draws 15% less than it would pegged: compared with its own power,
        a busy-polling NCCL kernel at 55% of it would pass for work, and its snapshots would
        become the baseline."""
        power = gpus.get_column("power_w").median()
        util = gpus.get_column("util").median()
        since = end - round(3 * config.baseline_every_s * US)
        self.healthy = _stamped(gpus, end, self.healthy, since)
        if power is not None and util is not None:
            pegged = 100.0 / min(max(float(util), config.busy_util), 100.0)  # type: ignore[arg-type]
            self.power.update(float(power) * pegged)  # type: ignore[arg-type]


def _stamped(gpus: pl.DataFrame, end: int, held: pl.DataFrame | None, since: int) -> pl.DataFrame:
    """``gpus`` stamped ``seen_at`` ``end``, with the GPUs of ``held`` (rows stamped before)
    that it lacks and that were seen at ``since`` or later, sorted by GPU then: in one query,
    where each eager call would be one. None when ``gpus`` are the GPUs of ``held`` in its
    order (a window of GPUs sampled every second): then it lacks none, and is sorted."""
    stamp = pl.Series("seen_at", [end], pl.Int64).new_from_index(0, gpus.height)
    if held is None or _same_gpus(gpus, held):
        return gpus.hstack([stamp])
    query = gpus.lazy().with_columns(pl.lit(end, pl.Int64).alias("seen_at"))
    columns = [*gpus.columns, "seen_at"]
    recent = pl.col("seen_at") >= since
    carried = held.lazy().join(query, on=list(_GPU), how="anti").filter(recent)
    return collect(pl.concat([query, carried.select(columns)]).sort(list(_GPU)))


def _same_gpus(gpus: pl.DataFrame, other: pl.DataFrame) -> bool:
    """Whether ``gpus`` and ``other`` hold the same GPUs in the same order (compared column by
    column, without a query)."""
    return gpus.height == other.height and all(
        gpus.get_column(key).equals(other.get_column(key)) for key in _GPU
    )


def verdict(
    telemetry: JobTelemetry,
    now: int,
    config: HangConfig,
    feed_at: int | None = None,
    spacing_us: int = 0,
) -> str:
    """The GPUs' state in the latest silent window, if it is recent (two windows, or the
    cluster's telemetry spacing ``spacing_us`` and a window where that is longer: a job on
    nodes scraped every minute has no rows in most windows): as of ``now``, or, when the
    telemetry feed as a whole delivered nothing since ``feed_at`` (a collector down, the end of
    a replay), as of then: a job's GPUs are not missing when every GPU is."""
    seen = now if feed_at is None else min(now, feed_at)
    recent = max(2 * round(config.window_s * US), spacing_us + round(config.window_s * US))
    if telemetry.latest is None or seen - telemetry.latest_end > recent:
        return NO_TELEMETRY
    return telemetry.state


def held_us(
    telemetry: JobTelemetry,
    now: int,
    config: HangConfig,
    feed_at: int | None = None,
    spacing_us: int = 0,
) -> int:
    """How long the GPUs have corroborated a hang without a break (0 when they do not now)."""
    since = telemetry.corroborated_since
    if since is None or verdict(telemetry, now, config, feed_at, spacing_us) not in CORROBORATING:
        return 0
    return now - since


def _state(telemetry: JobTelemetry, gpus: pl.DataFrame, config: HangConfig) -> str:
    if gpus.is_empty():
        return NO_TELEMETRY
    util = gpus.get_column("util")
    if int((util >= config.busy_util).sum()) * 2 < gpus.height:
        idle = int((util < config.idle_util).sum())
        return "idle" if idle * 2 >= gpus.height else "mixed"
    stopped = telemetry.stopped(gpus, config)
    if not stopped.is_empty():
        if stopped.get_column("pegged").any():
            return GPU_STUCK
        if stopped.get_column("node").n_unique() > 1:
            return "writers"
        return GPU_STUCK if stopped.get_column("stuck").any() else "rank stopped"
    busy = util >= config.busy_util
    if float(util.filter(busy).median()) < config.spin_util:  # type: ignore[arg-type]
        return "working"
    baseline = telemetry.power.get()
    power = gpus.get_column("power_w").filter(busy).median()
    if telemetry.healthy is None or not baseline or power is None:
        return "busy"
    ratio = float(power) / baseline  # type: ignore[arg-type]
    return "spinning" if ratio < config.spin_power_ratio else "working"


@dataclass(frozen=True)
class Blame:
    """The nodes the evidence points at with each node's evidence, and the stuck ranks (on
    those nodes, or with no node at fault when only the ranks' behaviour shows)."""

    nodes: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)
    stuck: str = ""
    """What shows the stuck ranks when no node is at fault (empty otherwise)."""

    @property
    def why(self) -> str:
        return "; ".join(f"{node}: {self.reasons[node]}" for node in self.nodes)

    @property
    def nodes_went_silent(self) -> bool:
        """Every blamed node stopped reporting: a node failure rather than a hang."""
        return bool(self.nodes) and all(r == SILENT_NODE for r in self.reasons.values())


def culprits(
    job: JobProgress | None,
    telemetry: JobTelemetry,
    config: HangConfig,
    kernel: dict[str, str] | None = None,
    stopped_with: Callable[[str], bool] | None = None,
) -> Blame:
    """Nodes the evidence points at, when they are a minority of the job; otherwise the ranks
    that look stuck. ``kernel`` maps nodes to a hardware error their kernel logged lately;
    ``stopped_with`` tells whether a node whose telemetry stopped stopped when the job did
    (None: every such node did)."""
    share = config.max_culprit_fraction
    healthy = telemetry.healthy
    gpus = healthy.height if healthy is not None else 0
    reasons: dict[str, str] = {}
    # Read as columns, not filtered as frames: a frame's filter is a query, and this runs every
    # second of a silence on a window of a job's GPUs.
    stopped = telemetry.stopped(telemetry.latest, config)
    if stopped.height > share * max(gpus, 1):
        stopped = _NO_GPUS
    nodes, stuck = stopped.get_column("node"), stopped.get_column("stuck")
    for node in sorted(set(nodes.filter(stuck).to_list())):
        reasons.setdefault(node, "its GPU looks stuck (stopped as the others wait, yet not idle)")
    heard, known = telemetry.heard(), telemetry.known()
    idle_nodes, idle_gpus = nodes.filter(~stuck), stopped.get_column("gpu").filter(~stuck)
    left_idle = list(zip(idle_nodes.to_list(), idle_gpus.to_list(), strict=True))
    if heard and telemetry.covered(config) and known - heard and not left_idle:
        for node in sorted(known - heard):
            if stopped_with is None or stopped_with(node):
                reasons.setdefault(node, SILENT_NODE)
    if telemetry.since is not None:
        rising = _rising_nodes(telemetry.since)
        if rising and len(rising) <= share * max(gpus, 1):
            for node in sorted(set(rising)):
                reasons.setdefault(node, "hardware error counters rose")
    rank_steps = job.rank_steps if job is not None else {}
    nodes_of_job = known | heard | {node for _, node in rank_steps.values()}
    for node, line in sorted((kernel or {}).items()):
        if node in nodes_of_job:
            reasons.setdefault(node, f"its kernel logged {line}")
    if reasons and (len(nodes_of_job) <= 1 or len(reasons) <= share * len(nodes_of_job)):
        ranks = sorted(r for r, (_, node) in rank_steps.items() if node in reasons)
        return Blame(tuple(sorted(reasons)), tuple(ranks), reasons)
    per_node = Counter(healthy.get_column("node").to_list()) if healthy is not None else Counter()
    return _stuck_ranks(rank_steps, left_idle, per_node, share)


def _rising_nodes(since: pl.DataFrame) -> list[str]:
    """The node of each GPU whose hardware counters rose (``since``'s rows with a rise), as
    column sums: a filter of the frame is a query."""
    risen = np.zeros(since.height, np.int64)
    for name in EVIDENCE_COLUMNS:
        column = since.get_column(name)
        if column.null_count():  # a rise not known is none (as in a horizontal sum)
            column = column.fill_null(0)
        risen += column.to_numpy().astype(np.int64)
    if not risen.any():
        return []
    nodes: list[str] = since.get_column("node").filter(pl.Series(risen > 0)).to_list()
    return nodes


def _stuck_ranks(
    rank_steps: dict[int, tuple[int, str]],
    idle: list[tuple[str, int]],
    per_node: Counter[str],
    share: float,
) -> Blame:
    """No node at fault: the ranks whose GPU went idle while the others wait (``idle``: their
    node and GPU; when every rank of that node prints, the n-th of them runs on its n-th GPU)
    and the ranks a step behind the others."""
    lagging = _lagging_ranks(rank_steps)
    if len(lagging) > share * max(len(rank_steps), 1):
        lagging = []
    on_node: dict[str, list[int]] = {}
    for rank, (_, node) in sorted(rank_steps.items()):
        on_node.setdefault(node, []).append(rank)
    ranks = set(lagging)
    for node, gpu in idle:
        local = on_node.get(node, [])
        if len(local) == per_node[node] and gpu < len(local):
            ranks.add(local[gpu])
    shown = [f"{node} GPU {gpu}" for node, gpu in idle]
    what = []
    if shown:
        what.append(f"{', '.join(shown)} went idle while the others wait")
    if lagging:
        what.append(f"rank {', '.join(map(str, sorted(lagging)))} a step behind")
    return Blame(ranks=tuple(sorted(ranks)), stuck="; ".join(what))


def _summed(since: pl.DataFrame | None, rises: pl.DataFrame) -> pl.DataFrame:
    """Counter rises per GPU added up over the silence, sorted by GPU like the windows: a window
    of the same GPUs as the sum so far (the usual case) is added column by column."""
    if since is None:
        return rises
    keys = ("node", "gpu")
    if _same_gpus(since, rises):  # a frame of the columns, where ``with_columns`` is a query
        return pl.DataFrame(
            [since.get_column(k) for k in keys]
            + [since.get_column(c) + rises.get_column(c) for c in EVIDENCE_COLUMNS]
        )
    return pl.concat([since, rises]).group_by(keys).agg(pl.all().sum()).sort(keys)


def _lagging_ranks(rank_steps: dict[int, tuple[int, str]]) -> list[int]:
    if len(rank_steps) < 2:
        return []
    newest = max(step for step, _ in rank_steps.values())
    return [rank for rank, (step, _) in rank_steps.items() if step < newest]
