"""Node lifecycle: a node medic drained is checked through Slurm and resumed, or kept drained.

    drained (by medic) --cooldown--> check --pass--> resumed
                                           \\--fail--> drained again (reason: the check's words)
    budget spent, or a lemon --> kept drained, flagged for a person

Slurm 22.05 schedules nothing on a DRAIN node, even inside a reservation, so a check runs like
this (verified on the local Slurm): a maintenance reservation of the node for medic's user
(``flags=maint,ignore_jobs``, no end), then resume (the reservation keeps every other job off),
then ``sbatch -w NODE --reservation=R`` the configured command. Exit status 0 of the job is a
pass, unless its output holds a failed DCGM test (``medic.actions.check_output``): the
reservation is deleted and the node is back in service. Anything else (a non-zero
exit, a timeout, a job Slurm lost) drains the node again with the check's outcome as its reason,
then deletes the reservation. A service that dies mid-check leaves the node reserved (out of
service, never unchecked in service); the restarted service follows the check job to its end.

Only nodes whose drain reason starts with medic's ``reason_prefix`` are touched: a drain by a
health-check program or a person is never resumed. Budgets: at most ``max_checks_per_node``
checks per node within ``check_window_s`` and ``max_concurrent_checks`` at once; a node whose
lemon score reaches the threshold is kept without a check. Every step is a ``node_events`` row
(``NodeJournal``). The lifecycle runs at the service's I/O edge on the wall clock, in enforce
mode only.
"""

from __future__ import annotations

import getpass
import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from medic.actions.check_output import read_check
from medic.actions.model import Outcome
from medic.actions.node_journal import NodeEvent, NodeJournal
from medic.actions.recovery_config import LifecycleConfig
from medic.actions.slurm_cli import SlurmError, SlurmNode
from medic.ingest.slurm import OWN_JOB_COMMENT
from medic.slurm import COMPLETED, JOB_ENDED_STATES
from medic.timeutil import US

log = logging.getLogger(__name__)

JOB_IN_REASON = re.compile(r"\bjob (\S+) ")
MAX_DETAIL = 200

LemonScore = Callable[[str, int], float]
"""A node's lemon score at a time (µs)."""
Alert = Callable[[NodeEvent], None]


class NodeChecks(Protocol):
    """What the lifecycle drives: an executor's ``node_checks()``. Reads and submissions raise
    ``SlurmError``; the verbs answer an ``Outcome``."""

    def list_nodes(self) -> list[SlurmNode]: ...

    def reservations(self, prefix: str) -> list[tuple[str, str, float]]: ...

    def reserve(self, name: str, node: str, user: str) -> Outcome: ...

    def unreserve(self, name: str) -> Outcome: ...

    def submit(self, options: Sequence[str], command: str) -> str: ...

    def job_outcome(self, job_id: str) -> tuple[str, int | None] | None: ...

    def drain(self, node: str, reason: str) -> Outcome: ...

    def resume(self, node: str) -> Outcome: ...

    def cancel(self, job_id: str) -> Outcome: ...


