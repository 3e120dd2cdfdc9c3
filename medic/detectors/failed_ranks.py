"""The ranks launchers and runtimes report dead, per job (the ``failed_ranks`` stream,
``medic.parse.failed_ranks``), for naming a crash's ranks: who failed, by the launcher's own
account, the first or root failure it names first."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from medic.detectors.attribution import MAX_RANKS, Evidence

MAX_JOBS = 4096
"""Jobs whose reports are kept (the oldest forgotten past it)."""


class FailedRanks:
    """Each job's reported failed ranks, in the order a crash names them."""

    def __init__(self) -> None:
        self.jobs: dict[str, list[tuple[bool, Evidence, int | None]]] = {}
        """Job -> (primary, report, local rank) per rank, the first report of a rank kept."""
        self.exited: dict[str, int] = {}
        """Job -> event time of its first report of a process that exited by itself with a
        failure code (1 to 127: no signal's 128 + n), which no cancel or time limit causes."""

    def __len__(self) -> int:
        return len(self.jobs) + len(self.exited)

    def observe(self, frame: pl.DataFrame) -> None:
        """Fold in ``failed_ranks`` rows."""
        own = (
            frame.filter(pl.col("exit_code").is_between(1, 127) & pl.col("signal").is_null())
            .group_by("job_id")
            .agg(pl.col("time").min().dt.epoch("us"))
        )
        for job_id, time in own.iter_rows():
            self.exited[job_id] = min(time, self.exited.get(job_id, time))
        rows = frame.select(
            "job_id",
            pl.col("time").dt.epoch("us"),
            "rank",
            "local_rank",
            pl.coalesce(pl.col("host"), pl.col("node").replace("", None)).alias("where"),
            "end",
            "primary",
        )
        for job_id, time, rank, local, where, end, primary in rows.iter_rows():
            known = self.jobs.setdefault(job_id, [])
            what = end if rank is not None else f"local rank {local}, {end}"
            if len(known) >= MAX_RANKS or any(
                (e.rank, e.what, e.node) == (rank, what, where) if rank is None else e.rank == rank
                for _, e, _ in known
            ):
                continue
            report = Evidence(int(time), what, node=where, rank=rank)
            known.append((bool(primary), report, local))
        while len(self.jobs) > MAX_JOBS:
            del self.jobs[next(iter(self.jobs))]

    def reported(self, job_id: str, since: int, one_node: bool = False) -> list[Evidence]:
        """The job's reports from ``since`` on: primary (first or root) failures first, then
        in order of time. ``one_node``: the job runs on one node (Slurm's allocation, else the
        nodes its lines came from: a file ``medic diagnose`` reads is one node's), where a
        local rank (torchrun's agent: ``failed (exitcode: -9) local_rank: 3``) is the rank."""
        found = [
            (p, replace(e, rank=local) if one_node and e.rank is None and local is not None else e)
            for p, e, local in self.jobs.get(job_id, ())
            if e.time >= since
        ]
        return [e for _, e in sorted(found, key=lambda pe: (not pe[0], pe[1].time))]

    def exited_before(self, job_id: str, time: int) -> bool:
        """Whether a process of the job exited by itself with a failure code before ``time``:
        an end that follows it (srun cancelling the step) is that failure's consequence."""
        return self.exited.get(job_id, time) < time

    def forget_before(self, cutoff: int) -> None:
        for job_id in [j for j, t in self.exited.items() if t < cutoff]:
            del self.exited[job_id]
        for job_id in list(self.jobs):
            kept = [(p, e, local) for p, e, local in self.jobs[job_id] if e.time >= cutoff]
            if kept:
                self.jobs[job_id] = kept
            else:
                del self.jobs[job_id]
