"""The per-node history of the recovery loop: every drain medic found, drain by others, health
check, resume and keep, as ``node_events`` rows in the history store, and the recent events per
node in memory for the lifecycle's budgets and cooldowns.

A restarted service reads the recent events back (``NodeJournal.restore``), so a check in flight
is followed to its end and check budgets survive the restart. A store that refuses a write costs
a logged error, never the service: the in-memory journal still holds the event.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from medic import schema
from medic.history import HistoryError
from medic.history.store import HistoryStore

log = logging.getLogger(__name__)

EVENTS = (
    "drained",
    "drained_by_other",
    "check_started",
    "check_passed",
    "check_failed",
    "resumed",
    "kept",
    "lemon",
)
"""What a ``node_events`` row says (see migration 0004)."""
KEPT_PER_NODE = 64
"""Events held in memory per node (the store keeps them all)."""
NODE_EVENTS = pa.schema(
    [
        pa.field("time", schema.TIME, nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("detail", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class NodeEvent:
    time: int
    node: str
    event: str
    detail: str
    job_id: str | None = None

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"unknown node event {self.event!r}")


def node_event_rows(events: Iterable[NodeEvent]) -> pa.Table:
    rows = list(events)
    return pa.Table.from_pydict(
        {
            "time": [e.time for e in rows],
            "node": [e.node for e in rows],
            "event": [e.event for e in rows],
            "job_id": [e.job_id for e in rows],
            "detail": [e.detail for e in rows],
        },
        schema=NODE_EVENTS,
    )


class NodeJournal:
    """Node events: written to the store (when there is one) and kept per node in memory."""

    def __init__(self, store: HistoryStore | None = None) -> None:
        self.store = store
        self.by_node: dict[str, deque[NodeEvent]] = defaultdict(lambda: deque(maxlen=KEPT_PER_NODE))
        self.errors = 0

    @classmethod
    def restore(cls, store: HistoryStore, since: int) -> NodeJournal:
        """A journal holding the store's events from ``since`` on (event time, µs)."""
        journal = cls(store)
        rows = store.sql(
            "SELECT epoch_us(time) AS time, node, event, job_id, detail FROM node_events "
            "WHERE epoch_us(time) >= ? ORDER BY time",
            [since],
        )
        for row in rows.to_pylist():
            journal.by_node[row["node"]].append(
                NodeEvent(row["time"], row["node"], row["event"], row["detail"], row["job_id"])
            )
        return journal

    def record(self, event: NodeEvent) -> None:
        self.by_node[event.node].append(event)
        log.info("node %s: %s: %s", event.node, event.event, event.detail)
        if self.store is None:
            return
        try:
            self.store.append("node_events", node_event_rows([event]))
        except HistoryError as exc:
            self.errors += 1
            log.error("%s", exc)

    def last(self, node: str, *events: str) -> NodeEvent | None:
        """The node's newest event of one of these kinds (any kind when none are named)."""
        for event in reversed(self.by_node.get(node, ())):
            if not events or event.event in events:
                return event
        return None

    def count(self, node: str, event: str, since: int) -> int:
        return sum(1 for e in self.by_node.get(node, ()) if e.event == event and e.time >= since)

    def nodes(self) -> list[str]:
        return sorted(self.by_node)

    def check_jobs(self) -> set[str]:
        """Ids of the check jobs the lifecycle started (medic's own jobs)."""
        return {
            e.job_id
            for events in self.by_node.values()
            for e in events
            if e.event == "check_started" and e.job_id
        }
