"""Backtests' executor, which touches nothing and takes every action down as ``recorded``, and
the log of decisions that becomes the ``actions`` table (``actions.parquet``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from medic.actions.model import Decision, JobFacts, Outcome, actions_table
from medic.recording import Recording

RECORDED = "not executed: recorded for the backtest"


class RecordingExecutor:
    """Knows the cluster only as a recording shows it: its nodes, and no job's partition or
    user (recordings do not carry them), so routes that filter on those do not match."""

    name = "recorder"
    supports = frozenset({"drain", "resume", "requeue", "hold", "release", "cancel"})

    def __init__(self, nodes: Iterable[str] = (), jobs: Mapping[str, JobFacts] | None = None):
        self.nodes = frozenset(nodes)
        self.jobs = dict(jobs or {})

    @classmethod
    def for_recording(cls, recording: Recording) -> RecordingExecutor:
        """Every node named anywhere in the recording's logs, telemetry or scheduler rows."""
        columns = [
            recording.logs.column("node"),
            recording.distinct("gpu", "node"),
            recording.scheduler.column("node"),
            pc.list_flatten(recording.scheduler.column("nodes")),
        ]
        values = pa.chunked_array([chunk for c in columns for chunk in c.chunks], pa.string())
        return cls(n for n in pc.unique(values.drop_null()).to_pylist() if n)

    def _recorded(self) -> Outcome:
        return Outcome("recorded", RECORDED)

    def drain(self, node: str, reason: str) -> Outcome:
        return self._recorded()

    def resume(self, node: str) -> Outcome:
        return self._recorded()

    def requeue(
        self, job_id: str, exclude: Sequence[str] = (), since_restarts: int | None = None
    ) -> Outcome:
        return self._recorded()

    def hold(self, job_id: str) -> Outcome:
        return self._recorded()

    def release(self, job_id: str) -> Outcome:
        return self._recorded()

    def cancel(self, job_id: str) -> Outcome:
        return self._recorded()

    def notify(self, receiver: str, payload: dict[str, Any]) -> Outcome:
        return self._recorded()

    def job(self, job_id: str) -> JobFacts | None:
        return self.jobs.get(job_id)

    def node_count(self) -> int | None:
        return len(self.nodes) or None

    def node_checks(self) -> None:
        return None

    def drained_nodes(self) -> dict[str, str] | None:
        return None


class ActionLog:
    """Every decision of the stage, in order, until its owner takes them (the history writer
    live, the backtest at the end)."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []

    def extend(self, decisions: Iterable[Decision]) -> None:
        self.decisions.extend(decisions)

    def table(self) -> pa.Table:
        return actions_table(self.decisions)

    def take(self) -> pa.Table:
        """The decisions so far as a table, forgetting them here."""
        table = self.table()
        self.decisions = []
        return table
