"""Slurm's view as a collector records it: one row per observed job or node state change."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl
import pyarrow as pa

from medic import schema
from medic.simulate.clock import Clock


@dataclass(frozen=True)
class SlurmRow:
    time: float
    kind: str
    job_id: str | None
    node: str | None
    state: str
    nodes: list[str] | None = None
    exit_code: int | None = None
    reason: str | None = None


@dataclass
class SlurmLog:
    """Scheduler rows of one recording, appended as the plan is built and rendered."""

    rows: list[SlurmRow] = field(default_factory=list)

    def job(
        self,
        time: float,
        job_id: str,
        state: str,
        nodes: list[str] | None = None,
        exit_code: int | None = None,
        reason: str | None = None,
    ) -> None:
        self.rows.append(SlurmRow(time, "job", job_id, None, state, nodes, exit_code, reason))

    def node(self, time: float, node: str, state: str, reason: str | None = None) -> None:
        self.rows.append(SlurmRow(time, "node", None, node, state, reason=reason))

    def table(self, clock: Clock, seconds: float) -> pa.Table:
        """Rows inside ``[0, seconds)``, sorted by time, as the spec's scheduler table."""
        rows = [r for r in self.rows if 0 <= r.time < seconds]
        if not rows:
            return schema.empty(schema.SCHEDULER)
        frame = pl.DataFrame(
            {
                "time": clock.us([r.time for r in rows]),
                "kind": [r.kind for r in rows],
                "job_id": [r.job_id for r in rows],
                "node": [r.node for r in rows],
                "state": [r.state for r in rows],
                "nodes": [r.nodes for r in rows],
                "exit_code": [r.exit_code for r in rows],
                "reason": [r.reason for r in rows],
            },
            schema={
                "time": pl.Int64,
                "kind": pl.String,
                "job_id": pl.String,
                "node": pl.String,
                "state": pl.String,
                "nodes": pl.List(pl.String),
                "exit_code": pl.Int32,
                "reason": pl.String,
            },
        )
        frame = frame.sort("time", maintain_order=True).with_columns(
            pl.col("time").cast(pl.Datetime("us", "UTC"))
        )
        return schema.conform(frame.to_arrow(), schema.SCHEDULER)
