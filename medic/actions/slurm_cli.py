"""The Slurm executor over its command-line tools (Slurm 22.05 and later).

Changes go through ``scontrol``/``scancel``; state is read back with ``squeue -O``/``sinfo -o``
and ``|``-separated fields (``scontrol`` has no ``--json`` in 22.05, and ``squeue --json``
ignores its filters there, returning every job). Each command runs through an injected
``CommandRunner`` with a timeout; transient failures (controller unreachable, timeouts) are
retried with exponential backoff. Every action first reads the current state (draining a drained
node, holding a held job or cancelling an ended one succeeds without a command), then acts,
then polls until Slurm shows the effect.
"""

from __future__ import annotations

import datetime as dt
import getpass
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from medic.actions.config import SlurmConfig
from medic.actions.executor import Poller, Retrier
from medic.actions.model import JobFacts, Outcome, done, failed
from medic.probe import Probe
from medic.slurm import (
    JOB_DELIBERATE_END_STATES,
    JOB_ENDED_STATES,
    CommandResult,
    CommandRunner,
    run_command,
    transient,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

NODE_COUNT_TTL_S = 60.0
JOB_FIELDS = (
    "JobID",
    "State",
    "Partition",
    "UserName",
    "PriorityLong",
    "RestartCnt",
    "ReqNodes",
    "NodeList",
)
JOB_FORMAT = ",".join(f"{name}:|" for name in JOB_FIELDS)


class SlurmError(Exception):
    """Slurm refused a command or could not be asked; the message is one line."""


OPERATOR_LEVELS = ("operator", "administrator")
"""``sacctmgr`` admin levels that may drain nodes and requeue others' jobs."""

NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
"""A node name as sinfo prints it; anything else in its output is not sinfo speaking."""

HOLDS_NODES = frozenset({"RUNNING", "CONFIGURING", "SUSPENDED"})
"""Job states in which the job has nodes allocated."""


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    state: str
    partition: str
    user: str
    priority: int
    restarts: int
    required: str
    """``ReqNodes``: the hostlist the job insists on, empty when none."""
    allocated: str = ""
    """``NodeList``: the hostlist it runs (or last ran) on, empty when none."""


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str
    reason: str
    user: str = ""
    """Who set the reason (``sinfo %u``), empty when unknown."""
    since: str = ""
    """When the reason was set (``sinfo %H``, Slurm's local time), empty when unknown."""

    @property
    def drained(self) -> bool:
        """``sinfo %T`` says ``draining`` or ``drained`` (``drng`` short), maybe with a ``*``."""
        return "drain" in self.state or "drng" in self.state


class SlurmCli:
    """Executor over scontrol, scancel, squeue and sinfo."""

    name = "slurm-cli"
    kind = "cli"
    supports = frozenset({"drain", "resume", "requeue", "hold", "release", "cancel"})

    def __init__(
        self,
        config: SlurmConfig | None = None,
        runner: CommandRunner = run_command,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or SlurmConfig()
        self.runner = runner
        self.retrier = Retrier(self.config.retries, self.config.backoff_s, sleep)
        self.poller = Poller(self.config.verify_timeout_s, self.config.poll_s, sleep, clock)
        self.clock = clock
        self._node_count: tuple[float, int] | None = None

    @classmethod
    def probe(cls, config: SlurmConfig) -> Probe:
        """``scontrol ping``, then whether this user may drain and requeue."""
        ping = run_command(["scontrol", "ping"], config.timeout_s)
        if ping.returncode != 0 or "UP" not in ping.stdout:
            return Probe("fail", f"scontrol ping: {ping.message}")
        who = _privilege(config.timeout_s)
        if who is None:
            user = getpass.getuser()
            return Probe(
                "fail",
                f"{user} may not drain nodes or requeue others' jobs: run medic as root or as "
                f"SlurmUser, or give {user} AdminLevel=Operator (docs/deployment.md)",
            )
        return Probe("ok", f"scontrol reaches slurmctld; {who} may drain and requeue")

    def node_checks(self) -> SlurmCli:
        """The CLI drives the node lifecycle itself (reservations, check jobs)."""
        return self

    # -- reading state -------------------------------------------------------------------

    def _run(self, argv: Sequence[str]) -> CommandResult:
        result, attempts = self.retrier.run(
            lambda: self.runner(argv, self.config.timeout_s), transient
        )
        if transient(result):
            raise SlurmError(f"{argv[0]}: {result.message} (after {attempts} attempts)")
        return result

    def _command(self, argv: Sequence[str]) -> str:
        """stdout of a command that must succeed."""
        result = self._run(argv)
        if result.returncode != 0:
            raise SlurmError(f"{' '.join(argv[:2])}: {result.message}")
        return result.stdout

    def read_job(self, job_id: str) -> SlurmJob | None:
        """The job as squeue shows it (ended jobs too, within MinJobAge); None if unknown."""
        result = self._run(["squeue", "-h", "-t", "all", "-j", job_id, "-O", JOB_FORMAT])
        if result.returncode != 0:
            if "invalid job id" in result.message.lower():
                return None
            raise SlurmError(f"squeue: {result.message}")
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        if not lines:
            return None
        fields = lines[0].split("|")
        if len(fields) < len(JOB_FIELDS):
            raise SlurmError(f"squeue: unexpected output {lines[0]!r}")
        try:
            priority, restarts = int(fields[4]), int(fields[5])
        except ValueError:
            raise SlurmError(f"squeue: unexpected output {lines[0]!r}") from None
        job_id, state, partition, user = fields[:4]
        return SlurmJob(job_id, state, partition, user, priority, restarts, fields[6], fields[7])

    def read_node(self, node: str) -> SlurmNode | None:
        out = self._command(["sinfo", "-h", "-N", "-n", node, "-o", "%N|%T|%E"])
        for line in out.splitlines():
            name, _, rest = line.partition("|")
            state, _, reason = rest.partition("|")
            if name == node:
                return SlurmNode(name, state, "" if reason == "none" else reason)
        return None

    def list_nodes(self) -> list[SlurmNode]:
        """Every node once (sinfo lists a node per partition), with its reason, who set it and
        when (``Unknown`` and ``none`` read as empty)."""
        out = self._command(["sinfo", "-h", "-N", "-o", "%N|%T|%E|%u|%H"])
        nodes: dict[str, SlurmNode] = {}
        for line in out.splitlines():
            fields = [("" if f in ("none", "Unknown") else f) for f in line.split("|")]
            if len(fields) == 5 and fields[0]:
                nodes.setdefault(fields[0], SlurmNode(*fields))
        return list(nodes.values())

    def reservations(self, prefix: str) -> list[tuple[str, str, float]]:
        """Reservations whose name starts with ``prefix``: name, node list and start (seconds
        since the epoch; Slurm prints its host's local time)."""
        out = self._command(["scontrol", "-o", "show", "reservation"])
        found = []
        for line in out.splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            name = fields.get("ReservationName", "")
            if name.startswith(prefix):
                try:
                    start = dt.datetime.fromisoformat(fields["StartTime"]).astimezone()
                except (KeyError, ValueError):
                    raise SlurmError(
                        f"scontrol show reservation: unexpected {line[:80]!r}"
                    ) from None
                found.append((name, fields.get("Nodes", ""), start.timestamp()))
        return found

    def job_outcome(self, job_id: str) -> tuple[str, int | None] | None:
        """A job's state and, once it ended, its exit status (``scontrol -o show job``, which
        knows ended jobs within MinJobAge); None when Slurm no longer knows the job."""
        result = self._run(["scontrol", "-o", "show", "job", job_id])
        if result.returncode != 0:
            if "invalid job id" in result.message.lower():
                return None
            raise SlurmError(f"scontrol show job: {result.message}")
        fields = dict(item.split("=", 1) for item in result.stdout.split() if "=" in item)
        state = fields.get("JobState", "")
        if not state:
            raise SlurmError(f"scontrol show job {job_id}: no JobState in {result.stdout[:80]!r}")
        code = fields.get("ExitCode", "").partition(":")[0]
        ended = state in JOB_ENDED_STATES
        return state, int(code) if ended and code.isdigit() else None

    def hostnames(self, hostlist: str) -> list[str]:
        """A Slurm hostlist expression (``n[1-3],n7``) as node names."""
        if not hostlist or hostlist == "(null)":
            return []
        return self._command(["scontrol", "show", "hostnames", hostlist]).split()

    def excluded(self, job_id: str) -> set[str]:
        out = self._command(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%x"])
        lines = out.split()
        return set(self.hostnames(lines[0])) if lines else set()

    def job(self, job_id: str) -> JobFacts | None:
        try:
            job = self.read_job(job_id)
        except SlurmError as exc:
            log.warning("cannot read job %s: %s", job_id, exc)
            return None
        if job is None:
            return None
        return JobFacts(job_id, job.partition or None, job.user or None, job.state, job.restarts)

    def node_names(self) -> set[str]:
        """Every node Slurm knows (read afresh: SlurmError when it cannot tell)."""
        return set(_node_names(self._command(["sinfo", "-h", "-N", "-o", "%N"]).split()))

    def node_count(self) -> int | None:
        """Distinct nodes in the cluster (sinfo lists a node once per partition), cached."""
        now = self.clock()
        if self._node_count is not None and now - self._node_count[0] < NODE_COUNT_TTL_S:
            return self._node_count[1]
        try:
            count = len(self.node_names())
        except SlurmError as exc:
            log.warning("cannot count nodes: %s", exc)
            return None
        self._node_count = (now, count)
        return count

    def drained_nodes(self) -> dict[str, str] | None:
        try:
            out = self._command(["sinfo", "-h", "-N", "-t", "drain", "-o", "%N|%E"])
        except SlurmError as exc:
            log.warning("cannot list drained nodes: %s", exc)
            return None
        pairs = [line.partition("|") for line in out.splitlines() if line.strip()]
        try:
            _node_names(name for name, _, _ in pairs)
        except SlurmError as exc:
            log.warning("cannot list drained nodes: %s", exc)
            return None
        return {name: reason for name, _, reason in pairs}

    # -- actions -------------------------------------------------------------------------

    def drain(self, node: str, reason: str) -> Outcome:
        return self._guarded(lambda: self._drain(node, reason))

    def resume(self, node: str) -> Outcome:
        return self._guarded(lambda: self._resume(node))

    def requeue(
        self, job_id: str, exclude: Sequence[str] = (), since_restarts: int | None = None
    ) -> Outcome:
        return self._guarded(lambda: self._requeue(job_id, exclude, since_restarts))

    def hold(self, job_id: str) -> Outcome:
        return self._guarded(lambda: self._hold(job_id, held=True))

    def release(self, job_id: str) -> Outcome:
        return self._guarded(lambda: self._hold(job_id, held=False))

    def cancel(self, job_id: str) -> Outcome:
        return self._guarded(lambda: self._cancel(job_id))

    def reserve(self, name: str, node: str, user: str) -> Outcome:
        """A maintenance reservation of ``node`` for ``user`` (no end), so that only jobs asking
        for it run there: the way to run a job on a node taken out of service, since Slurm
        schedules nothing on a DRAIN node, reservation or not."""
        return self._guarded(lambda: self._reserve(name, node, user))

    def unreserve(self, name: str) -> Outcome:
        return self._guarded(lambda: self._unreserve(name))

    def submit(self, options: Sequence[str], command: str) -> str:
        """Submit ``command`` as a batch job with sbatch ``options``; its id (SlurmError when
        Slurm refuses)."""
        out = self._command(["sbatch", "--parsable", *options, "--wrap", command])
        job_id = out.strip().split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch: unexpected output {out.strip()[:80]!r}")
        return job_id

    @staticmethod
    def _guarded(action: Callable[[], Outcome]) -> Outcome:
        try:
            return action()
        except SlurmError as exc:
            return failed(str(exc))

    def _known_node(self, node: str) -> SlurmNode:
        found = self.read_node(node)
        if found is None:
            raise SlurmError(f"node {node} is not known to Slurm")
        return found

    def _known_job(self, job_id: str) -> SlurmJob:
        found = self.read_job(job_id)
        if found is None:
            raise SlurmError(f"job {job_id} is not known to Slurm")
        return found

    def _effect(
        self, argv: Sequence[str], read: Callable[[], T], shows: Callable[[T], bool]
    ) -> tuple[bool, T, str]:
        """Run a command that changes Slurm, then poll until Slurm shows its effect: whether it
        did, the last state read, and the command's complaint when it failed but its effect
        shows (the outcome is Slurm's, not the exit status's). A command that failed and whose
        effect does not show fails at once, with its message."""
        result = self._run(argv)
        said = ""
        if result.returncode != 0:
            if not shows(read()):
                raise SlurmError(f"{' '.join(argv[:2])}: {result.message}")
            said = f" ({' '.join(argv[:2])} said: {result.message})"
        ok, value = self.poller.until(read, shows)
        return ok, value, said

    def _verify_timeout(self, what: str, seen: str) -> Outcome:
        return failed(f"{what} not seen within {self.config.verify_timeout_s:g} s ({seen})")

    def _drain(self, node: str, reason: str) -> Outcome:
        before = self._known_node(node)
        if before.drained:
            return done(f"node {node} already {before.state}: {before.reason}", changed=False)
        ok, after, said = self._effect(
            ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"],
            lambda: self._known_node(node),
            lambda n: n.drained and n.reason == reason,
        )
        if not ok:
            return self._verify_timeout(f"drain of {node}", f"state {after.state}")
        return done(f"node {node} {after.state}, reason set{said}")

    def _resume(self, node: str) -> Outcome:
        before = self._known_node(node)
        if not before.drained:
            return done(f"node {node} is {before.state}, not drained", changed=False)
        ok, after, said = self._effect(
            ["scontrol", "update", f"nodename={node}", "state=resume"],
            lambda: self._known_node(node),
            lambda n: not n.drained,
        )
        if not ok:
            return self._verify_timeout(f"resume of {node}", f"state {after.state}")
        return done(f"node {node} {after.state}{said}")

    def _requeue(
        self, job_id: str, exclude: Sequence[str], since_restarts: int | None = None
    ) -> Outcome:
        unknown = sorted(set(exclude) - self.node_names()) if exclude else []
        if unknown:
            return failed(
                f"node {', '.join(unknown)} is not known to Slurm: requeue of job {job_id} "
                "refused, nothing run"
            )
        job = self._known_job(job_id)
        if job.state == "COMPLETING":
            _, job = self.poller.until(
                lambda: self._known_job(job_id), lambda j: j.state != "COMPLETING"
            )
        already = since_restarts is not None and job.restarts > since_restarts
        if job.state in JOB_DELIBERATE_END_STATES and not already:
            return done(f"job {job_id} ended on purpose ({job.state}): not requeued", changed=False)
        requeued = job.state != "PENDING" and not already
        ran_on: set[str] = set()
        said = ""
        if requeued:
            ran_on = set(self.hostnames(job.allocated))
            job, said = self._issue_requeue(job)
        excluded, missing, why = self._exclude(job, exclude, ran_on)
        state = "requeued" if requeued or already else "was already pending"
        where = f", excluding {', '.join(sorted(excluded))}" if excluded else ""
        later = ""
        if self.config.restart_now and not ran_on <= excluded:
            later = f"; it may run on {', '.join(sorted(ran_on - excluded))} again, so it waits "
            later += "out Slurm's credential expiry"
        detail = f"job {job_id} {state} (restarts {job.restarts}){where}{later}{said}"
        if missing:
            names = ", ".join(sorted(missing))
            if not (requeued or already):
                raise SlurmError(f"job {job_id} ({job.state}) could not exclude {names}{why}")
            return Outcome("partial", f"{detail}, but not excluded from {names}{why}")
        return done(detail, requeued or already)

    def _issue_requeue(self, job: SlurmJob) -> tuple[SlurmJob, str]:
        """Requeue a job and wait for Slurm to show it (its restart count up, pending or
        running again): the outcome is what Slurm shows, so a requeue whose command failed but
        happened is done (the command's complaint noted), and one that did not happen fails."""
        before = job.restarts
        result = self._run(["scontrol", "requeue", job.job_id])

        def requeued(j: SlurmJob) -> bool:
            return j.restarts > before and j.state in ("PENDING", "RUNNING")

        said = ""
        if result.returncode != 0:
            if self._known_job(job.job_id).restarts <= before:
                raise SlurmError(f"scontrol requeue: {result.message}")
            said = f" (scontrol requeue said: {result.message})"
        ok, job = self.poller.until(lambda: self._known_job(job.job_id), requeued)
        if not ok:
            raise SlurmError(
                f"requeue of job {job.job_id} not seen within {self.config.verify_timeout_s:g} s "
                f"(state {job.state})"
            )
        return job, said

    def _exclude(
        self, job: SlurmJob, exclude: Sequence[str], ran_on: set[str]
    ) -> tuple[set[str], set[str], str]:
        """Keep the pending job off ``exclude`` (and start it now, if configured and it cannot
        land on a node it just ran on); returns the job's excluded nodes as Slurm reports them
        afterwards, those of ``exclude`` missing from them, and why (empty when none is).

        Slurm revokes a requeued job's credential on the nodes it ran on until ``cred_expire``
        has passed (that is why it delays the job's start): started there sooner, the job is
        killed at launch ("Job credential revoked") and ends FAILED."""
        excluded = self.excluded(job.job_id)
        updates = []
        if not set(exclude) <= excluded:
            updates.append(f"ExcNodeList={','.join(sorted(excluded | set(exclude)))}")
            if set(exclude) & set(self.hostnames(job.required)):
                updates.append("ReqNodeList=")
        if self.config.restart_now and ran_on <= excluded | set(exclude):
            updates.append("StartTime=now")
        why = f" (the job is {job.state})"
        if updates and job.state == "PENDING":
            result = self._run(["scontrol", "update", f"jobid={job.job_id}", *updates])
            why = f" (scontrol update: {result.message})" if result.returncode else ""
            excluded = self.excluded(job.job_id)
        missing = set(exclude) - excluded
        return excluded, missing, why if missing else ""

    def _hold(self, job_id: str, held: bool) -> Outcome:
        verb = "hold" if held else "release"
        job = self._known_job(job_id)
        if held and job.state in HOLDS_NODES:
            return self._requeue_held(job)
        if (job.priority == 0) == held:
            state = "already held" if held else "not held"
            return done(f"job {job_id} {state} ({job.state})", changed=False)
        ok, job, said = self._effect(
            ["scontrol", verb, job_id],
            lambda: self._known_job(job_id),
            lambda j: (j.priority == 0) == held,
        )
        if not ok:
            return self._verify_timeout(f"{verb} of job {job_id}", f"priority {job.priority}")
        return done(f"job {job_id} {'held' if held else 'released'} ({job.state}){said}")

    def _requeue_held(self, job: SlurmJob) -> Outcome:
        """Hold a job that holds nodes: ``scontrol hold`` leaves a running job running (only
        its priority drops), so it is requeued held (``requeuehold``): it gives its nodes
        back and waits PENDING until released. A job Slurm will not requeue (``--no-requeue``)
        is held as it runs, which the outcome says."""
        job_id, before = job.job_id, job.restarts
        result = self._run(["scontrol", "requeuehold", job_id])
        if result.returncode != 0:
            if "disabled" not in result.message.lower():
                raise SlurmError(f"scontrol requeuehold {job_id}: {result.message}")
            self._command(["scontrol", "hold", job_id])
            return done(
                f"job {job_id} held but still {job.state} on its nodes: Slurm will not requeue "
                f"it ({result.message})"
            )
        ok, job = self.poller.until(
            lambda: self._known_job(job_id),
            lambda j: j.state == "PENDING" and j.priority == 0 and j.restarts > before,
        )
        if not ok:
            return self._verify_timeout(f"requeuehold of job {job_id}", f"state {job.state}")
        return done(f"job {job_id} requeued held (PENDING, restarts {job.restarts}): nodes freed")

    def _reservation(self, name: str) -> bool:
        result = self._run(["scontrol", "show", "reservation", name])
        if result.returncode == 0:
            return True
        if "not found" in result.message.lower():
            return False
        raise SlurmError(f"scontrol show reservation: {result.message}")

    def _reserve(self, name: str, node: str, user: str) -> Outcome:
        if self._reservation(name):
            return done(f"reservation {name} exists", changed=False)
        self._command(
            [
                "scontrol",
                "create",
                "reservation",
                f"reservationname={name}",
                f"nodes={node}",
                f"users={user}",
                "starttime=now",
                "duration=UNLIMITED",
                "flags=maint,ignore_jobs",
            ]
        )
        return done(f"reservation {name} holds {node}")

    def _unreserve(self, name: str) -> Outcome:
        if not self._reservation(name):
            return done(f"no reservation {name}", changed=False)
        self._command(["scontrol", "delete", f"reservationname={name}"])
        return done(f"reservation {name} deleted")

    def _cancel(self, job_id: str) -> Outcome:
        job = self._known_job(job_id)
        if job.state in JOB_ENDED_STATES:
            return done(f"job {job_id} already ended ({job.state})", changed=False)
        ok, job, said = self._effect(
            ["scancel", job_id], lambda: self._known_job(job_id), lambda j: j.state == "CANCELLED"
        )
        if not ok:
            return self._verify_timeout(f"cancel of job {job_id}", f"state {job.state}")
        return done(f"job {job_id} cancelled{said}")


def _privilege(timeout_s: float) -> str | None:
    """Why this user may drain and requeue (root, SlurmUser, an operator), or None."""
    user = getpass.getuser()
    if os.geteuid() == 0:
        return "root"
    config = run_command(["scontrol", "show", "config"], timeout_s)
    slurm_user = re.search(r"^SlurmUser\s*=\s*(\S+)", config.stdout, re.MULTILINE)
    if slurm_user and slurm_user.group(1).split("(")[0] == user:
        return f"{user} (SlurmUser)"
    level = run_command(["sacctmgr", "-nP", "show", "user", user, "format=adminlevel"], timeout_s)
    if level.returncode == 0 and level.stdout.strip().lower() in OPERATOR_LEVELS:
        return f"{user} (AdminLevel={level.stdout.strip()})"
    return None


def _node_names(names: Iterable[str]) -> list[str]:
    """``names`` when each is a node name; SlurmError naming the first that is not."""
    found = list(names)
    bad = next((name for name in found if not NODE_NAME.match(name)), None)
    if bad is not None:
        raise SlurmError(f"sinfo: unexpected output {bad[:80]!r}")
    return found
