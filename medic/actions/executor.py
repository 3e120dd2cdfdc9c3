"""The Executor seam: what the actions stage asks of Slurm, and the retry/poll helpers the
executors share.

Every executor call returns an ``Outcome`` instead of raising: a Slurm that is down, answers
garbage or refuses ends as a ``failed`` outcome whose detail says why, and the stage records
it. Calls are idempotent (draining a drained node succeeds without touching it) and their outcome
is what Slurm shows afterwards, not a command's exit status: ``done`` when the effect shows,
``partial`` when part of it does (a requeue without its exclusion).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from medic.actions.model import JobFacts, Outcome, failed
from medic.probe import Probe

if TYPE_CHECKING:
    from medic.actions.config import SlurmConfig
    from medic.actions.lifecycle import NodeChecks

T = TypeVar("T")


class Executor(Protocol):
    """A backend's verbs and reads; every call answers an ``Outcome`` (or None), never raises."""

    name: str
    supports: frozenset[str]
    """The actions it can carry out; the stage refuses routes that ask for others."""

    def drain(self, node: str, reason: str) -> Outcome: ...

    def resume(self, node: str) -> Outcome: ...

    def requeue(
        self, job_id: str, exclude: Sequence[str] = (), since_restarts: int | None = None
    ) -> Outcome:
        """Requeue the job so it restarts from its checkpoint, never on ``exclude``; a job
        whose restart count is already above ``since_restarts`` (read when the requeue was
        planned) was requeued: only its exclusion is made sure of."""
        ...

    def hold(self, job_id: str) -> Outcome: ...

    def release(self, job_id: str) -> Outcome: ...

    def cancel(self, job_id: str) -> Outcome: ...

    def job(self, job_id: str) -> JobFacts | None:
        """What Slurm says about the job; None when it cannot tell."""
        ...

    def node_count(self) -> int | None:
        """Nodes in the cluster; None when unknown."""
        ...

    def drained_nodes(self) -> dict[str, str] | None:
        """Drained (or draining) nodes and their reasons; None when unknown."""
        ...

    def node_checks(self) -> NodeChecks | None:
        """What the node lifecycle drives (reservations, check jobs), when this backend can;
        None when it cannot, and the lifecycle stays off."""
        ...


class ExecutorClass(Protocol):
    """A registered executor: built from ``[rules.slurm]`` by its ``kind``, and probed by
    ``medic doctor``."""

    kind: ClassVar[str]
    """Its name in ``[rules.slurm] executor``."""
    supports: frozenset[str]

    def __call__(self, config: SlurmConfig) -> Executor: ...

    def probe(self, config: SlurmConfig) -> Probe:
        """Reach the backend without changing anything: ``ok`` when it answers and this
        user may act, else ``fail`` and why."""
        ...


@dataclass(frozen=True)
class Order:
    """One verb for an executor to carry out, with whatever any verb needs."""

    action: str
    node: str = ""
    job_id: str = ""
    reason: str = ""
    exclude: tuple[str, ...] = ()
    restarts: int | None = None
    """For ``requeue``: the job's restart count when the requeue was planned."""


VERBS: Mapping[str, Callable[[Any, Order], Outcome]] = {
    "drain": lambda executor, order: executor.drain(order.node, order.reason),
    "resume": lambda executor, order: executor.resume(order.node),
    "requeue": lambda executor, order: executor.requeue(
        order.job_id, order.exclude, order.restarts
    ),
    "hold": lambda executor, order: executor.hold(order.job_id),
    "release": lambda executor, order: executor.release(order.job_id),
    "cancel": lambda executor, order: executor.cancel(order.job_id),
}
"""How each verb is asked of an executor: a new verb is one entry here and a method on the
executors that claim it in ``supports``."""


def carry_out(executor: Executor, order: Order) -> Outcome:
    """``order`` through ``executor``; a verb it does not claim fails (the stage refuses routes
    that ask for one, so this only answers a journal written under another executor)."""
    verb = VERBS.get(order.action)
    if verb is None or order.action not in executor.supports:
        return failed(f"the {executor.name} executor cannot {order.action}")
    return verb(executor, order)


class Notifier(Protocol):
    def notify(self, receiver: str, payload: dict[str, Any]) -> Outcome: ...


class Retrier:
    """Runs a call again after transient failures, pausing ``backoff_s`` and doubling it."""

    def __init__(
        self, retries: int, backoff_s: float, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.retries = retries
        self.backoff_s = backoff_s
        self.sleep = sleep

    def run(self, call: Callable[[], T], transient: Callable[[T], bool]) -> tuple[T, int]:
        """The first result that is not transient (or the last one) and the attempts made."""
        result = call()
        attempt = 1
        while transient(result) and attempt <= self.retries:
            self.sleep(self.backoff_s * 2 ** (attempt - 1))
            result = call()
            attempt += 1
        return result, attempt


class Poller:
    """Re-reads state until a condition holds or the verify timeout passes (wall clock: this is
    the I/O edge, never event time)."""

    def __init__(
        self,
        timeout_s: float,
        interval_s: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.sleep = sleep
        self.clock = clock

    def until(self, read: Callable[[], T], ok: Callable[[T], bool]) -> tuple[bool, T]:
        """Whether ``ok`` held, and the last value read."""
        deadline = self.clock() + self.timeout_s
        value = read()
        while not ok(value):
            if self.clock() >= deadline:
                return False, value
            self.sleep(self.interval_s)
            value = read()
        return True, value
