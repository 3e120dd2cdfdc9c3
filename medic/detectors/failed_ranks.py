"""The ranks launchers and runtimes report dead, per job (the ``failed_ranks`` stream,
``medic.parse.failed_ranks``), for naming a crash's ranks: who failed, by the launcher's own
account, the first or root failure it names first."""

from __future__ import annotations

import polars as pl

from medic.detectors.attribution import MAX_RANKS, Evidence

MAX_JOBS = 4096
"""Jobs whose reports are kept (the oldest forgotten past it)."""


class FailedRanks:
    """Each job's reported failed ranks, in the order a crash names them."""

    def __init__(self) -> None:
        self.jobs: dict[str, list[tuple[bool, Evidence]]] = {}
        """Job -> (primary, report) per rank, the first report of a rank kept."""

    def __len__(self) -> int:
        return len(self.jobs)

    def observe(self, frame: pl.DataFrame) -> None:
        """Fold in ``failed_ranks`` rows."""
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
                for _, e in known
            ):
                continue
            known.append((bool(primary), Evidence(int(time), what, node=where, rank=rank)))
        while len(self.jobs) > MAX_JOBS:
            del self.jobs[next(iter(self.jobs))]

    def reported(self, job_id: str, since: int) -> list[Evidence]:
        """The job's reports from ``since`` on: primary (first or root) failures first, then
        in order of time."""
        found = [(p, e) for p, e in self.jobs.get(job_id, ()) if e.time >= since]
        return [e for _, e in sorted(found, key=lambda pe: (not pe[0], pe[1].time))]

    def forget_before(self, cutoff: int) -> None:
        for job_id in list(self.jobs):
            kept = [(p, e) for p, e in self.jobs[job_id] if e.time >= cutoff]
            if kept:
                self.jobs[job_id] = kept
            else:
                del self.jobs[job_id]
