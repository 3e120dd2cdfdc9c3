"""What every detector needs to know about jobs: state, allocated nodes, rank placement, end.

Each detector owns a ``JobTracker`` and feeds it the batches it sees; the tracker folds a
batch into per-job facts with one polars aggregation, so its Python work is per distinct
job and node in the batch, never per row. A job that ends (a terminal Slurm state) is
reported once by ``observe`` so its owner can free that job's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from medic.ingest.base import Batch
from medic.slurm import JOB_TERMINAL_STATES, PENDING, RUNNING, job_state

RANK_PREFIX = r"^\[rank(\d+)\]:"


@dataclass
class JobInfo:
    """Facts about one job, as far as the streams have shown them."""

    job_id: str
    state: str | None = None
    nodes: tuple[str, ...] = ()
    exit_code: int | None = None
    started_at: int | None = None
    ended_at: int | None = None
    pending_since: int | None = None
    """When the scheduler last showed the job waiting in the queue (None: it has not since it
    last ran)."""
    last_seen: dict[str, int] = field(default_factory=dict)
    rank_nodes: dict[int, str] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.ended_at is None

    @property
    def waiting(self) -> bool:
        """Queued, not running: pending with no row of its own since (a requeued job is listed
        with the nodes of its last attempt, which it no longer holds; rows newer than the
        scheduler's word show it running before the next poll says so)."""
        if self.pending_since is None:
            return False
        return max(self.last_seen.values(), default=0) <= self.pending_since

    @property
    def on_nodes(self) -> bool:
        """Running on its nodes: neither ended nor waiting in the queue."""
        return self.running and not self.waiting

    @property
    def all_nodes(self) -> tuple[str, ...]:
        """Allocated nodes when Slurm told us, else every node seen carrying the job's rows."""
        return self.nodes or tuple(sorted(self.last_seen))


def started_jobs(frame: pl.DataFrame) -> list[str]:
    """Jobs that a scheduler frame shows (re)starting to run: a requeued job is a new attempt."""
    if frame.is_empty():
        return []
    rows = frame.filter(
        (pl.col("kind") == "job") & pl.col("state").str.to_uppercase().str.starts_with(RUNNING)
    )
    return rows.get_column("job_id").drop_nulls().unique().to_list()


class JobTracker:
    """Per-job state, placement and liveness, folded from scheduler, logs and gpu batches."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobInfo] = {}

    def __len__(self) -> int:
        return len(self.jobs)

    def get(self, job_id: str) -> JobInfo:
        info = self.jobs.get(job_id)
        if info is None:
            info = self.jobs[job_id] = JobInfo(job_id)
        return info

    def forget(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)

    def jobs_on(self, node: str, ended_since: int | None = None) -> list[str]:
        """Running jobs that hold ``node`` (not ones waiting in the queue); with ``ended_since``,
        also jobs that ended then or later (a job that failed a moment ago still explains its
        nodes' symptoms)."""
        return [
            j.job_id
            for j in self.jobs.values()
            if node in j.all_nodes
            and (
                j.on_nodes
                or (
                    ended_since is not None and j.ended_at is not None and j.ended_at >= ended_since
                )
            )
        ]

    def observe(self, batch: Batch) -> list[str]:
        """Fold ``batch`` in; return the ids of jobs that this batch ended."""
        if batch.num_rows == 0:
            return []
        if batch.stream == "scheduler":
            return self._observe_scheduler(batch.frame)
        if batch.stream in ("logs", "gpu"):
            self._observe_activity(batch.frame, with_ranks=batch.stream == "logs")
        return []

    def _observe_scheduler(self, frame: pl.DataFrame) -> list[str]:
        rows = frame.filter((pl.col("kind") == "job") & pl.col("job_id").is_not_null())
        ended = []
        for job_id, state, nodes, exit_code, time in rows.select(
            "job_id",
            "state",
            "nodes",
            "exit_code",
            pl.col("time").dt.epoch("us"),
        ).iter_rows():
            info = self.get(job_id)
            base = job_state(state)
            info.state = base
            info.pending_since = time if base == PENDING else None
            if nodes:
                info.nodes = tuple(nodes)
            if base == RUNNING:
                if info.started_at is None or info.ended_at is not None:
                    info.started_at = time
                info.ended_at = None
            elif base in JOB_TERMINAL_STATES and info.ended_at is None:
                info.ended_at = time
                info.exit_code = exit_code
                ended.append(job_id)
        return ended

    def _observe_activity(self, frame: pl.DataFrame, with_ranks: bool) -> None:
        jobs = frame.filter(pl.col("job_id").is_not_null())
        if jobs.is_empty():
            return
        seen = jobs.group_by("job_id", "node").agg(pl.col("time").max().dt.epoch("us"))
        for job_id, node, time in seen.iter_rows():
            self.get(job_id).last_seen[node] = time
        if not with_ranks:
            return
        ranked = jobs.select(
            "job_id",
            "node",
            pl.coalesce(
                pl.col("rank"),
                pl.col("message").str.extract(RANK_PREFIX, 1).cast(pl.Int32, strict=False),
            ).alias("rank"),
        ).filter(pl.col("rank").is_not_null())
        for job_id, node, rank in ranked.unique(["job_id", "rank"]).iter_rows():
            self.get(job_id).rank_nodes[rank] = node
