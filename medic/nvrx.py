"""NVIDIA's nvidia-resiliency-ext (NVRx) ``ft_launcher``: read what it decides, do not fight it.

``ft_launcher`` restarts a failed worker group inside the allocation, up to ``--max-restarts``
times, and tells the scheduler what it decided through its exit status and its log:

* exit 93 (``DEFAULT_NO_RESTART_EXIT_CODE`` in ``fault_tolerance/utils.py``): NVRx decided not
  to restart (its progress tracker saw no progress across restarts, or attribution said stop);
  a requeue would reproduce the failure. Exit 1: the launcher failed otherwise, typically with
  its restart budget spent (or an unhealthy node leaving, in job arrays).
* log lines from ``fault_tolerance/launcher.py``: ``[<role>] Worker group FAILED. 2/3 attempts
  left; will restart worker group`` (restarting in place; the word is the worker group's
  state, ``UNHEALTHY`` as well as ``FAILED``), ``Progress tracker detected no progress across
  restarts. No more restarts will be attempted.``, ``Another launcher reported
  a no-restart decision (<reason>)``, ``Attribution recommended stopping the job``.
* one JSON file per cycle, ``cycle_info.<job_id>.<attempt>.<cycle>`` (``cycle_info_writer.py``,
  protobuf ``NVRxCycleInfo`` written with its field names): ``job_id``, ``attempt_index``
  (``SLURM_RESTART_COUNT``), ``cycle_number``, ``cycle_start_time`` and ``cycle_end_time`` (ISO
  8601 UTC with ``Z``; the end empty while the cycle runs), ``cycle_log_file``,
  ``active_nodes``/``standby_nodes`` (Slurm hostlists), ``generation`` (a uint64, so a JSON
  string), ``active_ranks``; plus a ``cycle_info.<job_id>.current`` symlink. In a job array
  ``<job_id>`` is the array's id (NVRx reads ``SLURM_ARRAY_JOB_ID`` before ``SLURM_JOB_ID``)
  and names no task: each task needs a directory of its own, and medic reads a subdirectory
  named ``<array_id>_<task>`` (the job id Slurm gives the task) as that task's cycles. Cycles
  read without a task (one directory for the whole array) count for every task of the array.

medic's part: ``NvrxWatch`` (a pipeline observer) keeps, per job, the NVRx restarts and give-ups
its log and exit status show; ``NvrxGuard`` stops medic's requeue while NVRx is restarting in
place or after it decided not to restart; ``write_exclusions`` hands medic's node verdicts to
NVRx in the format of its ``drain_poller.sh`` example (``<dir>/task_<K>.drained``: the drained
nodes of array task K, one per line; empty: clean), which a rendezvous health check reads.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from medic.actions.guards import Verdict
from medic.actions.recovery_config import NvrxConfig
from medic.detectors.base import Detection
from medic.errors import exception_line
from medic.frames import FEW_ROWS
from medic.ingest.base import Batch
from medic.slurm import RUNNING, job_state
from medic.timeutil import US

log = logging.getLogger(__name__)

EXIT_NO_RESTART = 93
CYCLE_FILE = re.compile(r"^cycle_info\.(?P<job>[^.]+)\.(?P<attempt>\d+)\.(?P<cycle>\d+)$")
RESTARTING = (
    r"Worker group (?:FAILED|UNHEALTHY)\. (?P<left>\d+)/(?P<max>\d+) attempts left; "
    r"will restart worker group"
)
GAVE_UP = (
    r"(?P<why>Progress tracker detected no progress across restarts"
    r"|Another launcher reported a no-restart decision"
    r"|Attribution recommended stopping the job)"
)
ANCHOR_WORDS = (
    "Worker group",
    "no progress across restarts",
    "no-restart decision",
    "Attribution recommended",
)
ANCHORS = "|".join(ANCHOR_WORDS)
"""Every NVRx line medic reads holds one of these; a case-sensitive alternation of literals is
the cheapest scan polars offers for it (about 50 ns a line here, less than ``contains_any``),
but it costs tens of microseconds a batch whatever its lines: a batch of few lines is looked
through in Python first."""
RETENTION_US = 7 * 86_400 * US
"""A job unseen this long is forgotten."""
HOSTLIST_PART = re.compile(r"([^,\[]+)(?:\[([^\]]+)\])?([^,\[]*)")


def expand_hostlist(hostlist: str) -> list[str]:
    """A Slurm hostlist (``node[001-004,007],gpu7``) as node names, zero padding kept."""
    names: list[str] = []
    for match in HOSTLIST_PART.finditer(hostlist.strip()):
        prefix, ranges, suffix = match.groups()
        if not ranges:
            names.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{width}d}{suffix}")
    return [n for n in names if n]


def _us(text: str) -> int | None:
    if not text:
        return None
    return round(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * US)


@dataclass(frozen=True)
class Cycle:
    """One NVRx restart cycle, from its ``cycle_info`` file."""

    job_id: str
    attempt: int
    cycle: int
    start: int | None
    end: int | None
    active: tuple[str, ...]
    standby: tuple[str, ...]
    log_file: str


def read_cycles(directory: Path) -> tuple[list[Cycle], int]:
    """The cycles in ``directory`` and in its subdirectories named after an array task
    (``4250_1``: the files there are that task's, whatever their job id says), the ``.current``
    links and temporary files skipped, and how many files could not be read (each logged)."""
    cycles, bad = [], 0
    paths = [*directory.glob("cycle_info.*"), *directory.glob("*_*/cycle_info.*")]
    for path in sorted(paths):
        task = path.parent.name if path.parent != directory else None
        if not CYCLE_FILE.match(path.name) or path.is_symlink():
            continue
        try:
            row: dict[str, Any] = json.loads(path.read_text())
            job_id = str(row["job_id"])
            if task is not None and task.partition("_")[0] == job_id:
                job_id = task
            cycles.append(
                Cycle(
                    job_id=job_id,
                    attempt=int(row.get("attempt_index", 0)),
                    cycle=int(row.get("cycle_number", 0)),
                    start=_us(str(row.get("cycle_start_time", ""))),
                    end=_us(str(row.get("cycle_end_time", ""))),
                    active=tuple(expand_hostlist(str(row.get("active_nodes", "")))),
                    standby=tuple(expand_hostlist(str(row.get("standby_nodes", "")))),
                    log_file=str(row.get("cycle_log_file", "")),
                )
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            bad += 1
            log.warning("nvrx: skipped %s: %s", path.name, exception_line(exc))
    return cycles, bad


@dataclass
class _Job:
    restarted_at: int | None = None
    """Event time of the newest in-place restart (log line or cycle start)."""
    attempts_left: int | None = None
    gave_up: str | None = None
    """Why NVRx decided not to restart, once it did."""
    exit_code: int | None = None
    nodes: tuple[str, ...] = ()
    last_seen: int = 0


@dataclass
class NvrxWatch:
    """Per job: what NVRx did, from ``logs`` and ``scheduler`` batches and cycle files."""

    name: ClassVar[str] = "nvrx"
    streams: ClassVar[frozenset[str]] = frozenset({"logs", "scheduler"})
    jobs: dict[str, _Job] = field(default_factory=dict)
    skipped_files: int = 0

    def update(self, batch: Batch) -> None:
        if batch.stream == "logs":
            self._logs(batch.frame)
        elif batch.stream == "scheduler":
            self._scheduler(batch.frame)

    def advance(self, watermark: int) -> None:
        for job_id in [j for j, s in self.jobs.items() if watermark - s.last_seen > RETENTION_US]:
            del self.jobs[job_id]

    def job(self, job_id: str) -> _Job | None:
        return self.jobs.get(job_id)

    def _logs(self, frame: pl.DataFrame) -> None:
        """A batch's NVRx lines; most batches hold none, which the lines joined in one Python
        string tell for a batch of few lines, one column operation for a larger one (a filter
        is a query, that costs several times more on a second of lines)."""
        messages = frame.get_column("message")
        if frame.height <= FEW_ROWS:
            text = "\n".join(filter(None, messages.to_list()))
            if not any(word in text for word in ANCHOR_WORDS):
                return
        anchored = messages.str.contains(ANCHORS)
        if not anchored.any():
            return
        lines = frame.filter(anchored & pl.col("job_id").is_not_null())
        if lines.is_empty():
            return
        found = lines.select(
            "job_id",
            pl.col("time").dt.epoch("us"),
            pl.col("message").str.extract_groups(RESTARTING).alias("restart"),
            pl.col("message").str.extract(GAVE_UP, 1).alias("why"),
        ).unnest("restart")
        for job_id, time, left, _, why in found.iter_rows():
            job = self.jobs.setdefault(job_id, _Job())
            job.last_seen = max(job.last_seen, time)
            if left is not None:
                job.restarted_at = max(job.restarted_at or time, time)
                job.attempts_left = int(left)
            if why is not None:
                job.gave_up = why

    def _scheduler(self, frame: pl.DataFrame) -> None:
        """Array tasks' nodes while they run (for the exclusion files), and the exit status of
        the jobs NVRx was seen in; a job running again is a new attempt."""
        rows = frame.filter((pl.col("kind") == "job") & pl.col("job_id").is_not_null())
        columns = ("job_id", "state", "nodes", "exit_code", pl.col("time").dt.epoch("us"))
        for job_id, state, nodes, code, time in rows.select(*columns).iter_rows():
            running = job_state(state) == RUNNING
            if job_id not in self.jobs and not (running and "_" in job_id):
                continue
            job = self.jobs.setdefault(job_id, _Job())
            job.last_seen = max(job.last_seen, time)
            job.nodes = tuple(nodes or ()) if running else ()
            if running and job.exit_code is not None:
                job.exit_code, job.gave_up = None, None
            elif not running and code is not None:
                job.exit_code = int(code)

    def ended(self, job_id: str, exit_code: int) -> None:
        """The job, launched by ``ft_launcher``, ended with ``exit_code`` (what Slurm shows)."""
        self.jobs.setdefault(job_id, _Job()).exit_code = exit_code

    def array_tasks(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """Running array tasks by array id: task index -> its nodes (``4242_7`` is task 7)."""
        arrays: dict[str, dict[str, tuple[str, ...]]] = {}
        for job_id, job in self.jobs.items():
            array, _, index = job_id.partition("_")
            if index.isdigit() and job.nodes and job.exit_code is None:
                arrays.setdefault(array, {})[index] = job.nodes
        return arrays

    def read_cycle_files(self, directory: Path) -> None:
        """Fold the cycle files of ``directory`` in: a cycle after the first is an in-place
        restart at its start time."""
        cycles, bad = read_cycles(directory)
        self.skipped_files += bad
        for c in cycles:
            job = self.jobs.setdefault(c.job_id, _Job())
            if c.cycle > 0 and c.start is not None:
                job.restarted_at = max(job.restarted_at or c.start, c.start)
                job.last_seen = max(job.last_seen, c.start)

    def verdict(self, job_id: str, now: int, window_s: float) -> str | None:
        """Why medic must not requeue the job now; None when it may. An array task (``4250_1``)
        also answers to what is known of its array (``4250``): NVRx names cycle files after
        the array, not the task."""
        job = self.jobs.get(job_id)
        array_id, _, index = job_id.partition("_")
        array = self.jobs.get(array_id) if index.isdigit() else None
        if array is not None and array.restarted_at is not None:
            job = job or _Job()
            if job.exit_code is None and (job.restarted_at or 0) < array.restarted_at:
                job = replace(job, restarted_at=array.restarted_at)
        if job is None:
            return None
        if job.exit_code == EXIT_NO_RESTART or job.gave_up is not None:
            why = job.gave_up or f"ft_launcher exited {EXIT_NO_RESTART}"
            return f"NVRx decided not to restart job {job_id} ({why}); a requeue would repeat it"
        if job.exit_code is not None:
            return None  # exit 1 and others: NVRx is done; a requeue on other nodes may help
        if job.restarted_at is not None and now - job.restarted_at <= window_s * US:
            left = "" if job.attempts_left is None else f", {job.attempts_left} attempts left"
            return f"NVRx is restarting job {job_id} in place{left}"
        return None


class NvrxGuard:
    """Stops medic's requeue of a job NVRx is handling (see ``NvrxWatch.verdict``)."""

    def __init__(self, config: NvrxConfig, watch: NvrxWatch) -> None:
        self.config = config
        self.watch = watch

    def review(self, verdicts: list[Verdict], detection: Detection, now: int) -> list[Verdict]:
        out = []
        for verdict in verdicts:
            intent = verdict.intent
            why = None
            if intent.action == "requeue" and intent.job_id and verdict.guard in (None, "monitor"):
                why = self.watch.verdict(intent.job_id, now, self.config.restart_window_s)
            out.append(Verdict(intent, "nvrx", why) if why else verdict)
        return out


def write_exclusions(
    directory: Path, tasks: Mapping[str, Iterable[str]], verdicts: Iterable[str]
) -> list[Path]:
    """For each array task (index -> its nodes), ``task_<index>.drained`` naming its nodes
    that medic holds bad (one per line; empty when none), written atomically and only when
    changed; the files written."""
    bad = set(verdicts)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for index, nodes in sorted(tasks.items()):
        path = directory / f"task_{index}.drained"
        text = "".join(f"{n}\n" for n in sorted(set(nodes) & bad))
        if path.exists() and path.read_text() == text:
            continue
        tmp = directory / f".task_{index}.drained.tmp"
        tmp.write_text(text)
        os.replace(tmp, path)
        written.append(path)
    return written
