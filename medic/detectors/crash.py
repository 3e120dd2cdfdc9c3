"""``crash``: a rank hit a fatal error, or the job ended FAILED with a non-zero exit code.

The first fatal sign of a job opens a pending incident that is held for ``hold_s`` of event
time (released by watermarks) before it goes out, so that hardware evidence arriving in the
same moment (an Xid, an uncorrectable ECC error) is reported by ``gpu_fault`` instead: the
first detection of an incident must name the right kind and culprit, since the pipeline
suppresses the later ones. While a GPU or node of the job has stopped reporting telemetry the
hold extends (up to ``gap_wait_s``) so that ``gpu_fault`` or ``node_failure`` can confirm it;
if it stays gone and the job shows only its peers' complaints (no error of a rank's own), they
are that failure's consequence and no crash is reported (so is a root error right after a
complaint on its node: torchrun's traceback for a rank that died of the abort). So are
the errors of a job after hardware evidence against one of its GPUs or nodes, however late
(a NCCL watchdog may only fire half an hour after a GPU fell off the bus), and the errors that
follow a line reporting the job stuck (a watchdog timeout aborts the process: that is the
``hang`` detector's, from the moment the line says the job got stuck).

A crash blames no node: software errors and the collateral NCCL errors of peers never do. Its
ranks are those its launcher reports dead when it reports any (``failed_ranks``: torchrun's
root cause, mpirun's first failed process, srun's failed tasks), with the hosts they ran on.
Errors that a program may survive (a traceback, an exception line) wait up to ``confirm_s``
for the process death that confirms them. Signs that follow a deliberate end (a user's
cancel, the time limit, a preemption) are its consequence and are dropped; an end that follows
a process's own failure exit (srun cancelling the step after a task exited with code 1) is
that failure's consequence, and the crash pending before it stays.

A finite text (``medic diagnose``) has no scheduler to report the job's end: when the input
ends (``at_end``), the errors a job itself reported (an entry names them, or the second layer
reads a report in them) that wait for their confirmation, the last of them after the job's last
sign of life (a step, a line at a lower severity or saying it recovers), are the last thing the
text says of it (a node's kernel or a daemon's lines are no job's end, unless the second layer
reads a GPU or node failure in them: a ``dmesg`` read alone). They are reported as
``suspect`` (their evidence says the fate is unknown): an operator reading the text would
conclude the same, and nothing acts on it by default. In a live stream the input never ends and
such errors lapse.

Lines no catalogue entry describes (the second layer's ``unmatched:<family>`` signs), and those
a ``generic`` entry names only the form of (a Python exception) where a family's strong term is
in them, carry the kind their vocabulary reads as. A job whose death no fatal entry of the
catalogue explains takes the reading of its earliest such line (or of a later line of the same
report, within ``REPORT_US``: one that names a family, where the first said only that the
process ended; one that reads as a hang, where the first reads as a crash): a hang,
a GPU fault or a node failure blaming the node that printed it (a line about a peer's address
blames the host that announced that address in the job's start-up lines, else none), of tier
``suspect`` (no signature matched: the default rules act on none of it) and evidence saying
so; a crash reading stays a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from medic.config import NonNegative
from medic.detectors.attribution import (
    MAX_EVIDENCE,
    Complaints,
    Evidence,
    JobEvidence,
    evidence_rows,
)
from medic.detectors.base import CONFIRMED, SUSPECT, Detection
from medic.detectors.fabric import Addresses
from medic.detectors.failed_ranks import FailedRanks
from medic.detectors.incidents import IncidentBook, WatchesLiveness
from medic.detectors.liveness import Liveness
from medic.frames import holds
from medic.ingest.base import Batch
from medic.parse.catalogue import Catalogue, builtin_catalogue
from medic.parse.failure_lines import GENERAL
from medic.parse.signatures import UNMATCHED
from medic.slurm import JOB_CRASH_STATES, JOB_NODE_FAILURE_STATES
from medic.timeutil import US

HARDWARE_KINDS = ("gpu_fault", "node_failure")
EXPLAINING_KINDS = (*HARDWARE_KINDS, "hang")
"""Fatal evidence of these kinds explains a job's later errors."""
READS = {"hang": "a hang", "gpu_fault": "a GPU fault", "node_failure": "a node failure"}
"""How a summary words the kind that unmatched text reads as."""
REPORT_US = 1 * US
"""The lines an error's report spans from its first: a first line that names no family, only
that the process ended ("exit code 137", "Aborted"), gives way to the first of its later lines
that names one (what ended it); a crash reading gives way to one that reads as a hang (a
runtime's "api call failed", then "the internal task times out": the same error, explained). A
timeout later than that follows from the failure. A hardware reading does not take over a
crash's: a runtime's error lists the failed ops' messages under it, a driver's words among
them, whatever failed."""
KILLS = ("slurm_memory_limit_kill", "pbs_memory_limit_kill", "slurm_oom_kill", "srun_task_oom")
"""Catalogue entries in which the scheduler says it kills the job's processes for their own
demand (a memory limit): the cancel or deletion that follows is that kill's, no deliberate
end."""
VAGUE = f"{UNMATCHED}{GENERAL}"
"""The sign of an unmatched line that names no family (at severity fatal: it reports an end)."""
RETENTION_US = 3600 * US
"""How long the state of a job the scheduler never reports ending is kept."""