class NodeLifecycle:
    """Drives the lifecycle of medic's drained nodes, one ``tick`` at a time."""

    def __init__(
        self,
        config: LifecycleConfig,
        slurm: NodeChecks,
        journal: NodeJournal,
        reason_prefix: str,
        lemon: LemonScore | None = None,
        alert: Alert | None = None,
        user: str | None = None,
    ) -> None:
        self.config = config
        self.slurm = slurm
        self.journal = journal
        self.prefix = reason_prefix
        self.lemon = lemon
        self.alert = alert
        self.user = user or getpass.getuser()
        self.output_dir = Path(config.output_dir).resolve()
        self.counts: Counter[str] = Counter()
        """Lifecycle events recorded since the start, by event."""

    def reservation(self, node: str) -> str:
        return f"{self.config.reservation_prefix}-{node}"

    def output(self, node: str, job_id: str) -> Path:
        return self.output_dir / f"{self.reservation(node)}-{job_id}.out"

    def checking(self) -> list[str]:
        """Nodes whose check is in flight."""
        return [
            node
            for node in self.journal.nodes()
            if (last := self.journal.last(node, "check_started", "check_passed", "check_failed"))
            and last.event == "check_started"
        ]

    def tick(self, now: int) -> None:
        """One pass over the cluster's nodes at wall time ``now`` (µs)."""
        try:
            nodes = self.slurm.list_nodes()
        except SlurmError as exc:
            log.warning("lifecycle: cannot list nodes: %s", exc)
            return
        checking = set(self.checking())
        self._orphans(checking, now)
        for node in nodes:
            try:
                if node.name in checking:
                    if self._follow(node.name, now):
                        checking.discard(node.name)
                elif self._consider(node, now, len(checking)):
                    checking.add(node.name)
            except SlurmError as exc:
                log.warning("lifecycle: node %s: %s", node.name, exc)

    def _orphans(self, checking: set[str], now: int) -> None:
        """A check reservation that no check in the journal owns and that is older than a check
        may take (medic died between reserving and recording): its node is drained again, so
        that it goes through the lifecycle instead of staying out of service unnoticed."""
        try:
            found = self.slurm.reservations(f"{self.config.reservation_prefix}-")
        except SlurmError as exc:
            log.warning("lifecycle: cannot list reservations: %s", exc)
            return
        for name, node, start in found:
            owner = name.removeprefix(f"{self.config.reservation_prefix}-")
            stale = now - start * US > self._us("check_timeout_s")
            if owner == node and owner not in checking and stale:
                self._fail(node, now, None, f"check interrupted: reservation {name} left over")

    def ours(self, node: SlurmNode) -> bool:
        return node.reason.startswith(f"{self.prefix}:")

    def _record(self, now: int, node: str, event: str, detail: str, job: str | None = None) -> None:
        self.journal.record(NodeEvent(now, node, event, " ".join(detail.split()), job))
        self.counts[event] += 1

    def _keep(self, now: int, node: str, event: str, detail: str) -> None:
        self._record(now, node, event, detail)
        if event == "lemon":
            self._record(now, node, "kept", detail)
        kept = self.journal.last(node, "kept")
        if self.alert is not None and kept is not None:
            self.alert(kept)

    def _consider(self, node: SlurmNode, now: int, in_flight: int) -> bool:
        """A drained node of medic's: note it, keep it, or start its check (True)."""
        if not node.drained or not self.ours(node):
            return False
        name = node.name
        drained = self.journal.last(name, "drained")
        if drained is None or drained.detail != " ".join(node.reason.split()):
            match = JOB_IN_REASON.search(node.reason)
            self._record(now, name, "drained", node.reason, match[1] if match else None)
            drained = self.journal.last(name, "drained")
        latest = self.journal.last(name, "drained", "kept")
        if drained is None or latest is None or latest.event == "kept":
            return False
        if not node.state.startswith("drained") or now - drained.time < self._us("check_after_s"):
            return False
        config = self.config
        score = self.lemon(name, now) if self.lemon is not None else 0.0
        if score >= config.lemon.threshold:
            self._keep(now, name, "lemon", f"lemon score {score:.2f} >= {config.lemon.threshold:g}")
            return False
        checks = self.journal.count(name, "check_started", now - self._us("check_window_s"))
        if checks >= config.max_checks_per_node:
            self._keep(
                now,
                name,
                "kept",
                f"{checks} checks within {config.check_window_s:g} s "
                f"(max_checks_per_node = {config.max_checks_per_node})",
            )
            return False
        if in_flight >= config.max_concurrent_checks:
            return False
        return self._start(name, now)

    def _us(self, name: str) -> int:
        return round(float(getattr(self.config, name)) * US)

    def _start(self, node: str, now: int) -> bool:
        reservation = self.reservation(node)
        reserved = self.slurm.reserve(reservation, node, self.user)
        if not reserved.ok:
            self._record(now, node, "check_failed", f"cannot reserve: {reserved.detail}")
            return False
        resumed = self.slurm.resume(node)
        if not resumed.ok:
            self.slurm.unreserve(reservation)
            self._record(now, node, "check_failed", f"cannot resume: {resumed.detail}")
            return False
        self.output_dir.mkdir(parents=True, exist_ok=True)
        options = [
            f"--job-name={reservation}",
            f"--comment={OWN_JOB_COMMENT} of {node}",
            f"--nodelist={node}",
            f"--reservation={reservation}",
            f"--time={max(1, round(self.config.check_timeout_s / 60))}",
            f"--output={self.output_dir}/{reservation}-%j.out",
            "--no-requeue",
            *self.config.sbatch_args,
        ]
        try:
            job_id = self.slurm.submit(options, self.config.check_command)
        except SlurmError as exc:
            self._fail(node, now, None, f"cannot submit the check: {exc}")
            return False
        self._record(
            now, node, "check_started", f"{self.config.check_command} in {reservation}", job_id
        )
        return True

    def _follow(self, node: str, now: int) -> bool:
        """Follow a check in flight; True once it has ended (passed or failed)."""
        started = self.journal.last(node, "check_started")
        job_id = started.job_id if started is not None else None
        if started is None or job_id is None:
            return self._fail(node, now, None, "check job unknown")
        outcome = self.slurm.job_outcome(job_id)
        if outcome is None:
            return self._fail(node, now, job_id, f"check job {job_id} is no longer known to Slurm")
        state, code = outcome
        base = state.split()[0]
        if base not in JOB_ENDED_STATES:
            if now - started.time <= self._us("check_timeout_s"):
                return False
            self.slurm.cancel(job_id)
            limit = self.config.check_timeout_s
            return self._fail(node, now, job_id, f"check job {job_id} timed out ({limit:g} s)")
        said = read_check(self.output(node, job_id))
        if base == COMPLETED and code == 0 and not said.failed_tests:
            return self._pass(node, now, job_id, said.detail)
        exit_text = f" exit {code}" if code is not None else ""
        detail = said.detail or "no output"
        return self._fail(node, now, job_id, f"check job {job_id} {base}{exit_text}: {detail}")

    def _pass(self, node: str, now: int, job_id: str, said: str) -> bool:
        freed = self.slurm.unreserve(self.reservation(node))
        if not freed.ok:
            log.warning("lifecycle: %s passed its check, but %s", node, freed.detail)
            return False
        self._record(now, node, "check_passed", said or "exit 0", job_id)
        self._record(now, node, "resumed", f"check job {job_id} passed", job_id)
        return True

    def _fail(self, node: str, now: int, job_id: str | None, why: str) -> bool:
        reason = f"{self.prefix}: health check failed: {why}"[:MAX_DETAIL]
        drained = self.slurm.drain(node, reason)
        if not drained.ok:
            log.warning("lifecycle: cannot drain %s after a failed check: %s", node, drained.detail)
            return False
        freed = self.slurm.unreserve(self.reservation(node))
        if not freed.ok:
            log.warning("lifecycle: %s stays reserved: %s", node, freed.detail)
        self._record(now, node, "check_failed", why, job_id)
        failed = self.journal.last(node, "check_failed")
        if self.alert is not None and failed is not None:
            self.alert(failed)
        return True
