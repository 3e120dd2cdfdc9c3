"""A node's kernel context events, kept to be attached to that node's fault as evidence.

Some kernel events are context rather than faults: a disk remounted read-only, an NVMe
controller reset, a CPU soft lockup, a NIC event (kind none, role context, implicating the
node in the catalogue). They never make a detection; a detector that reports a fault of a node
attaches the ones seen on it within a window before the fault (``KernelContext.of``).
"""

from __future__ import annotations

from collections import deque

import polars as pl

from medic.detectors.attribution import Evidence, evidence_rows

Located = tuple[str | None, Evidence]
"""Evidence and the job it was reported with (None: whatever runs on its node)."""


class KernelContext:
    """Per node: its recent kernel context events, oldest first."""

    def __init__(self, window_us: int) -> None:
        self.window_us = window_us
        self.events: dict[str, deque[Evidence]] = {}

    def __len__(self) -> int:
        return sum(len(events) for events in self.events.values())

    def observe(self, frame: pl.DataFrame) -> None:
        """Keep the context events among ``frame``'s rows (the ``signatures`` stream)."""
        if self.window_us <= 0:
            return
        rows = frame.filter(
            (pl.col("kind") == "none")
            & (pl.col("role") == "context")
            & (pl.col("implicates") == "node")
            & pl.col("xid").is_null()
            & pl.col("peer").is_null()  # a host announcing its address, not an event
            & pl.col("node").is_not_null()
        )
        if rows.is_empty():
            return
        rows = rows.with_columns(
            pl.col("time").dt.epoch("us").alias("time_us"), gpu=None, host=None
        ).sort("time_us")
        for item in evidence_rows(rows, hardware=False):
            if item.node is not None:
                self.events.setdefault(item.node, deque()).append(item)

    def of(self, faults: list[Located]) -> list[Located]:
        """The context events of each fault's node within the window before the fault, with the
        fault's job: evidence of that fault, never a fault of their own."""
        out: list[Located] = []
        seen: set[tuple[str | None, str]] = set()
        for job_id, fault in faults:
            if fault.node is None or not fault.hardware or (job_id, fault.node) in seen:
                continue
            seen.add((job_id, fault.node))
            out.extend(
                (job_id, item)
                for item in self.events.get(fault.node, ())
                if fault.time - self.window_us <= item.time <= fault.time
            )
        return out

    def forget_before(self, cutoff: int) -> None:
        for node, events in list(self.events.items()):
            while events and events[0].time < cutoff:
                events.popleft()
            if not events:
                del self.events[node]
