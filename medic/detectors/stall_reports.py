"""Stalls a job got over: the ranks a stall report named at fault, once training went on.

A framework's stall report (Horovod's stall inspector: "waiting for remainder of ranks for
more than 60 seconds", then ``Missing ranks:`` and a line per rank; its older stall check's
``[missing ranks: 6]``; any line naming ranks at fault beside a stuck report) says which ranks
the others wait for. While the wait lasts it is a suspect hang (``medic.detectors.hang``).
When the job then prints training steps again, the stall is over and the named ranks were
late, not dead: each such stall is one ``verdict`` sample of each rank it named, for the
straggler detector's rank vote (``medic.detectors.rank_share``). A rank is counted once per
stall however many reports the stall printed (Horovod repeats its warning every minute), so a
straggler needs the same rank late in several stalls, training going on between them.

A rank late now and then by the job's own design (rank 0 evaluating or saving while the others
wait) reads the same in stall reports, so a straggler these samples alone name is of tier
``suspect`` (logged and notified, not acted on by the default rules) unless the job also runs
slower than its own baseline (``StragglerDetector._detection``).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from medic.detectors.progress_state import Step
from medic.frames import holds

STALLED = "stall_report"
"""The ``source`` of the samples: a stall report's ranks, the stall over."""
_HANG_ROOTS = (pl.col("kind") == "hang") & (pl.col("role") == "root")


class StallReports:
    """Per job, the ranks its stall reports named at fault since its last training step."""

    def __init__(self) -> None:
        self.named: dict[str, dict[int, tuple[int, str | None]]] = {}
        """job -> rank -> (time of the latest report naming it, the node that printed it)."""

    def __len__(self) -> int:
        return len(self.named)

    def observe(self, hits: pl.DataFrame) -> None:
        """Fold a ``signatures`` batch in: the hang entries' root rows that name a rank."""
        if not holds(hits.get_column("kind"), "hang"):
            return
        named = hits.filter(
            _HANG_ROOTS & pl.col("rank").is_not_null() & pl.col("job_id").is_not_null()
        )
        rows = named.select("job_id", "rank", pl.col("time").dt.epoch("us"), "node")
        for job_id, rank, time, node in rows.iter_rows():
            self.named.setdefault(job_id, {})[rank] = (time, node)

    def resumed(self, steps: Sequence[Step]) -> pl.DataFrame | None:
        """The ``rank_timing`` rows of the stalls ``steps`` ended: a verdict per rank named
        before a job's newest step, at that step's time; None when no stall ended."""
        if not self.named:
            return None
        newest: dict[str, int] = {}
        for job_id, time, *_ in steps:
            if job_id in self.named:
                newest[job_id] = max(newest.get(job_id, time), time)
        rows: list[tuple[int, str, str, int]] = []
        for job_id, time in newest.items():
            ranks = self.named[job_id]
            over = [rank for rank, (said, _) in ranks.items() if said < time]
            rows.extend((time, job_id, ranks[rank][1] or "", rank) for rank in sorted(over))
            for rank in over:
                del ranks[rank]
            if not ranks:
                del self.named[job_id]
        if not rows:
            return None
        frame = pl.DataFrame(rows, schema=["time", "job_id", "node", "rank"], orient="row")
        return frame.select(
            pl.col("time").cast(pl.Datetime("us", "UTC")),
            "job_id",
            "node",
            pl.col("rank").cast(pl.Int32),
            pl.lit(None, pl.String).alias("rank_node"),
            pl.lit(STALLED).alias("source"),
            pl.lit("stall").alias("metric"),
            pl.lit("verdict").alias("kind"),
            pl.lit(None, pl.Float64).alias("value"),
        )

    def forget(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            self.named.pop(job_id, None)

    def expire(self, before: int) -> None:
        """Drop the reports older than ``before``: a stall no step ended in that long is a
        hang's business, not a late rank's."""
        for job_id in list(self.named):
            ranks = self.named[job_id]
            for rank in [r for r, (said, _) in ranks.items() if said < before]:
                del ranks[rank]
            if not ranks:
                del self.named[job_id]