@dataclass(frozen=True)
class CrashConfig:
    """``[detectors.crash]``: how long a crash waits for its root cause to show."""

    hold_s: NonNegative = 3.0
    """Event time a confirmed crash waits for hardware evidence before it is reported."""
    gap_hint_s: NonNegative = 2.5
    """A telemetry gap this long on one of the job's GPUs or nodes may be a dying GPU or node."""
    gap_wait_s: NonNegative = 30.0
    """Longest extra wait for such a gap (above gpu_fault.vanish_s and node_failure.silence_s);
    a gap still open then is a failed GPU or node, and peers' complaints its consequence."""
    confirm_s: NonNegative = 60.0
    """How long a survivable error (a traceback) waits for the process death that confirms it."""
    end_grace_s: NonNegative = 5.0
    """Signs this close before a deliberate end (cancel, time limit) are its consequence."""
    fabric_wait_s: NonNegative = 25.0
    """A crash with no error of a rank's own, of a job whose lines show a fabric error that may be
    a failed node (a port error, a peer's retries exhausted, which node_failure holds for
    ``fabric_hold_s``), waits this long after it: it is that failure's consequence, not a crash.
    A crash with an error of its own is reported as usual (the fabric error follows from it)."""


Reading = tuple[int, str, str | None, bool]
"""An unmatched sign's time, the kind it reads as, the node it names and whether its line named
no family, only that the process ended (an exit code, an abort)."""


def _ended_only(earliest: Reading) -> bool:
    return earliest[3]


def _read_as_crash(earliest: Reading) -> bool:
    return earliest[1] == "crash"


@dataclass
class _Pending:
    incident: JobEvidence
    confirmed_at: int | None = None
    nodes: set[str] = field(default_factory=set)
    explained: bool = False
    """A fatal root error of a catalogue entry is among the signs."""
    killed: int | None = None
    """When the scheduler said it kills the job for its own demand (``KILLS``)."""
    reading: Reading | None = None
    """The earliest unmatched sign (or the later line of its report that explains it)."""
    last: int = 0
    """The event time of the latest of the incident's signs."""
    spoken: bool = False
    """The job's own output (its ``app`` lines) reports an error: an entry names it (not a
    ``context`` line short of a death, which only accompanies an error: a step cancelled is
    printed for a user's cancel too), or the second layer reads a report in it (not only a
    mention of an Xid). A node's kernel or a daemon's log speaks for a job only where the layer
    reads a GPU or node failure in it."""


def _own_error(pending: _Pending) -> bool:
    """A rank's own error (a root sign) leads the incident, not only peers' complaints."""
    root = pending.incident.root
    return root is not None and root.role == "root"


