"""The goodput ledger for ``medic report``: GPU-hours lost per incident to detection, action,
requeue wait and recomputation since the last checkpoint, against the NCCL watchdog alone,
from the history's measured times (the ``goodput`` macro of migration 0004)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from medic.history.store import HistoryStore

BY_KIND = """
SELECT
    coalesce(kind, 'all') AS kind,
    count(*) AS incidents,
    sum(detect_s * gpus) / 3600 AS detect_gpu_h,
    sum(act_s * gpus) / 3600 AS act_gpu_h,
    sum(requeue_wait_s * gpus) / 3600 AS requeue_wait_gpu_h,
    sum(recompute_s * gpus) / 3600 AS recompute_gpu_h,
    sum(lost_gpu_hours) AS lost_gpu_h,
    sum(watchdog_gpu_hours) AS watchdog_only_gpu_h,
    sum(saved_gpu_hours) AS saved_gpu_h,
    count(*) FILTER (WHERE gpus IS NULL) AS gpus_unknown
FROM goodput(?, ?)
GROUP BY ROLLUP (kind)
ORDER BY GROUPING(kind), kind
"""

ALLOCATED = "SELECT coalesce(sum(gpu_hours), 0) FROM allocated_gpu_hours(?)"


@dataclass(frozen=True)
class Goodput:
    """Lost, watchdog-only and saved GPU-hours per kind, and the share of allocated GPU-hours
    that was not lost (None when no job's allocation is known)."""

    by_kind: pl.DataFrame
    allocated_gpu_hours: float

    @property
    def lost_gpu_hours(self) -> float:
        total = self.by_kind.filter(pl.col("kind") == "all").get_column("lost_gpu_h")
        return float(total[0] or 0.0) if total.len() else 0.0

    @property
    def ratio(self) -> float | None:
        if self.allocated_gpu_hours <= 0:
            return None
        return max(0.0, 1 - self.lost_gpu_hours / self.allocated_gpu_hours)

    def note(self) -> str:
        share = "unknown" if self.ratio is None else f"{self.ratio:.1%}"
        return (
            f"goodput {share} of {self.allocated_gpu_hours:,.1f} allocated GPU-hours; lost = "
            "(detect + act + requeue wait + recompute since the last checkpoint) x GPUs, "
            "measured phases only; watchdog-only = the NCCL watchdog's timeout in place of "
            "detect + act"
        )


def goodput(store: HistoryStore, watchdog_s: float, gpus_per_node: int) -> Goodput:
    frame = pl.from_arrow(store.sql(BY_KIND, [watchdog_s, gpus_per_node]))
    assert isinstance(frame, pl.DataFrame)
    allocated = store.sql(ALLOCATED, [gpus_per_node]).column(0)[0].as_py()
    return Goodput(frame, float(allocated or 0.0))
