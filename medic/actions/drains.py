"""Drains by others: Slurm drains that health-check programs or people set, ingested from the
``scheduler`` stream as ``drained_by_other`` node events and counted.

A node row whose state carries DRAIN and whose reason does not start with medic's
``reason_prefix`` is someone else's drain; each (node, reason) is recorded once, and again only
after the node left the drained state. medic respects them: the lifecycle never checks or
resumes such a node, and a drain medic asks for on it keeps the other reason.
"""

from __future__ import annotations

from typing import ClassVar

import polars as pl

from medic.actions.node_journal import NodeEvent, NodeJournal
from medic.ingest.base import Batch
from medic.slurm import NODE_DRAIN_FLAG


class ExternalDrains:
    """A pipeline observer of node rows (see the module docstring)."""

    name: ClassVar[str] = "external_drains"
    streams: ClassVar[frozenset[str]] = frozenset({"scheduler"})

    def __init__(self, journal: NodeJournal, reason_prefix: str) -> None:
        self.journal = journal
        self.prefix = f"{reason_prefix}:"
        self.current: dict[str, str] = {}
        """Nodes drained by others, as far as the stream has shown, and their reasons."""
        self.count = 0
        """Drains by others recorded since the start."""

    def update(self, batch: Batch) -> None:
        nodes = batch.frame.filter((pl.col("kind") == "node") & pl.col("node").is_not_null())
        if nodes.is_empty():
            return
        marked = nodes.select(
            pl.col("time").dt.epoch("us"),
            "node",
            pl.col("reason").fill_null(""),
            (
                pl.col("state").str.to_uppercase().str.contains(NODE_DRAIN_FLAG)
                & ~pl.col("reason").fill_null("").str.starts_with(self.prefix)
            ).alias("other"),
        )
        for time, node, reason, other in marked.iter_rows():
            if not other:
                self.current.pop(node, None)
            elif self.current.get(node) != reason:
                self.current[node] = reason
                self.count += 1
                self.journal.record(
                    NodeEvent(time, node, "drained_by_other", reason or "no reason")
                )

    def advance(self, watermark: int) -> None:
        return None