class CrashDetector(WatchesLiveness):
    """Fatal errors on ranks and failed jobs, held briefly for hardware evidence."""

    name = "crash"
    streams = frozenset({"signatures", "scheduler", "gpu_latest", "failed_ranks"})
    Config = CrashConfig

    uses_catalogue = True

    def __init__(
        self, config: CrashConfig | None = None, catalogue: Catalogue | None = None
    ) -> None:
        self.config = config or CrashConfig()
        self.catalogue = catalogue or builtin_catalogue()
        self.liveness = Liveness()
        self.book = IncidentBook(self.name, self.name, 0, self.liveness)
        """Placement of jobs, and the jobs whose crash went out (quiet until they run again)."""
        self.pending: dict[str, _Pending] = {}
        self.stopping: dict[str, int] = {}
        """Job -> event time a deliberate end (cancel, time limit, preemption) began."""
        self.faulted: dict[str, int] = {}
        """Job -> event time of hardware evidence against one of its GPUs or nodes."""
        self.fabric: dict[str, int] = {}
        """Job -> event time of its first fabric error that may be a failed node."""
        self.complaints = Complaints()
        """Peers' complaints per node: a root error right after one on its node (torchrun's
        traceback for a rank that died of it) is that complaint's consequence."""
        self.failed = FailedRanks()
        """The ranks launchers report dead, per job: they name a crash's ranks."""
        self.addresses = Addresses()
        """The hosts of fabric addresses: a line about a peer's address names that host."""

    def state_size(self) -> int:
        return (
            len(self.book)
            + len(self.liveness)
            + len(self.pending)
            + len(self.stopping)
            + len(self.faulted)
            + len(self.fabric)
            + len(self.complaints)
            + len(self.failed)
            + len(self.addresses)
        )

    def update(self, batch: Batch) -> list[Detection]:
        if batch.num_rows == 0:
            return []
        if batch.stream == "gpu_latest":
            self.liveness.observe_gpu(batch.frame)
        elif batch.stream == "scheduler":
            self._scheduler(batch)
        elif batch.stream == "signatures":
            self._signatures(batch.frame)
        elif batch.stream == "failed_ranks":
            self.failed.observe(batch.frame)
        return []

    def at_end(self, alive: Mapping[str, int]) -> list[Detection]:
        """The input ends here (a finite text; ``alive``: each job's last sign of life in it).
        Each job's reported errors that still wait for the death that confirms them, when the
        last of them came no earlier than its last sign of life (a step read from the error's
        own line, a bar left without its newline, came before it), are reported as a
        ``suspect`` whose fate the text does not hold; not those that only follow a fabric error
        that may be a failed node (``fabric_wait_s``): they wait for ``node_failure``'s
        verdict on it, as in a live stream."""
        found = []
        for job_id, pending in list(self.pending.items()):
            if (
                pending.confirmed_at is not None
                or not pending.spoken
                or alive.get(job_id, -1) > pending.last
                or job_id in self.faulted
                or (self._fabric_before(job_id, pending) is not None and not _own_error(pending))
            ):
                continue
            del self.pending[job_id]
            self.book.reported.add(job_id)
            found.append(self._detection(pending, unconfirmed=True))
        return found

    def advance(self, watermark: int) -> list[Detection]:
        cfg = self.config
        found = []
        for job_id, pending in list(self.pending.items()):
            if pending.confirmed_at is None:
                if watermark - pending.incident.onset > cfg.confirm_s * US:
                    del self.pending[job_id]
                continue
            if watermark < pending.confirmed_at + cfg.hold_s * US:
                continue
            gap = self._gap(pending, pending.confirmed_at)
            if (
                gap >= cfg.gap_hint_s * US
                and watermark - pending.confirmed_at < cfg.gap_wait_s * US
            ):
                continue
            own_error = _own_error(pending)
            fabric = self._fabric_before(job_id, pending)
            wait = round(cfg.fabric_wait_s * US)
            if fabric is not None and not own_error and watermark < fabric + wait:
                continue
            del self.pending[job_id]
            unexplained = gap < cfg.gap_wait_s * US and fabric is None
            if job_id not in self.faulted and (own_error or unexplained):
                self.book.reported.add(job_id)
                found.append(self._detection(pending))
        stale = watermark - RETENTION_US
        for state in (self.stopping, self.faulted, self.fabric):
            for job_id in [j for j, t in state.items() if t < stale]:
                del state[job_id]
        self.book.forget_ended(stale)
        self.liveness.forget_before(stale)
        self.complaints.forget_before(stale)
        self.failed.forget_before(stale)
        return found

    def _fabric_before(self, job_id: str, pending: _Pending) -> int | None:
        """The time of the job's first fabric error that may be a failed node, when it came no
        earlier than ``fabric_wait_s`` before the incident began: with no error of a rank's own,
        the incident is that failure's consequence."""
        fabric = self.fabric.get(job_id)
        wait = round(self.config.fabric_wait_s * US)
        return fabric if fabric is not None and fabric >= pending.incident.onset - wait else None

    def _gap(self, pending: _Pending, before: int) -> int:
        """The longest telemetry gap among the job's GPUs and nodes that began by ``before``."""
        info = self.book.jobs.jobs.get(pending.incident.job_id)
        nodes = set(info.all_nodes) if info is not None else set()
        gap = self.liveness.longest_gap(sorted(nodes | pending.nodes), began_by=before + US)
        return 0 if gap is None else gap.length

    def _signatures(self, frame: pl.DataFrame) -> None:
        self.addresses.learn(frame)
        self._hardware(frame)
        if frame.get_column("job_id").null_count() == frame.height:
            return
        # Each query below runs only when a column says the batch holds rows for it.
        kind, role = frame.get_column("kind"), frame.get_column("role")
        if holds(kind, "node_failure"):
            fabric = (
                frame.filter(
                    (pl.col("kind") == "node_failure")
                    & (pl.col("severity") != "fatal")
                    & pl.col("job_id").is_not_null()
                )
                .group_by("job_id")
                .agg(pl.col("time").min().dt.epoch("us"))
            )
            for job_id, time in fabric.iter_rows():
                self.fabric.setdefault(job_id, time)
        if not holds(kind, "crash") and not holds(role, "benign"):
            return
        rows = frame.filter(pl.col("job_id").is_not_null()).with_columns(
            pl.col("time").dt.epoch("us").alias("time_us")
        )
        ends: list[tuple[str, int]] = []
        if holds(role, "benign"):
            benign = rows.filter(pl.col("role") == "benign")
            ends = benign.group_by("job_id").agg(pl.col("time_us").min()).rows()
        for job_id, time in ends:
            self._stop(job_id, time)
        # Signs of a job already reported, or following hardware evidence, change nothing.
        quiet = [*self.book.reported, *self.faulted]
        signs = rows.filter((pl.col("kind") == "crash") & (pl.col("role") != "benign"))
        followed = self.complaints.consequences(signs)
        signs = signs.with_columns(
            pl.when(followed).then(pl.lit("collateral")).otherwise(pl.col("role")).alias("role")
        ).filter(~pl.col("job_id").is_in(quiet))
        if self.stopping and not signs.is_empty():
            stops = pl.DataFrame(
                {"job_id": list(self.stopping), "_stop": list(self.stopping.values())},
                schema={"job_id": pl.String, "_stop": pl.Int64},
            )
            signs = signs.join(stops, on="job_id", how="left", maintain_order="left").filter(
                pl.col("_stop").is_null() | (pl.col("time_us") < pl.col("_stop"))
            )
        if not signs.is_empty():
            self._add_signs(signs)
            for job_id, time in ends:  # signs of the batch just before its end
                self._stop(job_id, time)

    def _hardware(self, frame: pl.DataFrame) -> None:
        """Remember the jobs that hardware evidence (or a line reporting them stuck) concerns:
        their later errors follow from it. A job stuck since after its pending crash began
        keeps that crash: the crash came first."""
        if not holds(frame.get_column("severity"), "fatal"):
            return
        rows = frame.filter(
            pl.col("kind").is_in(EXPLAINING_KINDS) & (pl.col("severity") == "fatal")
        ).select(
            "job_id",
            "node",
            pl.col("time").dt.epoch("us") - pl.col("waited_us").fill_null(0),
            pl.col("kind") == "hang",
        )
        for job_id, node, since, stuck in rows.iter_rows():
            for job in self.book.concerned(job_id, node, since):
                pending = self.pending.get(job)
                if stuck and pending is not None and pending.incident.onset < since:
                    continue
                self.faulted[job] = min(since, self.faulted.get(job, since))
                self.pending.pop(job, None)

    def _add_signs(self, signs: pl.DataFrame) -> None:
        """Each job's signs join its pending incident: its earliest root errors, then its
        earliest other errors (up to ``MAX_EVIDENCE`` of each), counted in full."""
        if "reading" not in signs.columns:
            signs = signs.with_columns(pl.lit(None, pl.String).alias("reading"))
        hardware = pl.col("reading").is_in(HARDWARE_KINDS)
        jobs = signs.group_by("job_id", maintain_order=True).agg(
            pl.len().alias("count"),
            pl.col("node").drop_nulls().unique().alias("nodes"),
            pl.col("time_us").filter(pl.col("severity") == "fatal").min().alias("fatal"),
            pl.col("time_us").max().alias("last"),
            (
                (
                    (pl.col("source") == "app")
                    & pl.when(pl.col("signature").str.starts_with(UNMATCHED))
                    .then(pl.col("severity") == "error")
                    .otherwise((pl.col("role") != "context") | (pl.col("severity") == "fatal"))
                )
                | (
                    pl.col("source").ne_missing("app")
                    & hardware
                    & (pl.col("severity") != "warning")
                )
            )
            .any()
            .alias("spoken"),
        )
        other = (pl.col("role") != "root").alias("_other")
        kept = (
            signs.with_columns(other)
            .sort("_other", "time_us", maintain_order=True)
            .filter(pl.int_range(pl.len()).over("job_id", "_other") < MAX_EVIDENCE)
        )
        evidence: dict[str, list[Evidence]] = {}
        for job_id, item in zip(
            kept.get_column("job_id").to_list(), evidence_rows(kept, hardware=False), strict=True
        ):
            evidence.setdefault(job_id, []).append(item)
        for job_id, count, nodes, fatal, last, spoken in jobs.iter_rows():
            pending = self.pending.setdefault(job_id, _Pending(JobEvidence(job_id)))
            pending.last = max(pending.last, int(last))
            pending.spoken = pending.spoken or bool(spoken)
            pending.incident.add(evidence[job_id], count)
            pending.nodes.update(n for n in nodes if n)
            if fatal is not None and pending.confirmed_at is None:
                pending.confirmed_at = int(fatal)
        self._readings(signs)

    def _readings(self, signs: pl.DataFrame) -> None:
        """Note per job whether a fatal catalogue root is among ``signs`` (with ``reading``), and
        its earliest sign's reading."""
        unmatched = pl.col("signature").str.starts_with(UNMATCHED)
        read = pl.col("reading").is_not_null()
        explained = signs.filter(
            ~unmatched & ~read & (pl.col("role") == "root") & (pl.col("severity") == "fatal")
        )
        for job_id in explained.get_column("job_id").unique().to_list():
            self.pending[job_id].explained = True
        kills = signs.filter(pl.col("signature").is_in(KILLS))
        for job_id, time in kills.group_by("job_id").agg(pl.col("time_us").min()).iter_rows():
            pending = self.pending[job_id]
            pending.killed = time if pending.killed is None else min(pending.killed, time)
        where = (
            pl.when(pl.col("peer").is_not_null())
            .then(self.addresses.host_of(pl.col("peer")))
            .otherwise(pl.coalesce("host", "node"))
            .alias("_where")
        )
        vague = ((pl.col("signature") == VAGUE) & (pl.col("severity") == "fatal")).alias("_vague")
        ordered = signs.filter(read).sort("time_us", maintain_order=True)
        first = ordered.group_by("job_id", maintain_order=True).first()
        for job_id, time, reading, place, only_ended in first.select(
            "job_id", "time_us", "reading", where, vague
        ).iter_rows():
            pending = self.pending[job_id]
            if pending.reading is None or time < pending.reading[0]:
                pending.reading = (int(time), reading, place, only_ended)
        for explains, gives_way in (
            (~vague, _ended_only),
            (pl.col("reading") == "hang", _read_as_crash),
        ):
            for job_id, time, reading, place in (
                ordered.filter(explains)
                .group_by("job_id", maintain_order=True)
                .first()
                .select("job_id", "time_us", "reading", where)
                .iter_rows()
            ):
                earliest = self.pending[job_id].reading
                if (
                    earliest is not None
                    and gives_way(earliest)
                    and 0 <= time - earliest[0] <= REPORT_US
                ):
                    self.pending[job_id].reading = (earliest[0], reading, place, False)

    def _stop(self, job_id: str, time: int) -> None:
        """A deliberate end began at ``time``: later signs of the job are its consequence. A
        crash pending since before a process of the job exited with a failure code of its own
        stays: that exit, not the end, was first (the launcher stopped the rest for it)."""
        self.stopping[job_id] = min(time, self.stopping.get(job_id, time))
        pending = self.pending.get(job_id)
        if pending is None or self.failed.exited_before(job_id, time):
            return
        if pending.killed is not None and pending.killed <= time:
            return  # the scheduler's kill for the job's own demand: the end is the kill's
        if (
            pending.confirmed_at is None
            or pending.incident.onset >= time - self.config.end_grace_s * US
        ):
            del self.pending[job_id]

    def _scheduler(self, batch: Batch) -> None:
        changes = self.book.observe(batch)
        for job_id in changes.started:
            self.stopping.pop(job_id, None)
            self.faulted.pop(job_id, None)
        for job_id in changes.ended:
            info = self.book.jobs.jobs[job_id]
            end = info.ended_at if info.ended_at is not None else 0
            if info.state in JOB_NODE_FAILURE_STATES:  # node_failure's
                self.pending.pop(job_id, None)
            elif (
                info.state in JOB_CRASH_STATES
                and info.exit_code != 0
                and job_id not in self.book.reported
                and job_id not in self.faulted
            ):
                self._failed(job_id, info.state, info.exit_code, end, info.all_nodes)
            elif info.state not in JOB_CRASH_STATES:
                self._stop(job_id, end)

    def _failed(
        self, job_id: str, state: str, exit_code: int | None, end: int, nodes: tuple[str, ...]
    ) -> None:
        pending = self.pending.setdefault(job_id, _Pending(JobEvidence(job_id)))
        meaning = self.catalogue.exit_meaning(exit_code)
        what = f"job {state}" + (f" with exit code {exit_code}" if exit_code is not None else "")
        pending.incident.add(
            [Evidence(end, what + (f" ({meaning})" if meaning else ""), role="context")]
        )
        pending.nodes.update(nodes)
        if pending.confirmed_at is None:
            pending.confirmed_at = end

    def _detection(self, pending: _Pending, unconfirmed: bool = False) -> Detection:
        incident = pending.incident
        since = incident.onset - round(self.config.confirm_s * US)
        info = self.book.jobs.jobs.get(incident.job_id)
        one_node = info is not None and len(info.all_nodes) <= 1
        incident.reported = self.failed.reported(incident.job_id, since, one_node)
        evidence = incident.details()
        if unconfirmed:
            evidence["fate"] = "unknown"
        reading = None if pending.explained or pending.reading is None else pending.reading
        kind, said = "crash", ""
        blamed: tuple[str, ...] = ()
        if reading is not None and reading[1] != "crash":
            _, kind, where, _ = reading
            blamed = (where,) if where and kind in HARDWARE_KINDS else ()
            said = READS.get(kind, kind)
            evidence.update(reading=kind, no_signature=True)
        headline = (
            f"Job {incident.job_id} died of what reads as {said}"
            if said
            else f"Job {incident.job_id} crashed"
        )
        if unconfirmed:
            headline += " (unconfirmed: the text ends before the job's fate)"
        return Detection(
            job_id=incident.job_id,
            kind=kind,
            culprits=blamed,
            ranks=incident.ranks(),
            score=incident.confidence(),
            detector=self.name,
            summary=incident.summary(headline),
            onset=incident.onset,
            evidence=evidence,
            tier=SUSPECT if said or unconfirmed else CONFIRMED,
        )
