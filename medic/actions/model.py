"""The records the actions stage passes around: what a route asks for (``Intent``), what an
executor reports (``Outcome``), what was decided and why (``Decision``), what Slurm says about a
job (``JobFacts``), and the ``actions`` audit table built from decisions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from medic import schema

SlurmAction = Literal["drain", "requeue", "hold", "release", "cancel"]
SLURM_ACTIONS: tuple[SlurmAction, ...] = ("drain", "requeue", "hold", "release", "cancel")
NODE_ACTIONS = frozenset({"drain", "resume"})
JOB_ACTIONS = frozenset({"requeue", "hold", "release", "cancel"})
NOTIFY = "notify"
Status = Literal["done", "partial", "failed", "suppressed", "recorded"]
"""``done``: Slurm shows the action's effect afterwards (whatever its command's exit status);
``partial``: Slurm shows part of it (a requeue without its exclusion); ``failed``: the executor
gave up, refused (a node Slurm does not know) or Slurm does not show the effect;
``suppressed``: a guard stopped it (``Decision.guard`` names it);
``recorded``: the backtest recorder took it down instead of executing it."""


@dataclass(frozen=True)
class Intent:
    """One action a route asks for, before the guards have had their say."""

    action: str
    route: str
    node: str | None = None
    job_id: str | None = None
    receiver: str | None = None
    exclude: tuple[str, ...] = ()
    """For ``requeue``: the nodes the job must not run on again (the detection's culprits)."""

    @property
    def target(self) -> str:
        """What the action touches, for messages and idempotency keys."""
        if self.action == NOTIFY:
            return f"receiver {self.receiver}"
        if self.action in NODE_ACTIONS:
            return f"node {self.node}" if self.node else "no node"
        return f"job {self.job_id}" if self.job_id else "no job"


@dataclass(frozen=True)
class Outcome:
    """What an executor did: its status and a one-line detail (the verified Slurm state, or
    why it failed). ``changed`` is False when Slurm was already in the wanted state."""

    status: Status
    detail: str
    changed: bool = True

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def done(detail: str, changed: bool = True) -> Outcome:
    return Outcome("done", detail, changed)


def failed(detail: str) -> Outcome:
    return Outcome("failed", detail, False)


@dataclass(frozen=True)
class JobFacts:
    """What Slurm says about a job, for routes and guards that filter on it; None = unknown."""

    job_id: str
    partition: str | None = None
    user: str | None = None
    state: str | None = None
    restarts: int | None = None


@dataclass(frozen=True)
class Decision:
    """One row of the audit: what was decided for a detection, whether it ran, and why."""

    time: int
    detection_id: str
    job_id: str | None
    node: str | None
    action: str
    mode: str
    status: Status
    guard: str | None
    reason: str

    def row(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in schema.ACTIONS.names}


def actions_table(decisions: Iterable[Decision]) -> pa.Table:
    """Decisions in the ``medic.schema.ACTIONS`` schema, in decision order."""
    rows = [d.row() for d in decisions]
    if not rows:
        return schema.empty(schema.ACTIONS)
    columns = {name: [r[name] for r in rows] for name in schema.ACTIONS.names}
    return pa.Table.from_pydict(columns, schema=schema.ACTIONS)
